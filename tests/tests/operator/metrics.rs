//! The operator's `/metrics`, scraped over HTTP and read with a Prometheus
//! text parser, as resources are applied, broken, fixed and deleted.

use std::time::Duration;

use kube::api::{DeleteParams, Patch, PatchParams};
use serde_json::json;
use toolgate_tests::prometheus::Scrape;

use crate::support::*;

const RECONCILES: &str = "toolgate_operator_reconciles_total";
const RECONCILE_SECONDS: &str = "toolgate_operator_reconcile_duration_seconds";
const COMPILES: &str = "toolgate_operator_compiles_total";
const COMPILE_SECONDS: &str = "toolgate_operator_compile_duration_seconds";
const PUBLISHED_BYTES: &str = "toolgate_operator_published_bytes_total";
const UPSTREAMS: &str = "toolgate_operator_upstreams";
const CONFLICTS: &str = "toolgate_operator_prefix_conflicts";

fn upstreams(m: &Scrape, reason: &str) -> f64 {
    m.value(UPSTREAMS, &[("reason", reason)]).unwrap_or(0.0)
}

/// Scrapes until `check` holds (the gauges follow a deletion once its
/// finalizer ran, which the API does not show); returns that scrape.
async fn scrape_until(op: &Operator, what: &str, check: impl Fn(&Scrape) -> bool) -> Scrape {
    eventually(what, WAIT, || async {
        let m = op.metrics().await;
        check(&m).then_some(m)
    })
    .await
}

