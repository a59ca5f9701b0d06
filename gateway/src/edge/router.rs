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

use axum::extract::{Path, Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get};
use axum::{Json, Router};
use catalog::listing::ListMode;
use serde_json::json;
use tracing::Instrument;

use super::health::{healthz, readyz, resource_metadata, status};
use super::state::{caller_of, AppState};
use crate::edge::intake::check_host_and_origin;
use crate::mcp::endpoint::mcp_service;
use crate::mcp::view::View;

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
