//! The HTTP edge: the router (`/mcp`, `/mcp/{prefix}`,
//! `/mcp/toolsets/{namespace}/{name}`, `/healthz`, `/readyz`, `/status`,
//! `/.well-known/oauth-protected-resource`); the health endpoints are in
//! [`health`](super::health), shutdown in [`shutdown`](super::shutdown).
//!
//! `/mcp/{prefix}` of an upstream that exists but grants the caller no
//! tool answers exactly as an unknown prefix does (404, same body).
//!
//! `?mode=all` or `?mode=search` on an MCP endpoint chooses how it lists
//! its tools ([`catalog::listing::ListMode`]); without it, the gateway
//! config's `listing:` decides. Each mode is its own endpoint, with its
//! own sessions.
//!
//! [`app`] builds the whole router from an [`AppState`], so HTTP-edge
//! behaviour is testable with `tower::ServiceExt::oneshot` and no socket.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Path, Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get};
use axum::{Json, Router};
use rmcp::transport::streamable_http_server::StreamableHttpServerConfig;
use serde_json::json;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use catalog::listing::ListMode;

use crate::config::ListingConfig;
use crate::edge::intake::check_host_and_origin;
use crate::identity::inbound::{Caller, Inbound};
use crate::mcp::endpoint::{mcp_service, McpEndpoint, ScopedServices, SessionSettings};
use crate::mcp::session::SessionKey;
use crate::mcp::shared::Shared;
use crate::mcp::view::View;
use crate::serving::reload::CatalogStore;

use super::health::{healthz, readyz, resource_metadata, status};

