//! `/healthz`, `/readyz` and `/metrics` (Prometheus text).
//!
//! A standby replica is healthy and ready: it is doing its job, which is
//! waiting for the lease. `toolgate_operator_leader` tells them apart.

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use axum::extract::State;
use axum::routing::get;
use axum::Router;
use tokio_util::sync::CancellationToken;

use crate::metrics::Metrics;

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

async fn render(State(m): State<Arc<Metrics>>) -> String {
    let counters = [
        (
            "toolgate_operator_reconciles_total",
            "Reconciles run.",
            &m.reconciles,
        ),
        (
            "toolgate_operator_compiles_total",
            "Catalog compiles (cache misses).",
            &m.compiles,
        ),
        (
            "toolgate_operator_publishes_total",
            "Index writes for an upstream.",
            &m.publishes,
        ),
        (
            "toolgate_operator_status_writes_total",
            "Status patches.",
            &m.status_writes,
        ),
    ];
    let mut out = String::new();
    for (name, help, c) in counters {
        out.push_str(&format!(
            "# HELP {name} {help}\n# TYPE {name} counter\n{name} {}\n",
            c.load(Ordering::Relaxed)
        ));
    }
    out.push_str(
        "# HELP toolgate_operator_reconcile_errors_total Reconciles that failed and were retried, by kind.\n# TYPE toolgate_operator_reconcile_errors_total counter\n",
    );
    for (kind, n) in m.reconcile_errors() {
        out.push_str(&format!(
            "toolgate_operator_reconcile_errors_total{{kind=\"{kind}\"}} {n}\n"
        ));
    }
    let (entries, bytes) = m.document_cache();
    out.push_str(&format!(
        "# HELP toolgate_operator_document_cache_entries OpenAPI documents kept for conditional GETs (one per upstream reading a URL).\n# TYPE toolgate_operator_document_cache_entries gauge\ntoolgate_operator_document_cache_entries {entries}\n# HELP toolgate_operator_document_cache_bytes Bytes of those documents.\n# TYPE toolgate_operator_document_cache_bytes gauge\ntoolgate_operator_document_cache_bytes {bytes}\n"
    ));
    out.push_str(&format!(
        "# HELP toolgate_operator_leader 1 while this replica holds the lease.\n# TYPE toolgate_operator_leader gauge\ntoolgate_operator_leader {}\n",
        u8::from(m.leader())
    ));
    out
}
