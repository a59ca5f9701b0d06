//! What a request to an MCP endpoint passes before rmcp sees it, in order:
//!
//! 1. **Host and Origin** (DNS-rebinding protection), from the headers
//!    alone: a refused request's body is not read for the check (see
//!    [`keep_alive_after_refusal`] for what happens to it after).
//!    Then **the session's owner**: a session id of another caller is
//!    answered 404, as an unknown session ([`crate::mcp::session`]).
//! 2. **The body**, read as it streams and never past
//!    [`DEFAULT_MAX_REQUEST_BODY_BYTES`] (`serve --max-request-body-bytes`):
//!    a larger `Content-Length` is refused unread, a longer stream is cut
//!    off at the limit; both answer `413`.
//! 3. **The JSON-RPC message**: malformed JSON answers `-32700`, a batch or
//!    anything but a JSON-RPC 2.0 message `-32600` (HTTP 400), a method the
//!    gateway serves with parameters of the wrong shape `-32602`. rmcp would
//!    answer HTTP 415 to the first two and `-32601 Method not found` to the
//!    last, as its message type falls back to "custom request" for them.
//! 4. **A session slot** ([`SessionLimit`]) for `initialize` and for a
//!    session this replica must restore: `503` when the replica is full,
//!    or when the caller holds its quota and none of its sessions is idle
//!    (else its least recently used idle session is closed for this one).
//!
//! rmcp then serves the request from the bytes read here. `DELETE` of a
//! session answers `200 OK` (rmcp says `202`, which the official Python
//! SDK logs as "Session termination failed: 202" on every exit).

// The `Err` of these checks is the response that ends the request, built
// once per refused request; boxing it would buy nothing.
#![allow(clippy::result_large_err)]

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::Request;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Method, StatusCode, Uri};
use http_body_util::{BodyExt, LengthLimitError, Limited};
use rmcp::model::{
    CallToolRequestParams, ClientJsonRpcMessage, ClientRequest, ErrorCode, ErrorData,
    InitializeRequestParams, JsonRpcMessage, PaginatedRequestParams, RequestId,
    ServerJsonRpcMessage,
};
use rmcp::transport::streamable_http_server::StreamableHttpServerConfig;
use serde::Deserialize;
use tower_service::Service;
use tracing::Instrument;

use crate::identity::inbound::Caller;
use crate::mcp::endpoint::McpEndpoint;
use crate::mcp::handler::with_request_caller;
use crate::mcp::session::{CallerKey, Intake, Refused, Reservation, SessionLimit};

/// Default cap on an MCP request body: 4 MiB (rmcp's own default).
/// `toolgate serve --max-request-body-bytes` (`TOOLGATE_MAX_REQUEST_BODY_BYTES`).
pub const DEFAULT_MAX_REQUEST_BODY_BYTES: usize = 4 * 1024 * 1024;

const SESSION_ID: &str = "mcp-session-id";
/// Seconds a client told the replica is full should wait.
const FULL_RETRY_AFTER: &str = "5";
/// JSON-RPC "server error" (the range -32000..-32099 is the server's).
const SERVER_ERROR: ErrorCode = ErrorCode(-32000);

