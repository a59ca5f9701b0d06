//! The MCP side: one hand-written [`ServerHandler`] over the current
//! snapshot, mounted with rmcp's Streamable HTTP service.
//!
//! - `/mcp` serves every tool; `/mcp/{prefix}` serves one upstream's tools
//!   and `/mcp/toolsets/{namespace}/{name}` a toolset's, and each treats
//!   every other tool as unknown.
//! - `tools/list` pages through the snapshot, each page bounded by a
//!   tool count and a byte budget, with opaque cursors tied to the
//!   version of what the endpoint lists ([`crate::mcp::pages`]).
//! - Each reload that changes a session's visible tools sends it
//!   `notifications/tools/list_changed`: sessions of the `initialize`
//!   protocol versions get it on their stream, 2026-07-28 clients through
//!   `subscriptions/listen`.
//! - Access: each caller sees in `tools/list` exactly the tools its
//!   upstreams' access rules grant it (filtered before paging; a cursor
//!   names a catalog position, the same place for any caller), and
//!   `tools/call` and `get_tool`
//!   refuse the others exactly as they refuse an unknown tool, so a
//!   refusal does not reveal that a tool exists. A reload that changes an
//!   upstream's policy sends its sessions `list_changed`.
//! - Listing mode ([`View::mode`]): `all` lists the tools; `search`
//!   lists the meta-tools of [`crate::mcp::search`] and the pinned tools, and
//!   still accepts a direct `tools/call` of any tool of the view (a client
//!   that learned a name through search may call it by name). Its
//!   sessions get `list_changed` like any other: what search finds and
//!   which pinned tools are listed change with the view's tools.
//! - Protocol versions: 2025-06-18 and 2025-11-25 (sessions, via
//!   `initialize`) and 2026-07-28 (stateless, per-request metadata); rmcp
//!   serves the latter statelessly whatever the session setting.

use std::borrow::Cow;
use std::future::Future;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, Implementation, InitializeRequestParams,
    InitializeResult, ListToolsResult, PaginatedRequestParams, ProtocolVersion, ServerCapabilities,
    ServerConfig, SubscriptionFilter, Tool,
};
use rmcp::service::{NotificationContext, RequestContext, SubscriptionContext};
use rmcp::{ErrorData, RoleServer, ServerHandler};
use tracing::Instrument;

use catalog::listing::{ListMode, SearchSettings};

use crate::identity::inbound::Caller;
use crate::mcp::pages::PageCursor;
use crate::observe::metrics::McpMethod;
use crate::outcome::ErrorType;

use crate::mcp::shared::{InFlight, Shared, NO_SEARCH};
use crate::mcp::view::{Scope, View};

/// The protocol versions toolgate speaks.
pub(crate) const PROTOCOL_VERSIONS: &[ProtocolVersion] = &[
    ProtocolVersion::V_2025_06_18,
    ProtocolVersion::V_2025_11_25,
    ProtocolVersion::V_2026_07_28,
];

/// Each time pages have listed this much JSON, their garbage is handed
/// back to the OS.
const LARGE_LISTING_BYTES: usize = 1 << 20;

/// One MCP endpoint's handler: the tools of its [`View`].
#[derive(Clone)]
pub struct McpHandler {
    shared: Arc<Shared>,
    view: View,
}

impl McpHandler {
    pub fn new(shared: Arc<Shared>, view: View) -> Self {
        McpHandler { shared, view }
    }

