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
use rmcp::ErrorData;

pub use crate::metrics::ErrorType;

/// Records `kind` as `error.type` of the step `step`. The JSON-RPC span
/// gets the call's error type from its report ([`finish_rpc`]).
pub fn step_failed(step: &Span, kind: ErrorType) {
    step.record("error.type", kind.as_str());
}

/// Records how the JSON-RPC request of `span` ended: `error` when the
/// handler knows why it failed, else a protocol error's code (the MCP
/// conventions: a JSON-RPC error's code is its type).
pub fn finish_rpc(span: &Span, error: Option<ErrorType>, protocol_error: Option<&ErrorData>) {
    if span.is_disabled() {
        return;
    }
    if let Some(e) = protocol_error {
        let code = e.code.0.to_string();
        span.record("rpc.response.status_code", code.as_str());
        match error {
            Some(error) => span.record("error.type", error.as_str()),
            None => span.record("error.type", code.as_str()),
        };
    } else if let Some(error) = error {
        span.record("error.type", error.as_str());
    }
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