/// Serves one request to an MCP endpoint (see the module docs).
pub async fn serve(ep: &McpEndpoint, req: Request) -> Response {
    if let Err(r) = check_host_and_origin(req.uri(), req.headers(), &ep.config) {
        return r;
    }
    let caller = CallerKey::of(req.extensions());
    let session_id = req
        .headers()
        .get(SESSION_ID)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    if let Some(sid) = &session_id {
        if !ep.sessions.admits(sid, &caller) {
            return session_not_found();
        }
    }
    match *req.method() {
        Method::POST => {}
        Method::DELETE => {
            // NB: rmcp answers a session DELETE with 202; the official
            // SDKs treat anything but 200 as a failed termination and log
            // it on every exit (issue 10, defect 4).
            let mut resp = call(ep, Intake::new(None, caller, None), req).await;
            if resp.status() == StatusCode::ACCEPTED {
                *resp.status_mut() = StatusCode::OK;
            }
            return resp;
        }
        Method::GET => {
            // A listening stream is no running request: the session stays
            // idle, as rmcp's idle expiry sees it.
            if let Some(a) = session_id.as_deref().and_then(|s| ep.sessions.activity(s)) {
                a.touch();
            }
            let slot = match session_slot(ep, &caller, session_id.as_deref(), None, None).await {
                Ok(s) => s,
                Err(r) => return r,
            };
            return call(ep, Intake::new(None, caller, slot), req).await;
        }
        _ => return call(ep, Intake::new(None, caller, None), req).await,
    }
    let (parts, body) = req.into_parts();
    let bytes = match read_body(body, &parts.headers, ep.config.max_request_body_bytes).await {
        Ok(b) => b,
        Err(r) => return r,
    };
    let message = match check_message(&bytes) {
        Ok(m) => m,
        Err(r) => return r,
    };
    let mut parts = parts;
    let span = match &message {
        JsonRpcMessage::Request(r) => {
            let subject = parts
                .extensions
                .get::<Arc<Caller>>()
                .map(|c| c.principal.subject.as_str());
            crate::observe::trace::rpc_request(&r.request, &r.id, &parts.headers, subject)
        }
        _ => tracing::Span::none(),
    };
    if !span.is_none() {
        parts
            .extensions
            .insert(crate::observe::trace::RpcSpan(span.clone()));
    }
    let (id, params) = match message {
        JsonRpcMessage::Request(r) => {
            let params = match r.request {
                ClientRequest::InitializeRequest(i) => Some(i.params),
                _ => None,
            };
            (Some(r.id), params)
        }
        _ => (None, None),
    };
    // Running until its response ends: the session is not idle, and a
    // new session of the same caller must not close it.
    let mut busy = session_id
        .as_deref()
        .and_then(|s| ep.sessions.activity(s))
        .map(|a| a.busy());
    let slot = match session_slot(ep, &caller, session_id.as_deref(), params.as_ref(), id).await {
        Ok(s) => s,
        Err(r) => return r,
    };
    let req = Request::from_parts(parts, Body::from(bytes));
    let resp = call(ep, Intake::new(params, caller, slot), req)
        .instrument(span)
        .await;
    if busy.is_none() {
        // Restored by this request.
        busy = session_id
            .as_deref()
            .and_then(|s| ep.sessions.activity(s))
            .map(|a| a.busy());
    }
    match busy {
        Some(guard) => {
            let (parts, body) = resp.into_parts();
            let body = body.map_frame(move |f| {
                let _running = &guard;
                f
            });
            Response::from_parts(parts, Body::new(body))
        }
        None => resp,
    }
}

/// What rmcp answers for a session it does not know, so that a session of
/// another caller cannot be told from one that does not exist.
fn session_not_found() -> Response {
    (StatusCode::NOT_FOUND, "Not Found: Session not found").into_response()
}

async fn call(ep: &McpEndpoint, intake: Intake, req: Request) -> Response {
    let mut svc = ep.service.clone();
    let caller = req.extensions().get::<Arc<Caller>>().cloned();
    match with_request_caller(caller, intake.scope(svc.call(req))).await {
        Ok(r) => with_payloads(r.into_response()),
        Err(never) => match never {},
    }
}

/// Tool results carry their bodies as markers; they are filled in here, as
/// the response streams out ([`crate::call::payload`]). The length changes, so
/// any `Content-Length` goes.
fn with_payloads(r: Response) -> Response {
    let (mut parts, body) = r.into_parts();
    parts.headers.remove(http::header::CONTENT_LENGTH);
    Response::from_parts(parts, Body::new(crate::call::payload::Spliced::new(body)))
}

/// Reserves a session slot for `caller` when this request opens a session
/// (a session-less `initialize`) or makes rmcp restore one.
async fn session_slot(
    ep: &McpEndpoint,
    caller: &CallerKey,
    session_id: Option<&str>,
    initialize: Option<&InitializeRequestParams>,
    id: Option<RequestId>,
) -> Result<Option<Reservation>, Response> {
    let opens = match session_id {
        None => initialize.is_some(),
        Some(sid) => ep.sessions.would_restore(sid).await,
    };
    if !opens {
        return Ok(None);
    }
    match ep.sessions.reserve(caller).await {
        Ok(slot) => Ok(Some(slot)),
        Err(why) => Err(refused(ep.sessions.limit(), why, id)),
    }
}

fn refused(limit: &SessionLimit, why: Refused, id: Option<RequestId>) -> Response {
    let message = match why {
        Refused::Full => limit.full_message(),
        Refused::Quota => limit.quota_message(),
    };
    let mut r = jsonrpc_error(StatusCode::SERVICE_UNAVAILABLE, id, SERVER_ERROR, message);
    r.headers_mut().insert(
        http::header::RETRY_AFTER,
        HeaderValue::from_static(FULL_RETRY_AFTER),
    );
    r
}

