//! The chart's Grafana dashboard and PrometheusRule read only metrics the
//! binaries export: the chart rendered with both on (Helm's SDK, as the
//! chart tests do), the metric names of every PromQL expression in them,
//! against `/metrics` of the real `toolgate serve --kube` and of the real
//! operator, in-memory API server between them, after the paths that make
//! series appear: a tool call, one refused by argument validation, one
//! answered 404, one over the rate limit, a catalog reload. A family declared by its `# TYPE` line
//! counts too (a labelled counter never incremented has no sample).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crds::McpUpstream;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams};
use serde_json::{json, Value};
use toolgate_tests::monitoring::{self, Exposition};
use toolgate_tests::prometheus::scrape;
use toolgate_tests::tools;

use crate::product::ControlPlane;
use crate::support::*;

/// Generous: CI runs every test binary at once on two cores.
const WAIT: Duration = Duration::from_secs(60);
const SYSTEM: &str = "toolgate-system";
const TEAM: &str = "team-a";

async fn apply(client: &kube::Client, doc: Value) {
    let name = doc["metadata"]["name"].as_str().expect("name").to_string();
    let patch = PatchParams::apply("kubectl").force();
    let result = if doc["kind"] == "ConfigMap" {
        Api::<ConfigMap>::namespaced(client.clone(), TEAM)
            .patch(&name, &patch, &Patch::Apply(&doc))
            .await
            .map(drop)
    } else {
        Api::<McpUpstream>::namespaced(client.clone(), TEAM)
            .patch(&name, &patch, &Patch::Apply(&doc))
            .await
            .map(drop)
    };
    result.unwrap_or_else(|e| panic!("apply {name}: {e}"));
}

fn upstream(prefix: &str, api_base: &str) -> Value {
    json!({"apiVersion": "toolgate.dev/v1alpha1", "kind": "McpUpstream",
           "metadata": {"name": "pets", "namespace": TEAM},
           "spec": {"toolPrefix": prefix, "baseUrl": api_base,
                    // Three calls, then refusals.
                    "rateLimit": {"requestsPerSecond": 0.001, "burst": 3},
                    "openapi": {"configMapRef": {"name": "petstore-openapi", "key": "openapi.yaml"}}}})
}

/// Waits until the gateway lists `tool` (the catalog that has it loaded).
async fn wait_for_tool(client: &Client, tool: &str) {
    let start = Instant::now();
    loop {
        let tools = client.list_all_tools().await.expect("tools/list");
        if tools.iter().any(|t| t.name == tool) {
            return;
        }
        assert!(start.elapsed() < WAIT, "the gateway never served {tool}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_metric_the_dashboard_and_alerts_query_is_exported() {
    let Some(python) = tools::deploy_python() else {
        return;
    };
    let values = json!({"metrics": {"prometheusRule": {"enabled": true},
                                    "dashboard": {"enabled": true}}});
    let objs = monitoring::render_chart(&python, &values, SYSTEM).unwrap_or_else(|e| panic!("{e}"));
    let queries = monitoring::queries(&objs).unwrap_or_else(|e| panic!("{e}"));
    assert!(
        queries
            .iter()
            .any(|q| q.origin.starts_with("PrometheusRule"))
            && queries.iter().any(|q| q.origin.starts_with("dashboard")),
        "{queries:?}"
    );

    // The control plane: the API server, the operator (its /metrics on a
    // port bound here), the demo pet store as the upstream API.
    let plane = ControlPlane::start(&[TEAM], true).await;
    let _stop_operator = plane.operator.clone().drop_guard();
    let (client, api_base) = (plane.client.clone(), plane.api_base.clone());
    let document = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../deploy/examples/openapi/petstore.yaml"
    ))
    .expect("the demo document");
    apply(
        &client,
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": "petstore-openapi", "namespace": TEAM},
               "data": {"openapi.yaml": document}}),
    )
    .await;
    apply(&client, upstream("pets", &api_base)).await;

    // The gateway, its /metrics on a port of its own. The port is picked
    // free here and released for the gateway to bind.
    let metrics_addr = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port");
    let gateway = plane.serve_gateway("dashboard", &["--metrics-addr", &metrics_addr.to_string()]);

    let mcp = connect(&format!("{}/mcp", gateway.url)).await;
    wait_for_tool(&mcp, "pets__list_pets").await;
    let ok = call(&mcp, "pets__list_pets", json!({})).await;
    assert!(!is_error(&ok), "{}", text(&ok));
    // Refused by argument validation (petId: integer, minimum 1).
    let refused = try_call(&mcp, "pets__fetch_pet", json!({"petId": "seven"})).await;
    if let Ok(r) = refused {
        assert!(is_error(&r), "bad arguments refused: {}", text(&r));
    }
    // Answered 404 by the upstream.
    let missing = call(&mcp, "pets__fetch_pet", json!({"petId": 99999})).await;
    assert!(is_error(&missing), "{}", text(&missing));
    // Over the rate limit: the three calls above took the burst.
    let limited = call(&mcp, "pets__list_pets", json!({})).await;
    assert!(text(&limited).contains("rate limit"), "{}", text(&limited));
    // A new catalog: the operator compiles and publishes again, the
    // gateway reloads.
    apply(&client, upstream("zoo", &api_base)).await;
    wait_for_tool(&mcp, "zoo__list_pets").await;

    let mut offered = Exposition::default();
    offered.add(&scrape(&format!("http://{metrics_addr}/metrics")).await);
    offered.add(&scrape(&plane.operator_metrics).await);

    let mut missing: BTreeMap<String, Vec<&str>> = BTreeMap::new();
    let mut checked = 0;
    for q in &queries {
        for name in monitoring::metric_names(&q.expr) {
            checked += 1;
            if !offered.has(&name) {
                missing.entry(name).or_default().push(&q.origin);
            }
        }
    }
    assert!(checked > 20, "{queries:?}");
    assert!(
        missing.is_empty(),
        "queried but exported by neither binary:\n{}\n\noffered: {:?}\nhistograms: {:?}",
        missing
            .iter()
            .map(|(name, origins)| format!("  {name}: {}", origins.join("; ")))
            .collect::<Vec<_>>()
            .join("\n"),
        offered.names,
        offered.histograms
    );
}