    /// The search-mode settings of this endpoint's view: the gateway's
    /// for `/mcp` and `/mcp/{prefix}`. `snapshot` is what a view whose
    /// settings come with the catalog would read them from.
    pub(crate) fn search_settings<'a>(
        &'a self,
        snapshot: &'a crate::serving::snapshot::Snapshot,
    ) -> &'a SearchSettings {
        match &self.view.scope {
            Scope::Toolset(t) => snapshot.toolset(t).map_or(&NO_SEARCH, |s| &s.search),
            _ => self.shared.search(),
        }
    }

    /// Search mode's `tools/list`: the meta-tools, then the pinned tools
    /// the view serves and the caller may call, in the configured order.
    async fn list_search_mode(
        &self,
        request: Option<PaginatedRequestParams>,
        principal: Option<&catalog::access::Principal>,
    ) -> Result<ListToolsResult, ErrorData> {
        // One page: the meta-tools and at most MAX_PINNED tools.
        if request.and_then(|r| r.cursor).is_some() {
            return Err(crate::mcp::error::bad_cursor(
                crate::mcp::pages::CursorError::OtherEndpoint,
            ));
        }
        let snapshot = self.shared.store.load();
        let settings = self.search_settings(&snapshot);
        let mut tools: Vec<Tool> = crate::mcp::search::Meta::ALL
            .iter()
            .map(|m| m.tool(settings))
            .collect();
        for name in &settings.pinned {
            match self.visible(&snapshot, name, principal).await {
                Some(t) => tools.push(t.mcp_for_listing()),
                None => tracing::debug!(tool = %name, "pinned tool not served here; skipped"),
            }
        }
        Ok(ListToolsResult::with_all_items(tools))
    }

    /// Runs `name` for the caller: the direct `tools/call` and `call_tool`.
    async fn run(
        &self,
        name: &str,
        arguments: Option<rmcp::model::JsonObject>,
        call_ctx: &crate::identity::inbound::CallContext,
        context: &RequestContext<RoleServer>,
        seen: &mut Seen,
    ) -> Result<CallToolResponse, ErrorData> {
        // One snapshot for the whole call: a reload never splits it.
        let snapshot = self.shared.store.load();
        let principal = call_ctx.caller.as_deref().map(|c| &c.principal);
        let Some(tool) = self.visible(&snapshot, name, principal).await.cloned() else {
            // NB: the same error for a tool the caller may not call, so
            // the answer does not say whether it exists.
            seen.error = Some(ErrorType::UnknownTool);
            // Bounded: rmcp logs every error answer at WARN.
            return Err(crate::mcp::error::unknown_tool(
                &crate::observe::trace::bounded(name),
            ));
        };
        seen.tool = Some(tool.def.name.clone());
        if !seen.named {
            crate::observe::trace::tool_resolved(&seen.rpc, &tool.def.name);
            seen.named = true;
        }
        seen.rpc.record("toolgate.upstream", &*tool.prefix);
        self.shared.in_flight.fetch_add(1, Ordering::SeqCst);
        let _guard = InFlight(&self.shared);
        let result = tokio::select! {
            (r, report) = crate::call::pipeline::call_reported(&tool, arguments, call_ctx) => {
                self.shared.metrics.call(&tool.prefix, &report);
                seen.error = report.error;
                r
            }
            _ = context.ct.cancelled() => {
                seen.error = Some(ErrorType::Cancelled);
                crate::call::response::error_text("call cancelled by the client")
            }
        };
        Ok(result.into())
    }

    /// Runs a meta-tool of search mode.
    async fn run_meta(
        &self,
        meta: crate::mcp::search::Meta,
        arguments: Option<rmcp::model::JsonObject>,
        call_ctx: &crate::identity::inbound::CallContext,
        context: &RequestContext<RoleServer>,
        seen: &mut Seen,
    ) -> Result<CallToolResponse, ErrorData> {
        use crate::mcp::search::{CallArgs, DescribeArgs, Meta, SearchArgs};
        let principal = call_ctx.caller.as_deref().map(|c| &c.principal);
        // A meta-tool's name is ours, so as bounded as the catalog's.
        seen.tool = Some(meta.name().to_string());
        // Named after the meta-tool, not the tool `call_tool` runs.
        crate::observe::trace::tool_resolved(&seen.rpc, meta.name());
        seen.named = true;
        match meta {
            Meta::SearchTools => {
                let args: SearchArgs = match meta.arguments(arguments) {
                    Ok(a) => a,
                    Err(e) => {
                        seen.error = Some(ErrorType::InvalidArguments);
                        return Ok(crate::call::response::error_text(e).into());
                    }
                };
                let snapshot = self.shared.store.load();
                let mut access = crate::serving::access::resolve(
                    &snapshot,
                    principal,
                    self.shared.default_access,
                    self.view.prefix_scope(),
                )
                .await;
                let result = crate::mcp::search::search(&snapshot, &args, |t| {
                    self.view.serves(t) && access.allows(t)
                });
                Ok(result.into())
            }
            Meta::DescribeTool => {
                let args: DescribeArgs = match meta.arguments(arguments) {
                    Ok(a) => a,
                    Err(e) => {
                        seen.error = Some(ErrorType::InvalidArguments);
                        return Ok(crate::call::response::error_text(e).into());
                    }
                };
                let snapshot = self.shared.store.load();
                match self.visible(&snapshot, &args.name, principal).await {
                    Some(t) => Ok(crate::mcp::search::describe(t).into()),
                    None => {
                        seen.error = Some(ErrorType::UnknownTool);
                        Err(crate::mcp::error::unknown_tool(
                            &crate::observe::trace::bounded(&args.name),
                        ))
                    }
                }
            }
            Meta::CallTool => {
                let args: CallArgs = match meta.arguments(arguments) {
                    Ok(a) => a,
                    Err(e) => {
                        seen.error = Some(ErrorType::InvalidArguments);
                        return Ok(crate::call::response::error_text(e).into());
                    }
                };
                // Labelled by the tool it runs, if the endpoint serves it.
                seen.tool = None;
                self.run(&args.name, args.arguments, call_ctx, context, seen)
                    .await
            }
        }
    }

    /// `name` if this endpoint serves it and the caller may call it.
    async fn visible<'a>(
        &self,
        snapshot: &'a Arc<crate::serving::snapshot::Snapshot>,
        name: &str,
        principal: Option<&'a catalog::access::Principal>,
    ) -> Option<&'a Arc<crate::call::tool::ToolEntry>> {
        let tool = snapshot.tool(name).filter(|t| self.view.serves(t))?;
        let default = self.shared.default_access;
        let mut access =
            crate::serving::access::resolve(snapshot, principal, default, Some(&tool.prefix)).await;
        access.allows(tool).then_some(tool)
    }

    /// [`Self::visible`] where no await is possible: a costly decision
    /// not made before grants nothing ([`crate::serving::access`]).
    fn visible_now<'a>(
        &self,
        snapshot: &'a crate::serving::snapshot::Snapshot,
        name: &str,
        principal: Option<&'a catalog::access::Principal>,
    ) -> Option<&'a Arc<crate::call::tool::ToolEntry>> {
        let tool = snapshot.tool(name).filter(|t| self.view.serves(t))?;
        crate::serving::access::CallerAccess::new(snapshot, principal, self.shared.default_access)
            .allows(tool)
            .then_some(tool)
    }
}