/// Reads a request body, never holding more than `limit` bytes of it.
pub(crate) async fn read_body(
    body: Body,
    headers: &HeaderMap,
    limit: usize,
) -> Result<Bytes, Response> {
    let declared = headers
        .get(http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit as u64) {
        return Err(too_large(limit));
    }
    match Limited::new(body, limit).collect().await {
        Ok(c) => Ok(c.to_bytes()),
        Err(e) if e.is::<LengthLimitError>() => Err(too_large(limit)),
        Err(e) => Err((
            StatusCode::BAD_REQUEST,
            format!("Bad Request: cannot read the request body: {e}"),
        )
            .into_response()),
    }
}

fn too_large(limit: usize) -> Response {
    (
        StatusCode::PAYLOAD_TOO_LARGE,
        format!(
            "Payload Too Large: the request body exceeds {limit} bytes \
             (the gateway's --max-request-body-bytes)"
        ),
    )
        .into_response()
}

/// Methods the gateway serves: for these, parameters rmcp cannot read are
/// the caller's mistake (-32602), not an unknown method.
const SERVED_METHODS: &[&str] = &[
    "initialize",
    "ping",
    "server/discover",
    "tools/list",
    "tools/call",
    "subscriptions/listen",
];

/// Parses one JSON-RPC message, answering the error the JSON-RPC spec
/// names when it is not one rmcp can serve.
fn check_message(bytes: &[u8]) -> Result<ClientJsonRpcMessage, Response> {
    let first = bytes.iter().find(|b| !b.is_ascii_whitespace());
    if first == Some(&b'[') && serde_json::from_slice::<serde::de::IgnoredAny>(bytes).is_ok() {
        return Err(jsonrpc_error(
            StatusCode::BAD_REQUEST,
            None,
            ErrorCode::INVALID_REQUEST,
            "Invalid Request: JSON-RPC batches are not supported; send one message per POST",
        ));
    }
    let message = match serde_json::from_slice::<ClientJsonRpcMessage>(bytes) {
        Ok(m) => m,
        Err(e) => {
            if let Err(syntax) = serde_json::from_slice::<serde::de::IgnoredAny>(bytes) {
                return Err(jsonrpc_error(
                    StatusCode::BAD_REQUEST,
                    None,
                    ErrorCode::PARSE_ERROR,
                    format!("Parse error: {syntax}"),
                ));
            }
            return Err(jsonrpc_error(
                StatusCode::BAD_REQUEST,
                lenient_id(bytes),
                ErrorCode::INVALID_REQUEST,
                format!(
                    "Invalid Request: not a JSON-RPC 2.0 request, notification or response: {e}"
                ),
            ));
        }
    };
    if let JsonRpcMessage::Request(r) = &message {
        if let ClientRequest::CustomRequest(c) = &r.request {
            if SERVED_METHODS.contains(&c.method.as_str()) {
                let detail = params_error(&c.method, c.params.as_ref());
                // NB: a request-level error, so HTTP 200 like any other
                // JSON-RPC response (rmcp maps -32602 the same way).
                return Err(jsonrpc_error(
                    StatusCode::OK,
                    Some(r.id.clone()),
                    ErrorCode::INVALID_PARAMS,
                    format!("Invalid params for {}: {detail}", c.method),
                ));
            }
        }
    }
    Ok(message)
}

/// Why `params` do not fit `method`, in serde's words.
fn params_error(method: &str, params: Option<&serde_json::Value>) -> String {
    fn why<T: serde::de::DeserializeOwned>(p: Option<&serde_json::Value>) -> Option<String> {
        let p = p.cloned().unwrap_or(serde_json::Value::Null);
        serde_json::from_value::<T>(p).err().map(|e| e.to_string())
    }
    let detail = match method {
        "tools/call" => why::<CallToolRequestParams>(params),
        "initialize" => why::<InitializeRequestParams>(params),
        "tools/list" => why::<Option<PaginatedRequestParams>>(params),
        _ => None,
    };
    detail.unwrap_or_else(|| "the parameters do not have the shape this method takes".into())
}

/// The `id` of a message that is not otherwise valid, when it has a usable one.
fn lenient_id(bytes: &[u8]) -> Option<RequestId> {
    #[derive(Deserialize)]
    struct Id {
        id: Option<RequestId>,
    }
    serde_json::from_slice::<Id>(bytes).ok().and_then(|i| i.id)
}

