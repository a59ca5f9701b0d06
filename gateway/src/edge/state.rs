//! What every handler of the edge shares: the MCP endpoints, the session
//! and body settings, the draining flag, and who a request's caller is
//! and what it may see.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::Request;
use axum::response::Response;
use rmcp::transport::streamable_http_server::StreamableHttpServerConfig;
use tokio_util::sync::CancellationToken;

use crate::config::ListingConfig;
use crate::identity::inbound::{Caller, Inbound};
use crate::mcp::endpoint::{mcp_service, McpEndpoint, ScopedServices, SessionSettings};
use crate::mcp::session::SessionKey;
use crate::mcp::shared::Shared;
use crate::mcp::view::View;
use crate::serving::reload::CatalogStore;

/// Everything the router needs.
#[derive(Clone)]
pub struct AppState {
    pub shared: Arc<Shared>,
    pub(super) root: McpEndpoint,
    pub(super) scoped: Arc<ScopedServices>,
    pub(super) mcp_config: Arc<StreamableHttpServerConfig>,
    pub(super) session_key: SessionKey,
    pub(super) sessions: SessionSettings,
    /// Set by [`serve`](super::shutdown::serve) at the shutdown signal:
    /// `/readyz` then fails.
    pub(super) draining: Arc<AtomicBool>,
    pub(super) inbound: Arc<Inbound>,
    /// Modes of requests that do not choose one.
    pub(super) listing: Arc<ListingConfig>,
}

/// Settings of the HTTP edge.
#[derive(Debug, Clone)]
pub struct EdgeOptions {
    /// Accepted `Host` values (DNS-rebinding protection). Empty: any host.
    pub allowed_hosts: Vec<String>,
    /// Accepted `Origin` values; empty: requests without Origin or any
    /// Origin pass the origin check (Host is still checked).
    pub allowed_origins: Vec<String>,
    /// tools/list page size (tools).
    pub page_size: usize,
    /// tools/list page budget (JSON bytes of the tools on a page).
    pub page_bytes: usize,
    /// Cancelled at shutdown: ends every MCP session and stream.
    pub cancel: CancellationToken,
    pub sse_keep_alive: Option<Duration>,
    /// Signs session ids; replicas sharing it accept each other's sessions.
    pub session_key: SessionKey,
    /// Largest MCP request body; larger ones answer 413 unread
    /// ([`crate::edge::intake::DEFAULT_MAX_REQUEST_BODY_BYTES`]).
    pub max_request_body_bytes: usize,
    /// Session cap and idle expiry of this replica.
    pub sessions: SessionSettings,
    /// Inbound authentication of the MCP endpoints; open by default.
    pub inbound: Arc<Inbound>,
    /// Access to upstreams without an `access` policy.
    pub default_access: catalog::access::DefaultAccess,
    /// Listing modes and search mode of `/mcp` and `/mcp/{prefix}`.
    pub listing: ListingConfig,
}

impl Default for EdgeOptions {
    fn default() -> Self {
        EdgeOptions {
            allowed_hosts: vec!["localhost".into(), "127.0.0.1".into(), "::1".into()],
            allowed_origins: Vec::new(),
            page_size: crate::mcp::pages::DEFAULT_PAGE_SIZE,
            page_bytes: crate::mcp::pages::DEFAULT_PAGE_BYTES,
            cancel: CancellationToken::new(),
            sse_keep_alive: Some(Duration::from_secs(15)),
            session_key: SessionKey::random(),
            max_request_body_bytes: crate::edge::intake::DEFAULT_MAX_REQUEST_BODY_BYTES,
            sessions: SessionSettings::default(),
            inbound: Inbound::open(),
            default_access: Default::default(),
            listing: ListingConfig::default(),
        }
    }
}