tokio::task_local! {
    /// The verified caller of the HTTP request rmcp is handling (`None`
    /// in open mode), for [`McpHandler::get_tool`].
    static REQUEST_CALLER: Option<Arc<Caller>>;
}

/// Runs `fut` (rmcp handling one HTTP request) with the request's
/// verified caller in reach of [`McpHandler::get_tool`].
pub(crate) async fn with_request_caller<F: Future>(
    caller: Option<Arc<Caller>>,
    fut: F,
) -> F::Output {
    REQUEST_CALLER.scope(caller, fut).await
}

impl ServerHandler for McpHandler {
    fn get_info(&self) -> ServerConfig {
        let instructions = match &self.view.scope {
            Scope::All => {
                "Tools generated from the OpenAPI descriptions of the upstream APIs.".to_string()
            }
            Scope::Prefix(p) => {
                format!("Tools of the upstream API '{p}', generated from its OpenAPI description.")
            }
            Scope::Toolset(t) => format!(
                "Tools of the toolset '{t}', chosen from upstream APIs and generated from their OpenAPI descriptions."
            ),
        };
        let instructions = match self.view.mode {
            ListMode::All => instructions,
            ListMode::Search => format!(
                "{instructions} This endpoint lists only a few tools: find the others with                  search_tools (by what they do), read one's input schema with describe_tool,                  and run it with call_tool or by calling it by name."
            ),
        };
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .build(),
        )
        .with_server_info(Implementation::new("toolgate", env!("CARGO_PKG_VERSION")))
        .with_protocol_version(ProtocolVersion::V_2025_11_25)
        .with_instructions(instructions)
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Borrowed(PROTOCOL_VERSIONS)
    }

    async fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, ErrorData> {
        let started = Instant::now();
        // What rmcp's own `initialize` does.
        context.peer.set_peer_info(request.clone());
        let result = self.negotiate_initialize(&request);
        self.operation(
            McpMethod::Initialize,
            None,
            result.as_ref().err(),
            None,
            started,
        );
        result
    }

    async fn ping(&self, _context: RequestContext<RoleServer>) -> Result<(), ErrorData> {
        self.operation(McpMethod::Ping, None, None, None, Instant::now());
        Ok(())
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let started = Instant::now();
        let result = self.listing(request, context).await;
        self.operation(
            McpMethod::ToolsList,
            None,
            result.as_ref().err(),
            None,
            started,
        );
        result
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let started = Instant::now();
        let span = crate::observe::trace::rpc_span_of(&context);
        let mut seen = Seen {
            tool: None,
            error: None,
            named: false,
            rpc: span.clone(),
        };
        let result = self
            .call_tool_now(request, context, &mut seen)
            .instrument(span.clone())
            .await;
        let (tool, error) = (seen.tool.as_deref(), seen.error);
        crate::observe::trace::finish_rpc(&span, error, result.as_ref().err());
        self.operation(
            McpMethod::ToolsCall,
            tool,
            result.as_ref().err(),
            error,
            started,
        );
        result
    }

    /// rmcp asks for a tool's schema, without a request context, to check
    /// the `Mcp-Param-*` headers of a `tools/call`; the caller comes from
    /// `with_request_caller`. Outside a request nothing is visible: to
    /// rmcp that only means "not validated here", and `call_tool` decides.
    fn get_tool(&self, name: &str) -> Option<Tool> {
        let caller = REQUEST_CALLER.try_with(Clone::clone).ok()?;
        let snapshot = self.shared.store.load();
        if self.view.mode == ListMode::Search {
            if let Some(meta) = crate::mcp::search::Meta::of(name) {
                return Some(meta.tool(self.search_settings(&snapshot)));
            }
        }
        self.visible_now(&snapshot, name, caller.as_deref().map(|c| &c.principal))
            .map(|t| t.mcp().clone())
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        self.shared.register(context.peer, self.view.clone());
    }

    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        let mut f = SubscriptionFilter::new();
        if requested.tools_list_changed == Some(true) {
            f.tools_list_changed = Some(true);
        }
        Some(f)
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), ErrorData> {
        let mut rx = self.shared.store.subscribe();
        loop {
            tokio::select! {
                _ = context.cancelled() => return Ok(()),
                msg = rx.recv() => match msg {
                    Ok(d) if self.view.affected_by(&d) => {
                        if context.sink().notify_tool_list_changed().await.is_err() {
                            return Ok(());
                        }
                    }
                    Ok(_) => {}
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {
                        let _ = context.sink().notify_tool_list_changed().await;
                    }
                    Err(_) => return Ok(()),
                }
            }
        }
    }
}

