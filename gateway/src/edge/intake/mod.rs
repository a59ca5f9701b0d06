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

use axum::body::Body;
use axum::extract::Request;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Method, StatusCode};
use http_body_util::{BodyExt, LengthLimitError, Limited};
use rmcp::model::{ClientRequest, ErrorCode, InitializeRequestParams, JsonRpcMessage, RequestId};
use tower_service::Service;
use tracing::Instrument;

use crate::identity::inbound::Caller;
use crate::mcp::endpoint::McpEndpoint;
use crate::mcp::handler::with_request_caller;
use crate::mcp::session::{CallerKey, Intake, Refused, Reservation, SessionLimit};

mod host_origin;
mod keep_alive;
mod message;

pub(crate) use host_origin::check_host_and_origin;
pub(crate) use keep_alive::keep_alive_after_refusal;
use message::{check_message, jsonrpc_error};

/// Default cap on an MCP request body: 4 MiB (rmcp's own default).
/// `toolgate serve --max-request-body-bytes` (`TOOLGATE_MAX_REQUEST_BODY_BYTES`).
pub const DEFAULT_MAX_REQUEST_BODY_BYTES: usize = 4 * 1024 * 1024;

pub(super) const SESSION_ID: &str = "mcp-session-id";
/// Seconds a client told the replica is full should wait.
pub(super) const FULL_RETRY_AFTER: &str = "5";
/// JSON-RPC "server error" (the range -32000..-32099 is the server's).
pub(super) const SERVER_ERROR: ErrorCode = ErrorCode(-32000);

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
