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
//!
//! **Client text.** Every string a client chose (tool name, JSON-RPC id,
//! URL path, protocol version, subject) goes through [`bounded`] before it
//! reaches a span: a span is copied into every log line made inside it and
//! into the OTLP export, so an unbounded field turns one request body into
//! megabytes of logs and telemetry. A span is named after its tool only
//! once the tool is known to the caller ([`tool_resolved`]): an unknown
//! name leaves the constant `tools/call`, so clients cannot mint span
//! names. The session id is a bearer credential in open mode, so spans
//! carry a digest of it ([`session_ref`]), never the id.

use std::borrow::Cow;

use sha2::{Digest, Sha256};
use tracing::field::Empty;
use tracing::Span;

use rmcp::model::{ClientRequest, GetMeta, RequestId};
use rmcp::ErrorData;

pub(crate) use crate::outcome::ErrorType;

/// Most bytes of client-chosen text a span or log line carries: enough
/// for any real tool name, id or path, too little to amplify a request.
pub(crate) const MAX_CLIENT_TEXT: usize = 128;

/// `text` cut to [`MAX_CLIENT_TEXT`] bytes on a character boundary, with
/// a marker saying how much was cut; unchanged when short enough.
pub(crate) fn bounded(text: &str) -> Cow<'_, str> {
    if text.len() <= MAX_CLIENT_TEXT {
        return Cow::Borrowed(text);
    }
    let mut end = MAX_CLIENT_TEXT;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    Cow::Owned(format!(
        "{}…[{} more bytes]",
        &text[..end],
        text.len() - end
    ))
}

/// What spans say for the session id `id`: the first 16 hex digits of its
/// SHA-256, enough to tell a session's requests apart, useless to resume it.
pub(crate) fn session_ref(id: &str) -> String {
    let digest = Sha256::digest(id.as_bytes());
    hex::encode(&digest[..8])
}

/// Names the JSON-RPC span `span` after the tool `name`, once the caller
/// is known to be served it (a catalog tool it may call, or a meta-tool).
pub(crate) fn tool_resolved(span: &Span, name: &str) {
    if span.is_disabled() {
        return;
    }
    let name = bounded(name);
    telemetry::rename(span, format!("tools/call {name}"));
    span.record("gen_ai.tool.name", &*name);
}

/// Records `kind` as `error.type` of the step `step`. The JSON-RPC span
/// gets the call's error type from its report ([`finish_rpc`]).
pub(crate) fn step_failed(step: &Span, kind: ErrorType) {
    step.record("error.type", kind.as_str());
}

/// Records how the JSON-RPC request of `span` ended: `error` when the
/// handler knows why it failed, else a protocol error's code (the MCP
/// conventions: a JSON-RPC error's code is its type).
pub(crate) fn finish_rpc(
    span: &Span,
    error: Option<ErrorType>,
    protocol_error: Option<&ErrorData>,
) {
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
pub(crate) fn http_server(req: &http::Request<axum::body::Body>, route: &str) -> Span {
    let method = req.method().as_str();
    let span = tracing::info_span!(
        "http.server",
        otel.name = Empty,
        otel.kind = "server",
        http.request.method = method,
        url.path = &*bounded(req.uri().path()),
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
pub(crate) fn rpc_request(
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
        user.id = subject.map(bounded).as_deref(),
        error.type = Empty,
        rpc.response.status_code = Empty,
    );
    if span.is_disabled() {
        return span;
    }
    span.record("jsonrpc.request.id", &*bounded(&id.to_string()));
    // NB: the tool's name joins the span's name in `tool_resolved`, once
    // the handler knows the caller is served it.
    span.record("otel.name", method);
    if let ClientRequest::CallToolRequest(r) = request {
        span.record("gen_ai.tool.name", &*bounded(&r.params.name));
        span.record("gen_ai.operation.name", "execute_tool");
    }
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    if let Some(session) = header("mcp-session-id") {
        span.record("mcp.session.id", session_ref(session));
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
        span.record("mcp.protocol.version", &*bounded(&v));
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
pub(crate) struct RpcSpan(pub Span);

/// The JSON-RPC span of the request `context` belongs to, if intake made
/// one.
pub(crate) fn rpc_span_of(context: &rmcp::service::RequestContext<rmcp::RoleServer>) -> Span {
    context
        .extensions
        .get::<http::request::Parts>()
        .and_then(|p| p.extensions.get::<RpcSpan>())
        .map_or_else(Span::none, |s| s.0.clone())
}

/// A child step of a call (`validate arguments`, `build request`, …).
pub(crate) fn step(name: &'static str) -> Span {
    tracing::info_span!("toolgate.step", otel.name = name, error.type = Empty)
}

/// The client span of a call to an upstream: `template` is the
/// operation's path template.
pub(crate) fn http_client(method: &http::Method, template: &str, url: &reqwest::Url) -> Span {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounded_cuts_on_a_char_boundary_and_says_how_much() {
        assert_eq!(bounded("pets__get_pet"), "pets__get_pet");
        let long = "é".repeat(1 << 19);
        let cut = bounded(&long);
        let kept = cut.split('…').next().unwrap_or_default();
        assert!(kept.len() <= MAX_CLIENT_TEXT && kept.len() >= MAX_CLIENT_TEXT - 1);
        assert!(cut.ends_with(&format!("[{} more bytes]", long.len() - kept.len())));
        assert_eq!(session_ref("abc").len(), 16);
        assert_ne!(session_ref("abc"), session_ref("abd"));
    }
}