/// What a `tools/call` records beside its duration.
#[derive(Debug)]
struct Seen {
    /// The catalog tool (or search-mode meta-tool) called; `None` for a
    /// name the endpoint does not serve.
    tool: Option<String>,
    /// Why the call failed, when known better than by its protocol error.
    error: Option<ErrorType>,
    /// Whether the JSON-RPC span has its tool name yet.
    named: bool,
    /// The JSON-RPC span, named after the tool once it is resolved. Held
    /// here rather than taken from `Span::current()`: rmcp runs stateless
    /// requests inside spans of its own.
    rpc: tracing::Span,
}

impl McpHandler {
    /// Records one MCP request: `protocol_error` if it failed as one,
    /// `error` when the handler knows why.
    fn operation(
        &self,
        method: McpMethod,
        tool: Option<&str>,
        protocol_error: Option<&ErrorData>,
        error: Option<ErrorType>,
        started: Instant,
    ) {
        let error = error.or_else(|| protocol_error.map(ErrorType::of_protocol_error));
        self.shared
            .metrics
            .operation(method, tool, error, started.elapsed());
    }

    /// `tools/list`.
    async fn listing(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let call_ctx = crate::identity::inbound::caller_of(&context);
        let principal = call_ctx.caller.as_deref().map(|c| &c.principal);
        if self.view.mode == ListMode::Search {
            return self.list_search_mode(request, principal).await;
        }
        let snapshot = self.shared.store.load();
        let scope = self.view.prefix_scope();
        let mut access = crate::serving::access::resolve(
            &snapshot,
            principal,
            self.shared.default_access,
            scope,
        )
        .await;
        let endpoint = self.view.endpoint_key();
        let mut version = snapshot
            .listing_version(scope)
            .with_default_access(self.shared.default_access);
        if let Scope::Toolset(t) = &self.view.scope {
            // NB: a toolset's filter decides what it lists without
            // changing any tool: an edit to it must stale its cursors.
            let def = snapshot
                .toolset(t)
                .map(|s| serde_json::to_vec(&s.def).unwrap_or_default());
            version = version.mixed_with(def.as_deref().unwrap_or_default());
        }
        let start = match request.and_then(|r| r.cursor) {
            None => 0,
            Some(c) => PageCursor::decode(&c)
                .and_then(|c| c.resume(endpoint, version))
                .map_err(crate::mcp::error::bad_cursor)?,
        };
        let visible = snapshot
            .tools_from(scope, start)
            .filter(|(_, t)| self.view.serves(t))
            .filter(|(_, t)| access.allows(t));
        let page = crate::mcp::pages::page(visible, self.shared.pages);
        let tools: Vec<Tool> = page.tools.iter().map(|t| t.mcp_for_listing()).collect();
        // A page leaves several times its size in garbage (trees, then the
        // serialised response), spread over the worker threads' arenas
        // that glibc keeps: trim once per megabyte listed, which a client
        // paging through a large catalog passes many times.
        let listed = self
            .shared
            .listed_since_trim
            .fetch_add(page.bytes, Ordering::Relaxed);
        if listed + page.bytes > LARGE_LISTING_BYTES {
            self.shared.listed_since_trim.store(0, Ordering::Relaxed);
            crate::serving::reload::release_freed_memory_soon();
        }
        let mut result = ListToolsResult::with_all_items(tools);
        result.next_cursor = page.next.map(|next| {
            PageCursor {
                endpoint,
                version,
                next: next as u64,
            }
            .encode()
        });
        Ok(result)
    }

    /// `tools/call`; `seen` gets what the operation metric records.
    async fn call_tool_now(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
        seen: &mut Seen,
    ) -> Result<CallToolResponse, ErrorData> {
        let call_ctx = crate::identity::inbound::caller_of(&context);
        if self.view.mode == ListMode::Search {
            // NB: a catalog tool with a meta-tool's name is shadowed here;
            // call_tool still reaches it.
            if let Some(meta) = crate::mcp::search::Meta::of(&request.name) {
                return self
                    .run_meta(meta, request.arguments, &call_ctx, &context, seen)
                    .await;
            }
        }
        self.run(&request.name, request.arguments, &call_ctx, &context, seen)
            .await
    }
}
