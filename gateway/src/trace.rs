//! The gateway's spans, named and attributed after the OpenTelemetry
//! semantic conventions (HTTP server and client, MCP):
//!
//! ```text
//! POST /mcp                          http.request.method, url.path, http.route,
//! │                                  http.response.status_code (server)
//! └─ tools/call pets__fetch_pet      mcp.method.name, gen_ai.tool.name,
//!    │                               gen_ai.operation.name, jsonrpc.request.id,
//!    │                               mcp.session.id, mcp.protocol.version,
//!    │                               toolgate.upstream, user.id, error.type
//!    ├─ validate arguments
//!    ├─ transform request | build request
//!    ├─ GET                          http.request.method, url.template,
//!    │                               server.address, server.port,
//!    │                               http.response.status_code (client)
//!    └─ validate response
//! ```
//!
//! The JSON-RPC span's parent is the HTTP span, or the span named by the
//! request's `params._meta.traceparent` when there is one: `_meta` travels
//! with the message, through proxies and message queues that start HTTP
//! requests of their own, so it names the caller's span more precisely than
//! the header of the request that happened to carry the message.
//!
//! Spans are `info`-level `tracing` spans: the JSON log lines carry their
//! fields. Strings are formatted for a span only when it is enabled.
//! Integers are recorded as `i64`: tracing-opentelemetry exports other
//! integer types as strings.

use tracing::field::Empty;
use tracing::Span;

use rmcp::model::{ClientRequest, GetMeta, RequestId};

/// Why a call failed: `error.type` of its JSON-RPC span. Low cardinality
/// by design; the details stay in the result's text and the logs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorType {
    /// The arguments do not match the tool's input schema.
    InvalidArguments,
    /// The caller or the upstream is over its rate limit.
    RateLimited,
    /// The request could not be built (a transform failed, a plan defect).
    RequestBuild,
    /// The upstream did not answer in time.
    UpstreamTimeout,
    /// The upstream could not be reached, or the call was refused before
    /// it was sent (concurrency, memory budget, credentials).
    UpstreamUnreachable,
    /// The upstream answered an error or unexpected status.
    UpstreamStatus,
    /// The upstream's answer is not what its schema or the tool's
    /// outputSchema promises, or could not be turned into a result.
    ResponseValidation,
    /// The client cancelled the call.
    Cancelled,
    /// The tool is unknown here (or not the caller's).
    UnknownTool,
}

impl ErrorType {
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorType::InvalidArguments => "invalid_arguments",
            ErrorType::RateLimited => "rate_limited",
            ErrorType::RequestBuild => "request_build",
            ErrorType::UpstreamTimeout => "upstream_timeout",
            ErrorType::UpstreamUnreachable => "upstream_unreachable",
            ErrorType::UpstreamStatus => "upstream_status",
            ErrorType::ResponseValidation => "response_validation",
            ErrorType::Cancelled => "cancelled",
            ErrorType::UnknownTool => "unknown_tool",
        }
    }
}

/// Records `error.type` on the current span (the JSON-RPC span, where
/// the call pipeline runs outside its child spans).
pub fn record_error(kind: ErrorType) {
    Span::current().record("error.type", kind.as_str());
}

/// Records `kind` as `error.type` of the step `step` and of the current
/// (JSON-RPC) span.
pub fn step_failed(step: &Span, kind: ErrorType) {
    step.record("error.type", kind.as_str());
    record_error(kind);
}

/// The server span of one request to an MCP endpoint; `route` is the
/// matched route (`/mcp/{prefix}`).
pub fn http_server(req: &http::Request<axum::body::Body>, route: &str) -> Span {
    let method = req.method().as_str();
    let span = tracing::info_span!(
        "http.server",
        otel.name = Empty,
        otel.kind = "server",
        http.request.method = method,
        url.path = req.uri().path(),
        http.route = route,
        http.response.status_code = Empty,
    );
    if !span.is_disabled() {
        span.record("otel.name", format!("{method} {route}"));
        if let Some(parent) = telemetry::propagation::from_headers(req.headers()) {
            telemetry::propagation::set_parent(&span, parent);
        }
    }
    span
}

/// The JSON-RPC span of the request `request` (id `id`), made in reach of
/// the handler through the HTTP request's extensions ([`RpcSpan`]).
pub fn rpc_request(
    request: &ClientRequest,
    id: &RequestId,
    headers: &http::HeaderMap,
    subject: Option<&str>,
) -> Span {
    let method = request.method();
    let span = tracing::info_span!(
        "mcp.request",
        otel.name = Empty,
        otel.kind = "server",
        mcp.method.name = method,
        gen_ai.tool.name = Empty,
        gen_ai.operation.name = Empty,
        jsonrpc.request.id = Empty,
        mcp.session.id = Empty,
        mcp.protocol.version = Empty,
        toolgate.upstream = Empty,
        user.id = subject,
        error.type = Empty,
        rpc.response.status_code = Empty,
    );
    if span.is_disabled() {
        return span;
    }
    span.record("jsonrpc.request.id", id.to_string());
    match request {
        ClientRequest::CallToolRequest(r) => {
            span.record("otel.name", format!("{method} {}", r.params.name));
            span.record("gen_ai.tool.name", &*r.params.name);
            span.record("gen_ai.operation.name", "execute_tool");
        }
        _ => {
            span.record("otel.name", method);
        }
    }
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    if let Some(session) = header("mcp-session-id") {
        span.record("mcp.session.id", session);
    }
    let meta = request.get_meta();
    let version = match request {
        ClientRequest::InitializeRequest(r) => Some(r.params.protocol_version.to_string()),
        _ => meta
            .protocol_version()
            .map(|v| v.to_string())
            .or_else(|| header("mcp-protocol-version").map(str::to_string)),
    };
    if let Some(v) = version {
        span.record("mcp.protocol.version", v);
    }
    if let Some(parent) = telemetry::propagation::from_meta(&meta.0 .0) {
        telemetry::propagation::set_parent(&span, parent);
    }
    span
}

/// The JSON-RPC span, carried to the handler in the HTTP request's
/// extensions (rmcp hands the handler the request's `Parts`): sessions
/// run their handlers on tasks of their own, out of the HTTP request's
/// span.
#[derive(Clone)]
pub struct RpcSpan(pub Span);

/// The JSON-RPC span of the request `context` belongs to, if intake made
/// one.
pub fn rpc_span_of(context: &rmcp::service::RequestContext<rmcp::RoleServer>) -> Span {
    context
        .extensions
        .get::<http::request::Parts>()
        .and_then(|p| p.extensions.get::<RpcSpan>())
        .map_or_else(Span::none, |s| s.0.clone())
}

/// A child step of a call (`validate arguments`, `build request`, …).
pub fn step(name: &'static str) -> Span {
    tracing::info_span!("toolgate.step", otel.name = name, error.type = Empty)
}

/// The client span of a call to an upstream: `template` is the
/// operation's path template.
pub fn http_client(method: &http::Method, template: &str, url: &reqwest::Url) -> Span {
    let span = tracing::info_span!(
        "http.client",
        otel.name = method.as_str(),
        otel.kind = "client",
        http.request.method = method.as_str(),
        url.template = template,
        server.address = url.host_str(),
        server.port = url.port_or_known_default().map(i64::from),
        http.response.status_code = Empty,
        error.type = Empty,
    );
    if !span.is_disabled() {
        span.record("otel.name", format!("{method} {template}"));
    }
    span
}