fn jsonrpc_error(
    status: StatusCode,
    id: Option<RequestId>,
    code: ErrorCode,
    message: impl Into<String>,
) -> Response {
    let msg = ServerJsonRpcMessage::error(ErrorData::new(code, message.into(), None), id);
    let body = serde_json::to_vec(&msg).unwrap_or_default();
    (
        status,
        [(http::header::CONTENT_TYPE, "application/json")],
        body,
    )
        .into_response()
}

// --- Keep-alive after a refusal --------------------------------------------

/// Most request body bytes read and discarded after a response that did
/// not read them (a refusal), so the connection can carry the next request.
pub(crate) const DRAIN_MAX_BYTES: usize = 64 * 1024;
/// Longest wait for the rest of such a body.
const DRAIN_TIME: Duration = Duration::from_secs(1);

/// Keeps an HTTP/1 connection usable after a response that left the
/// request body unread (401, 403, 404, 400, 413 … before the body): hyper
/// then closes the connection if the rest of the body is not already in
/// its buffer, without saying so, and the client's next request on it
/// fails ("server disconnected"; a client that sends the body a moment
/// after the headers loses every one). So the rest of a small body
/// (up to [`DRAIN_MAX_BYTES`], within a second) is read and discarded
/// before the response goes; a larger or slower one, or one the client
/// holds back for `Expect: 100-continue`, is not read and the response
/// says `Connection: close`. HTTP/2 resets the stream alone.
pub(crate) async fn keep_alive_after_refusal(
    req: Request,
    next: axum::middleware::Next,
) -> Response {
    if req.version() >= http::Version::HTTP_2 {
        return next.run(req).await;
    }
    let (parts, body) = req.into_parts();
    if http_body::Body::is_end_stream(&body) {
        return next.run(Request::from_parts(parts, body)).await;
    }
    let holds_back = parts
        .headers
        .get(http::header::EXPECT)
        .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"100-continue"));
    let declared = parts
        .headers
        .get(http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    let slot = Arc::new(std::sync::Mutex::new(Lent {
        body: Some(body),
        ended: false,
    }));
    let req = Request::from_parts(parts, Body::new(Borrowed(slot.clone())));
    let mut res = next.run(req).await;
    let rest = {
        let mut lent = slot.lock().unwrap_or_else(|p| p.into_inner());
        if lent.ended {
            None
        } else {
            lent.body.take()
        }
    };
    let Some(rest) = rest else {
        return res;
    };
    if http_body::Body::is_end_stream(&rest) {
        return res;
    }
    let drained =
        !holds_back && declared.is_none_or(|n| n <= DRAIN_MAX_BYTES as u64) && drain(rest).await;
    if !drained {
        res.headers_mut()
            .insert(http::header::CONNECTION, HeaderValue::from_static("close"));
    }
    res
}

/// Reads and discards `body` to its end; `false` past the byte or time
/// bound, or on an error.
async fn drain(body: Body) -> bool {
    let read = async {
        let mut body = body;
        let mut seen = 0usize;
        while let Some(frame) = body.frame().await {
            let Ok(frame) = frame else {
                return false;
            };
            if let Some(data) = frame.data_ref() {
                seen += data.len();
                if seen > DRAIN_MAX_BYTES {
                    return false;
                }
            }
        }
        true
    };
    tokio::time::timeout(DRAIN_TIME, read)
        .await
        .unwrap_or(false)
}

/// The request body, lent to the handler: what it leaves unread comes
/// back to [`keep_alive_after_refusal`].
struct Lent {
    body: Option<Body>,
    ended: bool,
}

struct Borrowed(Arc<std::sync::Mutex<Lent>>);

impl http_body::Body for Borrowed {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Bytes>, axum::Error>>> {
        let mut lent = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let Some(body) = lent.body.as_mut() else {
            return std::task::Poll::Ready(None);
        };
        let polled = std::pin::Pin::new(body).poll_frame(cx);
        if matches!(polled, std::task::Poll::Ready(None)) {
            lent.ended = true;
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        let lent = self.0.lock().unwrap_or_else(|p| p.into_inner());
        lent.ended || lent.body.as_ref().is_none_or(|b| b.is_end_stream())
    }

