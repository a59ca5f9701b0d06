//! What each reconcile reports about itself: a `reconcile` span, which
//! every log line and child span (`fetch`, `compile`, `publish`, `status`)
//! inside it carries, and the reconcile counter and duration.
//!
//! Plain `tracing`: the subscriber set up in `main` decides whether spans
//! are exported (OpenTelemetry) or only give log lines their fields.
//!
//! Attribute names follow OpenTelemetry's conventions where one exists
//! (`k8s.namespace.name`, `error.type`); the Kubernetes conventions have a
//! name attribute per built-in kind (`k8s.pod.name`, …) but none for an
//! arbitrary object, hence `toolgate.resource.kind` and
//! `toolgate.resource.name`.

use std::future::Future;
use std::time::Instant;

use kube::Resource;
use tracing::field::Empty;
use tracing::Instrument;

use crate::error::Error;
use crate::metrics::{Kind, Metrics, Outcome};

/// Runs one reconcile of `obj` inside its span, and counts and times it.
pub async fn reconcile<K, T>(
    metrics: &Metrics,
    kind: Kind,
    obj: &K,
    work: impl Future<Output = Result<T, Error>>,
) -> Result<T, Error>
where
    K: Resource,
{
    let meta = obj.meta();
    let span = tracing::info_span!(
        "reconcile",
        otel.name = span_name(kind),
        toolgate.resource.kind = kind.as_str(),
        k8s.namespace.name = meta.namespace.as_deref().unwrap_or_default(),
        toolgate.resource.name = meta.name.as_deref().unwrap_or_default(),
        toolgate.result = Empty,
        "error.type" = Empty,
        otel.status_code = Empty,
    );
    let started = Instant::now();
    let result = work.instrument(span.clone()).await;
    let outcome = Outcome::of(&result);
    span.record("toolgate.result", outcome.as_str());
    if let Err(e) = &result {
        span.record("error.type", e.metric_label().as_str());
        // tracing-opentelemetry's name for the span status.
        span.record("otel.status_code", "ERROR");
    }
    metrics.reconciled(kind, outcome, started.elapsed());
    result
}

/// `otel.name`: what an OpenTelemetry backend lists the span as.
const fn span_name(kind: Kind) -> &'static str {
    match kind {
        Kind::McpUpstream => "reconcile McpUpstream",
        Kind::McpOverlay => "reconcile McpOverlay",
        Kind::McpToolset => "reconcile McpToolset",
    }
}
