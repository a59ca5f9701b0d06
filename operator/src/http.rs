//! `/healthz`, `/readyz` and `/metrics` (OpenMetrics text, see
//! [`crate::metrics`]).
//!
//! A standby replica is healthy and ready: it is doing its job, which is
//! waiting for the lease. `toolgate_operator_leader` tells them apart.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use tokio_util::sync::CancellationToken;

use crate::metrics::{self, Metrics};

/// Serves in the background; returns the bound address.
pub async fn serve(
    listener: tokio::net::TcpListener,
    metrics: Arc<Metrics>,
    shutdown: CancellationToken,
) -> std::io::Result<SocketAddr> {
    let app = Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(|| async { "ok" }))
        .route("/metrics", get(render))
        .with_state(metrics);
    let bound = listener.local_addr()?;
    tokio::spawn(async move {
        let server = axum::serve(listener, app)
            .with_graceful_shutdown(async move { shutdown.cancelled().await });
        if let Err(e) = server.await {
            tracing::error!(error = %e, "health server");
        }
    });
    Ok(bound)
}

async fn render(State(m): State<Arc<Metrics>>) -> Response {
    match m.encode() {
        Ok(body) => ([(header::CONTENT_TYPE, metrics::CONTENT_TYPE)], body).into_response(),
        Err(e) => {
            tracing::error!(error = %e, "encoding metrics");
            StatusCode::INTERNAL_SERVER_ERROR.into_response()
        }
    }
}