impl AppState {
    pub fn new(store: Arc<CatalogStore>, opts: &EdgeOptions) -> Self {
        let pages = crate::mcp::pages::PageLimits {
            tools: opts.page_size,
            bytes: opts.page_bytes,
        };
        let shared = Shared::new(store, pages, opts.default_access);
        shared.set_search(opts.listing.search_settings());
        shared.warn_missing_pinned();
        shared.spawn_notifier();
        let mut cfg = StreamableHttpServerConfig::default()
            .with_allowed_hosts(opts.allowed_hosts.clone())
            .with_cancellation_token(opts.cancel.clone())
            .with_sse_keep_alive(opts.sse_keep_alive)
            // Stateless (2026-07-28) requests whose handler sends nothing
            // but the result get it as plain JSON rather than a one-event
            // SSE stream: less framing, and the client need not parse SSE.
            .with_json_response(true)
            .with_max_request_body_bytes(opts.max_request_body_bytes);
        if opts.allowed_hosts.is_empty() {
            cfg = cfg.disable_allowed_hosts();
        }
        // NB: a DNS-rebinding page sends its own Origin; browsers cannot
        // forge it. Unless origins are given explicitly, a browser Origin
        // must name an allowed host (any port, http or https). Requests
        // without Origin (non-browser clients) are unaffected.
        let origins = if !opts.allowed_origins.is_empty() {
            opts.allowed_origins.clone()
        } else {
            origins_for_hosts(&opts.allowed_hosts)
        };
        if !origins.is_empty() {
            cfg = cfg
                .with_allowed_origins(origins)
                .enforce_origin_validation();
        }
        let cfg = Arc::new(cfg);
        AppState {
            root: mcp_service(
                shared.clone(),
                View::ROOT,
                cfg.clone(),
                &opts.session_key,
                &opts.sessions,
            ),
            shared,
            scoped: Arc::new(ScopedServices::default()),
            mcp_config: cfg,
            session_key: opts.session_key.clone(),
            sessions: opts.sessions.clone(),
            draining: Arc::new(AtomicBool::new(false)),
            inbound: opts.inbound.clone(),
            listing: Arc::new(opts.listing.clone()),
        }
    }
}

impl AppState {
    /// [`Inbound::admit`], counting refusals by reason.
    #[allow(clippy::result_large_err)]
    pub(super) async fn admit(&self, req: &mut Request) -> Result<(), Response> {
        let refused = self.inbound.admit(req).await;
        if let Err(r) = &refused {
            if let Some(reason) = crate::identity::inbound::denial_reason(r) {
                self.shared.metrics.auth_denial(reason);
            }
        }
        refused
    }
}

/// `http(s)://host:*` for each allowed host (`host:port` keeps its port).
fn origins_for_hosts(hosts: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    for h in hosts {
        let authority = if h.contains(':') && !h.starts_with('[') && h.matches(':').count() > 1 {
            format!("[{h}]:*")
        } else if h.contains(':') {
            h.clone()
        } else {
            format!("{h}:*")
        };
        out.push(format!("http://{authority}"));
        out.push(format!("https://{authority}"));
    }
    out
}

/// The verified caller of `req` (`None` in open mode); owned, since a
/// `&Request` cannot be held across an await of a handler.
pub(super) fn caller_of(req: &Request) -> Option<Arc<Caller>> {
    req.extensions().get::<Arc<Caller>>().cloned()
}

impl AppState {
    /// Whether `prefix` is an upstream of which the admitted caller of
    /// `req` may see at least one tool.
    pub(super) async fn prefix_visible(&self, prefix: &str, caller: Option<Arc<Caller>>) -> bool {
        let snapshot = self.shared.store.load();
        let principal = caller.as_deref().map(|c| &c.principal);
        if !snapshot.has_prefix(prefix) {
            return false;
        }
        let mut access = crate::serving::access::resolve(
            &snapshot,
            principal,
            self.shared.default_access,
            Some(prefix),
        )
        .await;
        let mut tools = snapshot.tools(Some(prefix)).peekable();
        // An upstream without tools hides nothing but itself.
        let visible = match tools.peek() {
            None => access.grants_any_of(prefix),
            Some(_) => tools.any(|t| access.allows(t)),
        };
        visible
    }

    /// Whether access rules hide no tool of the catalog from the admitted
    /// caller of `req`: only such a caller may read `/status` on the MCP
    /// port, since it names every upstream.
    pub(super) async fn sees_everything(&self, caller: Option<Arc<Caller>>) -> bool {
        let snapshot = self.shared.store.load();
        let principal = caller.as_deref().map(|c| &c.principal);
        let mut access =
            crate::serving::access::resolve(&snapshot, principal, self.shared.default_access, None)
                .await;
        let all = snapshot.tools(None).all(|t| access.allows(t));
        all
    }

    /// The endpoint of a view other than `/mcp` listed whole.
    pub(super) fn endpoint(&self, view: &View) -> McpEndpoint {
        self.scoped.get_or_create(view, || {
            mcp_service(
                self.shared.clone(),
                view.clone(),
                self.mcp_config.clone(),
                &self.session_key,
                &self.sessions,
            )
        })
    }
}
