//! One MCP endpoint as rmcp serves it: the handler, its own session manager and settings; endpoints of views other than `/mcp` made on first use.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};

use crate::mcp::session::{OnClose, ReplicaSessions, SessionKey, SessionLimit, SignedIdStore};

use crate::mcp::handler::McpHandler;
use crate::mcp::shared::Shared;
use crate::mcp::view::View;

/// The rmcp service type for one endpoint.
pub(crate) type McpService = StreamableHttpService<McpHandler, ReplicaSessions>;

/// One MCP endpoint (`/mcp` or `/mcp/{prefix}`): rmcp's service, its
/// session manager and the settings both were built with.
#[derive(Clone)]
pub struct McpEndpoint {
    pub service: McpService,
    pub sessions: Arc<ReplicaSessions>,
    pub config: Arc<StreamableHttpServerConfig>,
}

/// Sessions of one replica: how many it holds and how long an idle one
/// lives. Shared by all its endpoints.
#[derive(Clone, Debug)]
pub struct SessionSettings {
    pub limit: SessionLimit,
    /// `None`: sessions live until DELETE or shutdown.
    pub idle_timeout: Option<Duration>,
}

impl Default for SessionSettings {
    fn default() -> Self {
        SessionSettings {
            limit: SessionLimit::default(),
            idle_timeout: Some(crate::mcp::session::DEFAULT_SESSION_IDLE_TIMEOUT),
        }
    }
}

/// Builds the Streamable HTTP service of one endpoint. Each endpoint has
/// its own session manager, so a session opened on `/mcp` cannot be used
/// on `/mcp/{prefix}` (or the other way round) to widen its scope. Session
/// ids are signed with `key` and name the view, so every replica sharing
/// the key accepts them for the same endpoint ([`crate::mcp::session`]).
pub(crate) fn mcp_service(
    shared: Arc<Shared>,
    view: View,
    config: Arc<StreamableHttpServerConfig>,
    key: &SessionKey,
    sessions: &SessionSettings,
) -> McpEndpoint {
    let scope = view.session_scope();
    let handler = McpHandler::new(shared.clone(), view);
    let mut cfg = (*config).clone();
    cfg.session_store = Some(Arc::new(SignedIdStore::new(key.clone(), scope.clone())));
    let weak = Arc::downgrade(&shared);
    let on_close: OnClose = Arc::new(move || {
        if let Some(s) = weak.upgrade() {
            s.forget_closed_soon();
        }
        // A closed session's worker, channels and caches are freed now;
        // glibc keeps the pages unless asked (25k sessions left 1.5 GB).
        crate::serving::reload::release_freed_memory_soon();
    });
    let manager = Arc::new(ReplicaSessions::new(
        key.clone(),
        scope,
        sessions.limit.clone(),
        sessions.idle_timeout,
        on_close,
        shared.metrics.clone(),
    ));
    McpEndpoint {
        service: StreamableHttpService::new(move || Ok(handler.clone()), manager.clone(), cfg),
        sessions: manager,
        config,
    }
}

/// Endpoints of views other than `/mcp`, created on first use (and only
/// for views that exist when asked: the map grows with the catalog, not
/// with what clients ask for).
#[derive(Default)]
pub(crate) struct ScopedServices {
    map: Mutex<HashMap<View, McpEndpoint>>,
}

impl ScopedServices {
    pub(crate) fn get_or_create(
        &self,
        view: &View,
        make: impl FnOnce() -> McpEndpoint,
    ) -> McpEndpoint {
        let mut m = self.map.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(ep) = m.get(view) {
            return ep.clone();
        }
        m.entry(view.clone()).or_insert_with(make).clone()
    }
}