/// The Ready reason of an upstream once it is False for its generation.
async fn failing_reason(w: &World, name: &str) -> String {
    eventually(&format!("{name} Ready=False"), WAIT, || async {
        let u = w.upstreams(NS).get_opt(name).await.ok()??;
        let (status, reason, _) = cond(&u, "Ready")?;
        let current = u.status.as_ref()?.observed_generation == u.metadata.generation;
        (current && status == "False").then_some(reason)
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_follow_reconciles_compiles_publishes_and_readiness() {
    let w = World::new().await;
    let op = w.operator("operator", false);
    let m = scrape_until(&op, "leader = 1", |m| {
        m.value("toolgate_operator_leader", &[]) == Some(1.0)
    })
    .await;
    assert_eq!(
        m.content_type,
        "application/openmetrics-text; version=1.0.0; charset=utf-8"
    );
    assert_eq!(m.get(COMPILES, &[]), 0.0);
    assert_eq!(m.get(PUBLISHED_BYTES, &[]), 0.0);

    // One good upstream: reconciled, compiled, published, Ready.
    w.apply_upstream(NS, "pets", inline(PETSTORE, "pets")).await;
    wait_ready(&w, NS, "pets", "True", "Published").await;
    settle(&w, "operator", Duration::from_millis(500)).await;
    let m = op.metrics().await;
    let upstream = [("kind", "McpUpstream")];
    assert!(
        m.get(
            RECONCILES,
            &[("kind", "McpUpstream"), ("result", "success")]
        ) >= 1.0
    );
    assert!(m.count(RECONCILE_SECONDS, &upstream) >= 1.0);
    assert_eq!(m.count(RECONCILE_SECONDS, &[("kind", "McpOverlay")]), 0.0);
    assert_eq!(m.get(COMPILES, &[]), 1.0);
    assert_eq!(m.count(COMPILE_SECONDS, &[]), 1.0);
    let entry = w.index().await.entry("pets").cloned().expect("published");
    let chunk_bytes: usize = entry.chunks.iter().map(|c| c.size).sum();
    assert!(chunk_bytes > 0);
    assert_eq!(m.get(PUBLISHED_BYTES, &[]), chunk_bytes as f64);
    assert_eq!(m.get("toolgate_operator_publishes_total", &[]), 1.0);
    assert_eq!(upstreams(&m, "Published"), 1.0);
    assert_eq!(m.get(CONFLICTS, &[]), 0.0);

    // A reconcile that finds every input unchanged compiles nothing: a
    // cache hit is not a compile.
    let reconciles = m.get(RECONCILES, &upstream);
    w.upstreams(NS)
        .patch(
            "pets",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"touched": "yes"}}})),
        )
        .await
        .expect("label pets");
    let m = scrape_until(&op, "pets reconciled again", |m| {
        m.get(RECONCILES, &upstream) > reconciles
    })
    .await;
    assert_eq!(m.get(COMPILES, &[]), 1.0);
    assert_eq!(m.count(COMPILE_SECONDS, &[]), 1.0);

    // A bad document: counted under its failing reason.
    w.apply_upstream(NS, "broken", inline("openapi: [not a document", "broken"))
        .await;
    let reason = failing_reason(&w, "broken").await;
    assert_ne!(reason, "Published");
    let m = op.metrics().await;
    assert_eq!(upstreams(&m, &reason), 1.0, "{}", m.text);
    assert_eq!(upstreams(&m, "Published"), 1.0);

    // Fixed: the failing reason drops to 0.
    w.upstreams(NS)
        .patch(
            "broken",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"openapi": {"inline": PETSTORE}}})),
        )
        .await
        .expect("fix broken");
    wait_ready(&w, NS, "broken", "True", "Published").await;
    let m = op.metrics().await;
    assert_eq!(upstreams(&m, &reason), 0.0, "{}", m.text);
    assert_eq!(upstreams(&m, "Published"), 2.0);
    assert!(m.get(PUBLISHED_BYTES, &[]) > chunk_bytes as f64);

    // A second claim on prefix `pets` is refused.
    w.apply_upstream(NS, "rival", inline(PETSTORE, "pets"))
        .await;
    wait_ready(&w, NS, "rival", "False", "PrefixConflict").await;
    let m = op.metrics().await;
    assert_eq!(m.get(CONFLICTS, &[]), 1.0);
    assert_eq!(upstreams(&m, "PrefixConflict"), 1.0);

    // Deleted upstreams leave the gauges.
    for name in ["rival", "broken"] {
        w.upstreams(NS)
            .delete(name, &DeleteParams::default())
            .await
            .expect("delete");
    }
    let m = scrape_until(&op, "deletions counted", |m| {
        upstreams(m, "Published") == 1.0 && upstreams(m, "PrefixConflict") == 0.0
    })
    .await;
    assert_eq!(m.get(CONFLICTS, &[]), 0.0);

    // A toolset reconciles under its own kind.
    w.apply_toolset(NS, "all", json!({"upstreams": [{"name": "pets"}]}))
        .await;
    wait_toolset(&w, NS, "all", "True", "Resolved").await;
    // Counted when the reconcile returns, just after its status write.
    let m = scrape_until(&op, "a toolset reconcile counted", |m| {
        m.get(RECONCILES, &[("kind", "McpToolset"), ("result", "success")]) >= 1.0
    })
    .await;
    assert!(m.count(RECONCILE_SECONDS, &[("kind", "McpToolset")]) >= 1.0);

    // The API server refusing the operator the published index: the
    // reconcile fails, counted as an error of kind `kube`, and is retried.
    assert_eq!(
        m.get(RECONCILES, &[("kind", "McpUpstream"), ("result", "error")]),
        0.0
    );
    w.server.forbid(|r| {
        r.namespace == PUBLISH_NS
            && r.resource == "configmaps"
            && r.name == crds::publish::INDEX_NAME
    });
    w.upstreams(NS)
        .patch(
            "pets",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"touched": "again"}}})),
        )
        .await
        .expect("label pets");
    // NB: the error counter moves after the reconcile returns (in the
    // controller's error policy); the toolset, woken by the label, may
    // fail first.
    scrape_until(&op, "a failed upstream reconcile, counted by cause", |m| {
        m.get(RECONCILES, &[("kind", "McpUpstream"), ("result", "error")]) >= 1.0
            && m.get(
                "toolgate_operator_reconcile_errors_total",
                &[("error", "kube")],
            ) >= 1.0
    })
    .await;
    op.stop().await;
}
