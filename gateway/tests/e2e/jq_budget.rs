//! Runtime jq inside the response memory budget (issue 26, item 8): a
//! response transform that collects a huge stream, behind a condition on
//! the data so that the compiler's dry runs never meet it, fails its own
//! call naming the transform and the budget, and the real binary goes on
//! serving. Before, every such call grew the gateway until the 2 s
//! deadline (183 MB each, 732 MB for eight at once) and ended in a
//! timeout, or in the kernel's OOM kill under a 512 Mi limit.

use serde_json::json;

use crate::reload::{serve, tempdir};
use crate::support::*;
use crate::upstream::TestUpstream;

/// The gateway's response memory budget in this test: a little above
/// what one small call needs, far below what the transform would build.
const BUDGET_BYTES: u64 = 8 << 20;

fn hog_catalog() -> catalog::Catalog {
    let id =
        json!({"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]});
    let path = json!([{"arg": "id", "name": "id", "in": "path", "style": "simple", "explode": false, "required": true}]);
    catalog_of(vec![upstream(
        "t",
        vec![
            tool(
                "t__hog",
                "GET",
                "/pets/{id}",
                id.clone(),
                path.clone(),
                json!({"transforms": {
                    "response": "if .id == 7 then [range(1e9)] | length else {pet: .name} end"
                }}),
            ),
            tool(
                "t__get_pet",
                "GET",
                "/pets/{id}",
                id,
                path,
                json!({"transforms": {"response": "{pet: .name}"}}),
            ),
        ],
    )])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_transform_building_past_the_response_budget_fails_its_call_not_the_gateway() {
    gateway::net::install_crypto_provider();
    let up = TestUpstream::start().await;
    let dir = tempdir("jq-budget");
    let catalog = dir.join("catalog.json");
    std::fs::write(&catalog, serde_json::to_vec(&hog_catalog()).unwrap()).unwrap();
    let config = dir.join("gateway.yaml");
    std::fs::write(
        &config,
        format!("upstreams:\n  t:\n    baseUrl: '{}'\n", up.url),
    )
    .unwrap();
    let budget = BUDGET_BYTES.to_string();
    let served = serve(&[
        "--catalog",
        catalog.to_str().unwrap(),
        "--config",
        config.to_str().unwrap(),
        "--max-response-memory-bytes",
        &budget,
    ]);
    let client = connect(&format!("{}/mcp", served.url)).await;

    // Eight at once, as in the issue; each is refused on its own.
    let calls = (0..8).map(|_| call(&client, "t__hog", json!({"id": "7"})));
    for r in futures::future::join_all(calls).await {
        assert!(is_error(&r), "{}", text(&r));
        let t = text(&r);
        assert!(
            t.starts_with("response transform ran out of memory")
                && t.contains(&format!(
                    "({BUDGET_BYTES} bytes, --max-response-memory-bytes)"
                )),
            "{t}"
        );
    }
    // The same tool on data that takes the other branch, and another tool:
    // the gateway is up and its budget came back.
    let r = call(&client, "t__hog", json!({"id": "bad"})).await;
    assert!(!is_error(&r), "{}", text(&r));
    let r = call(&client, "t__get_pet", json!({"id": "7"})).await;
    assert!(!is_error(&r), "{}", text(&r));
    assert_eq!(text(&r), r#"{"pet":"rex"}"#);
    drop(client);
    served.terminate().await;
}