/// Everything the router needs.
#[derive(Clone)]
pub struct AppState {
    pub shared: Arc<Shared>,
    root: McpEndpoint,
    scoped: Arc<ScopedServices>,
    pub(super) mcp_config: Arc<StreamableHttpServerConfig>,
    session_key: SessionKey,
    sessions: SessionSettings,
    /// Set by [`serve`](super::shutdown::serve) at the shutdown signal:
    /// `/readyz` then fails.
    pub(super) draining: Arc<AtomicBool>,
    pub(super) inbound: Arc<Inbound>,
    /// Modes of requests that do not choose one.
    listing: Arc<ListingConfig>,
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

/// The whole HTTP surface.
pub fn app(state: AppState) -> Router {
    Router::new()
        .route("/mcp", any(root))
        .route("/mcp/{prefix}", any(scoped))
        .route("/mcp/toolsets/{namespace}/{name}", any(toolset))
        // Only the MCP routes: probes and metadata reads are no requests
        // worth a trace.
        .route_layer(axum::middleware::from_fn(http_server_span))
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/status", get(status))
        .route(
            crate::identity::inbound::metadata::WELL_KNOWN,
            get(resource_metadata),
        )
        .route(
            &format!(
                "{}/{{*resource}}",
                crate::identity::inbound::metadata::WELL_KNOWN
            ),
            get(resource_metadata),
        )
        // No route reads a body but the MCP endpoints, which bound their
        // own (`crate::edge::intake`); this holds any future extractor to the
        // same limit.
        .layer(axum::extract::DefaultBodyLimit::max(
            state.mcp_config.max_request_body_bytes,
        ))
        .layer(axum::middleware::from_fn(
            crate::edge::intake::keep_alive_after_refusal,
        ))
        .layer(axum::middleware::from_fn_with_state(
            state.draining.clone(),
            close_when_draining,
        ))
        .with_state(state)
}

/// While draining, HTTP/1 responses close their connection. A client that
/// reaches the pod through the Service's virtual IP keeps its kept-alive
/// connection to this pod whatever the endpoints say; closed after a
/// response (which the client sees), its next request opens a connection
/// to a pod that stays, instead of racing the close at the end of the
/// drain. (HTTP/2 has no such header.)
async fn close_when_draining(
    State(draining): State<Arc<AtomicBool>>,
    req: Request,
    next: axum::middleware::Next,
) -> Response {
    let http1 = req.version() < http::Version::HTTP_2;
    let mut res = next.run(req).await;
    if http1 && draining.load(Ordering::Relaxed) {
        res.headers_mut().insert(
            http::header::CONNECTION,
            http::HeaderValue::from_static("close"),
        );
    }
    res
}

/// The server span of each request to an MCP endpoint
/// ([`crate::observe::trace::http_server`]).
async fn http_server_span(req: Request, next: axum::middleware::Next) -> Response {
    let route = req
        .extensions()
        .get::<axum::extract::MatchedPath>()
        .cloned();
    let span = crate::observe::trace::http_server(&req, route.as_ref().map_or("", |r| r.as_str()));
    let res = next.run(req).instrument(span.clone()).await;
    span.record(
        "http.response.status_code",
        i64::from(res.status().as_u16()),
    );
    res
}

async fn root(State(state): State<AppState>, mut req: Request) -> Response {
    if let Err(r) = check_host_and_origin(req.uri(), req.headers(), &state.mcp_config) {
        return r;
    }
    if let Err(r) = state.admit(&mut req).await {
        return r;
    }
    let mode = match requested_mode(req.uri()) {
        Ok(m) => m.unwrap_or(state.listing.default_mode(false)),
        Err(r) => return *r,
    };
    let view = View::ROOT.with_mode(mode);
    if view == View::ROOT {
        return crate::edge::intake::serve(&state.root, req).await;
    }
    let ep = state.endpoint(&view);
    crate::edge::intake::serve(&ep, req).await
}

/// The `mode` query parameter; `Err` is the 400 naming it when it is not
/// a mode.
fn requested_mode(uri: &http::Uri) -> Result<Option<ListMode>, Box<Response>> {
    let Some(query) = uri.query() else {
        return Ok(None);
    };
    let mut mode = None;
    for (key, value) in form_urlencoded::parse(query.as_bytes()) {
        if key != "mode" {
            continue;
        }
        mode = Some(match &*value {
            "all" => ListMode::All,
            "search" => ListMode::Search,
            other => {
                let error = format!(
                    "query parameter 'mode': unknown mode '{other}'; expected 'all' or 'search'"
                );
                return Err(Box::new(
                    (StatusCode::BAD_REQUEST, Json(json!({ "error": error }))).into_response(),
                ));
            }
        });
    }
    Ok(mode)
}

/// The verified caller of `req` (`None` in open mode); owned, since a
/// `&Request` cannot be held across an await of a handler.
pub(super) fn caller_of(req: &Request) -> Option<Arc<Caller>> {
    req.extensions().get::<Arc<Caller>>().cloned()
}

impl AppState {
    /// Whether `prefix` is an upstream of which the admitted caller of
    /// `req` may see at least one tool.
    async fn prefix_visible(&self, prefix: &str, caller: Option<Arc<Caller>>) -> bool {
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
    fn endpoint(&self, view: &View) -> McpEndpoint {
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

async fn scoped(
    State(state): State<AppState>,
    Path(prefix): Path<String>,
    mut req: Request,
) -> Response {
    // NB: before the prefix lookup, so neither a rebinding page nor an
    // unauthenticated client can probe which prefixes exist.
    if let Err(r) = check_host_and_origin(req.uri(), req.headers(), &state.mcp_config) {
        return r;
    }
    if let Err(r) = state.admit(&mut req).await {
        return r;
    }
    // NB: an upstream whose access rules grant this caller no tool gets
    // the very answer of an unknown prefix, so its existence stays hidden.
    if !state.prefix_visible(&prefix, caller_of(&req)).await {
        return (
            StatusCode::NOT_FOUND,
            Json(json!({"error": format!("no upstream with prefix '{prefix}'")})),
        )
            .into_response();
    }
    let mode = match requested_mode(req.uri()) {
        Ok(m) => m.unwrap_or(state.listing.default_mode(true)),
        Err(r) => return *r,
    };
    let view = View::prefix(&prefix).with_mode(mode);
    let ep = state.endpoint(&view);
    crate::edge::intake::serve(&ep, req).await
}

async fn toolset(
    State(state): State<AppState>,
    Path((namespace, name)): Path<(String, String)>,
    mut req: Request,
) -> Response {
    // NB: before the lookup, as for `/mcp/{prefix}`: nobody unadmitted can
    // probe which toolsets exist.
    if let Err(r) = check_host_and_origin(req.uri(), req.headers(), &state.mcp_config) {
        return r;
    }
    if let Err(r) = state.admit(&mut req).await {
        return r;
    }
    let id = catalog::toolset::ToolsetName::new(namespace, name);
    // The toolset's current mode picks the endpoint: after a mode change,
    // sessions opened on the old one are unknown here (404, signed for
    // another view) and MCP clients start a new one in the new mode.
    let Some(mode) = state.shared.store.load().toolset(&id).map(|t| t.def.mode) else {
        return (
            StatusCode::NOT_FOUND,
            Json(json!({"error": format!("no toolset '{id}'")})),
        )
            .into_response();
    };
    let view = View::toolset(id, mode);
    let ep = state.scoped.get_or_create(&view, || {
        mcp_service(
            state.shared.clone(),
            view.clone(),
            state.mcp_config.clone(),
            &state.session_key,
            &state.sessions,
        )
    });
    crate::edge::intake::serve(&ep, req).await
}
