//! `/healthz`, `/readyz`, `/status` and the protected-resource metadata:
//! what probes, operators and OAuth clients ask of the gateway itself.

use std::sync::atomic::Ordering;

use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde_json::json;

use super::state::{caller_of, AppState};
use crate::edge::intake::check_host_and_origin;

pub(crate) async fn healthz() -> &'static str {
    "ok"
}

/// Open to any Host: kubelet probes name the pod's IP. A Host the MCP
/// endpoints would refuse gets the verdict alone, not what is served.
pub(crate) async fn readyz(State(state): State<AppState>, req: Request) -> Response {
    if state.draining.load(Ordering::Relaxed) {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(json!({"ready": false, "reason": "shutting down"})),
        )
            .into_response();
    }
    let snap = state.shared.store.load();
    let detail = check_host_and_origin(req.uri(), req.headers(), &state.mcp_config).is_ok();
    let status = if snap.loaded {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    let body = match (snap.loaded, detail) {
        (true, true) => json!({"ready": true, "tools": snap.tool_count(), "catalog": snap.hash}),
        (true, false) => json!({"ready": true}),
        (false, _) => json!({"ready": false, "reason": "no catalog loaded"}),
    };
    (status, Json(body)).into_response()
}

/// What is served: the catalog hash (in Kubernetes mode the published
/// index's), tools, upstreams (with the responses each returned under
/// `warn` although they did not match their schema), toolsets and when it
/// loaded. Names no secrets, but names every prefix, source and toolset:
/// on the MCP port it is held to the MCP endpoints' Host and Origin rules
/// (a DNS-rebinding page cannot read it), to their authentication, and to
/// callers from whom access rules hide no tool (anyone else gets the 404
/// of an unknown route: it would name upstreams hidden from them). The
/// metrics listener serves it to anyone who reaches that port
/// ([`status_router`]).
pub(crate) async fn status(State(state): State<AppState>, mut req: Request) -> Response {
    if let Err(r) = check_host_and_origin(req.uri(), req.headers(), &state.mcp_config) {
        return r;
    }
    if let Err(r) = state.admit(&mut req).await {
        return r;
    }
    if !state.sees_everything(caller_of(&req)).await {
        return StatusCode::NOT_FOUND.into_response();
    }
    status_body(&state)
}

/// `GET /status` alone, unconditionally: for the metrics listener, a
/// port operators reach and agents do not (like `/metrics`, it names
/// upstreams).
pub fn status_router(state: AppState) -> Router {
    Router::new()
        .route(
            "/status",
            get(|State(state): State<AppState>| async move { status_body(&state) }),
        )
        .with_state(state)
}

pub(crate) fn status_body(state: &AppState) -> Response {
    let snap = state.shared.store.load();
    let mut body = serde_json::to_value(&*snap.provenance).unwrap_or_default();
    if let Some(o) = body.as_object_mut() {
        o.insert("ready".into(), snap.loaded.into());
        let toolsets: Vec<_> = snap
            .toolsets()
            .map(|t| {
                json!({"namespace": t.def.id.namespace, "name": t.def.id.name,
                       "mode": t.def.mode, "tools": t.tools})
            })
            .collect();
        o.insert("toolsets".into(), toolsets.into());
    }
    // Counted per runtime (kept while the upstream's settings are), so
    // not part of the snapshot's provenance.
    for u in body["upstreams"].as_array_mut().into_iter().flatten() {
        let runtime = u["prefix"]
            .as_str()
            .and_then(|p| snap.tools(Some(p)).next())
            .map(|t| t.upstream.response_violations());
        if let (Some(n), Some(o)) = (runtime, u.as_object_mut()) {
            o.insert("responseViolations".into(), n.into());
        }
    }
    Json(body).into_response()
}

/// RFC 9728 protected resource metadata, public (it is what a client
/// without a token reads to learn where to get one); 404 when the gateway
/// is open.
pub(crate) async fn resource_metadata(State(state): State<AppState>) -> Response {
    match state.inbound.metadata() {
        Some(doc) => (
            [(http::header::CACHE_CONTROL, "max-age=300")],
            Json(doc.clone()),
        )
            .into_response(),
        None => StatusCode::NOT_FOUND.into_response(),
    }
}