    fn size_hint(&self) -> http_body::SizeHint {
        let lent = self.0.lock().unwrap_or_else(|p| p.into_inner());
        lent.body
            .as_ref()
            .map_or_else(|| http_body::SizeHint::with_exact(0), |b| b.size_hint())
    }
}

// --- Host and Origin ------------------------------------------------------
//
// rmcp checks both inside its service, after which it reads the body; the
// check is private to it, so it is repeated here (same rules, same
// settings: `cfg.allowed_hosts`, `cfg.allowed_origins`) to run first, and
// for `/status`. rmcp still checks again; the two agree or rmcp's is moot.

/// Refuses a request whose `Host` is not allowed (403) or whose `Origin`,
/// when origins are checked, is not (403). A missing or malformed `Host`
/// is a 400.
pub(crate) fn check_host_and_origin(
    uri: &Uri,
    headers: &HeaderMap,
    cfg: &StreamableHttpServerConfig,
) -> Result<(), Response> {
    if !cfg.allowed_hosts.is_empty() {
        let (host, port) = request_authority(uri, headers)?;
        let allowed = cfg.allowed_hosts.iter().any(|a| {
            let a = a.trim();
            let (ah, ap) = match http::uri::Authority::try_from(a) {
                Ok(auth) => (normalize_host(auth.host()), auth.port_u16()),
                Err(_) => (normalize_host(a), None),
            };
            !a.is_empty() && ah == host && ap.is_none_or(|p| Some(p) == port)
        });
        if !allowed {
            tracing::warn!(
                host,
                "refused a request with a Host that is not allowed (possible DNS rebinding)"
            );
            return Err(forbidden("Forbidden: Host header is not allowed"));
        }
    }
    // NB: `AppState` enforces origins exactly when it lists some (rmcp's
    // switch for an empty list is private), so an empty list means off.
    if cfg.allowed_origins.is_empty() {
        return Ok(());
    }
    let Some(origin) = headers.get(http::header::ORIGIN) else {
        return Ok(());
    };
    let origin = origin
        .to_str()
        .ok()
        .and_then(parse_origin)
        .ok_or_else(|| forbidden("Forbidden: Invalid Origin header"))?;
    if !cfg
        .allowed_origins
        .iter()
        .filter_map(|a| parse_allowed_origin(a))
        .any(|a| a.matches(&origin))
    {
        tracing::warn!(
            ?origin,
            "refused a request with an Origin that is not allowed"
        );
        return Err(forbidden("Forbidden: Origin header is not allowed"));
    }
    Ok(())
}

fn forbidden(message: &'static str) -> Response {
    (StatusCode::FORBIDDEN, message).into_response()
}

fn normalize_host(h: &str) -> String {
    h.trim_matches(['[', ']']).to_ascii_lowercase()
}

fn request_authority(uri: &Uri, headers: &HeaderMap) -> Result<(String, Option<u16>), Response> {
    let bad = |m: &'static str| (StatusCode::BAD_REQUEST, m).into_response();
    let auth = match headers.get(http::header::HOST) {
        Some(h) => {
            let s = h
                .to_str()
                .map_err(|_| bad("Bad Request: Invalid Host header encoding"))?;
            http::uri::Authority::try_from(s)
                .map_err(|_| bad("Bad Request: Invalid Host header"))?
        }
        // HTTP/2 carries it in `:authority`.
        None => uri
            .authority()
            .cloned()
            .ok_or_else(|| bad("Bad Request: missing Host header"))?,
    };
    Ok((normalize_host(auth.host()), auth.port_u16()))
}

#[derive(Debug, PartialEq)]
enum Origin {
    Null,
    Tuple {
        scheme: String,
        host: String,
        port: Option<u16>,
    },
}

fn parse_origin(v: &str) -> Option<Origin> {
    let v = v.trim();
    if v.eq_ignore_ascii_case("null") {
        return Some(Origin::Null);
    }
    let uri = Uri::try_from(v).ok()?;
    let scheme = uri.scheme_str()?.to_ascii_lowercase();
    let auth = uri.authority()?;
    Some(Origin::Tuple {
        scheme,
        host: normalize_host(auth.host()),
        port: auth.port_u16(),
    })
}

/// An `--allowed-origin` entry: `scheme://host` (any port), `scheme://host:*`
/// (any port), `scheme://host:port`, or `null`.
struct AllowedOrigin {
    origin: Origin,
    any_port: bool,
}

fn parse_allowed_origin(v: &str) -> Option<AllowedOrigin> {
    let v = v.trim();
    if let Some(base) = v.strip_suffix(":*") {
        let origin = parse_origin(base)?;
        return match origin {
            Origin::Tuple { port: None, .. } => Some(AllowedOrigin {
                origin,
                any_port: true,
            }),
            _ => None,
        };
    }
    let origin = parse_origin(v)?;
    let any_port = matches!(origin, Origin::Tuple { port: None, .. });
    Some(AllowedOrigin { origin, any_port })
}

impl AllowedOrigin {
    fn matches(&self, o: &Origin) -> bool {
        match (&self.origin, o) {
            (Origin::Null, Origin::Null) => true,
            (
                Origin::Tuple {
                    scheme: s,
                    host: h,
                    port: p,
                },
                Origin::Tuple { scheme, host, port },
            ) => {
                let default = match scheme.as_str() {
                    "http" => Some(80),
                    "https" => Some(443),
                    _ => None,
                };
                s == scheme && h == host && (self.any_port || *p == port.or(default))
            }
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(hosts: &[&str], origins: &[&str]) -> StreamableHttpServerConfig {
        let mut c = StreamableHttpServerConfig::default().with_allowed_hosts(hosts.to_vec());
        if !origins.is_empty() {
            c = c
                .with_allowed_origins(origins.to_vec())
                .enforce_origin_validation();
        }
        c
    }

    fn check(c: &StreamableHttpServerConfig, host: &str, origin: Option<&str>) -> u16 {
        let mut h = HeaderMap::new();
        h.insert("host", HeaderValue::from_str(host).unwrap());
        if let Some(o) = origin {
            h.insert("origin", HeaderValue::from_str(o).unwrap());
        }
        match check_host_and_origin(&Uri::from_static("/mcp"), &h, c) {
            Ok(()) => 200,
            Err(r) => r.status().as_u16(),
        }
    }

    #[test]
    fn hosts_match_with_or_without_a_port_as_rmcp_does() {
        let c = cfg(&["localhost", "mcp.example.com:8443", "::1"], &[]);
        assert_eq!(check(&c, "localhost:8080", None), 200);
        assert_eq!(check(&c, "LOCALHOST", None), 200);
        assert_eq!(check(&c, "[::1]:80", None), 200);
        assert_eq!(check(&c, "mcp.example.com:8443", None), 200);
        assert_eq!(check(&c, "mcp.example.com:9000", None), 403);
        assert_eq!(check(&c, "evil.example", None), 403);
        assert_eq!(check(&cfg(&[], &[]), "evil.example", None), 200);
    }

    #[test]
    fn origins_match_scheme_host_and_port() {
        let c = cfg(
            &["localhost"],
            &["http://localhost:*", "https://app.example.com:443", "null"],
        );
        assert_eq!(check(&c, "localhost", None), 200);
        assert_eq!(check(&c, "localhost", Some("http://localhost:5173")), 200);
        assert_eq!(check(&c, "localhost", Some("https://app.example.com")), 200);
        assert_eq!(
            check(&c, "localhost", Some("https://app.example.com:444")),
            403
        );
        assert_eq!(check(&c, "localhost", Some("http://evil.example")), 403);
        assert_eq!(check(&c, "localhost", Some("null")), 200);
        assert_eq!(check(&c, "localhost", Some("::nonsense")), 403);
    }

    fn code(bytes: &[u8]) -> (u16, i64) {
        let r = check_message(bytes).unwrap_err();
        let status = r.status().as_u16();
        let body = futures::executor::block_on(r.into_body().collect())
            .unwrap()
            .to_bytes();
        let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
        (status, v["error"]["code"].as_i64().unwrap())
    }

    #[test]
    fn malformed_messages_get_the_json_rpc_codes() {
        assert_eq!(code(b"{\"jsonrpc\": \"2.0\", "), (400, -32700));
        assert_eq!(
            code(br#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#),
            (400, -32600)
        );
        assert_eq!(code(b"42"), (400, -32600));
        assert_eq!(code(br#"{"jsonrpc":"2.0","id":1}"#), (400, -32600));
        assert_eq!(
            code(br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":5}}"#),
            (200, -32602)
        );
        assert_eq!(
            code(br#"{"jsonrpc":"2.0","id":1,"method":"tools/call"}"#),
            (200, -32602)
        );
        assert!(check_message(br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#).is_ok());
        assert!(check_message(br#"{"jsonrpc":"2.0","id":1,"method":"nope/nope"}"#).is_ok());
    }
}
