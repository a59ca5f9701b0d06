use serde_json::{json, Value};

use crate::support::*;
use crate::upstream::TestUpstream;

fn transform_catalog() -> catalog::Catalog {
    catalog_of(vec![upstream(
        "t",
        vec![
            tool(
                "t__get_pet",
                "GET",
                "/pets/{id}",
                json!({"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]}),
                json!([{"arg": "id", "name": "id", "in": "path", "style": "simple", "explode": false, "required": true}]),
                json!({"transforms": {
                    "response": "{pet: .name}",
                    "error": "{error: (.problem.title // \"failed\"), code: .status}"
                }}),
            ),
            tool(
                "t__lookup",
                "GET",
                "/unused",
                json!({"type": "object", "properties": {"pet": {"type": "string"}}, "required": ["pet"]}),
                json!([]),
                json!({"transforms": {"request": "{path: \"/pets/\\(.pet)\", query: {v: \"1\"}}"}}),
            ),
            tool(
                "t__runaway",
                "GET",
                "/pets/{id}",
                json!({"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]}),
                json!([{"arg": "id", "name": "id", "in": "path", "style": "simple", "explode": false, "required": true}]),
                json!({"transforms": {"response": "[range(1e12)] | length"}}),
            ),
            tool(
                "t__parse",
                "GET",
                "/unused",
                json!({"type": "object", "properties": {"data": {"type": "string"}}, "required": ["data"]}),
                json!([]),
                json!({"transforms": {"request": "{path: \"/pets/7\", query: {n: (.data | fromjson | length | tostring)}}"}}),
            ),
        ],
    )])
}

async fn setup() -> (TestUpstream, Gateway, Client) {
    let up = TestUpstream::start().await;
    let cfg =
        gateway::config::parse(&format!("upstreams:\n  t:\n    baseUrl: {}\n", up.url)).unwrap();
    let gw = start_gateway(&transform_catalog(), cfg).await;
    let client = connect(&format!("{}/mcp", gw.url)).await;
    (up, gw, client)
}

#[tokio::test]
async fn response_and_error_transforms_shape_the_result() {
    let (_up, _gw, client) = setup().await;
    let r = call(&client, "t__get_pet", json!({"id": "7"})).await;
    assert!(!is_error(&r), "{}", text(&r));
    assert_eq!(
        serde_json::from_str::<Value>(&text(&r)).unwrap(),
        json!({"pet": "rex"})
    );
    let r = call(&client, "t__get_pet", json!({"id": "404"})).await;
    assert!(is_error(&r));
    assert_eq!(
        serde_json::from_str::<Value>(&text(&r)).unwrap(),
        json!({"error": "Pet not found", "code": 404})
    );
}

#[tokio::test]
async fn request_transform_builds_the_request_under_the_base_url() {
    let (up, _gw, client) = setup().await;
    let r = call(&client, "t__lookup", json!({"pet": "7"})).await;
    assert!(!is_error(&r), "{}", text(&r));
    let rec = up.last();
    assert_eq!(
        (rec.path.as_str(), rec.query.as_deref()),
        ("/pets/7", Some("v=1"))
    );
    let r = call(&client, "t__lookup", json!({"pet": "../admin"})).await;
    assert!(is_error(&r), "{}", text(&r));
    assert_eq!(up.count(), 1);
}

#[tokio::test]
async fn runaway_transform_is_an_error_and_the_server_keeps_serving() {
    let (_up, _gw, client) = setup().await;
    let started = std::time::Instant::now();
    let r = call(&client, "t__runaway", json!({"id": "7"})).await;
    assert!(is_error(&r));
    assert!(started.elapsed() < std::time::Duration::from_secs(5));
    let r = call(&client, "t__get_pet", json!({"id": "7"})).await;
    assert!(!is_error(&r), "{}", text(&r));
}

#[tokio::test]
async fn a_deeply_nested_fromjson_argument_is_a_tool_error_and_the_gateway_keeps_serving() {
    let (up, _gw, client) = setup().await;
    // 3 MiB of `[` overflowed the jq worker's stack in jaq's recursive JSON
    // parser and aborted the process.
    let r = call(&client, "t__parse", json!({"data": "[".repeat(3 << 20)})).await;
    assert!(is_error(&r), "{}", text(&r));
    assert!(
        text(&r).contains("nested more than 512 levels deep"),
        "{}",
        text(&r)
    );
    assert_eq!(up.count(), 0);
    let r = call(&client, "t__parse", json!({"data": "[1, [2], 3]"})).await;
    assert!(!is_error(&r), "{}", text(&r));
    let rec = up.last();
    assert_eq!(
        (rec.path.as_str(), rec.query.as_deref()),
        ("/pets/7", Some("n=3"))
    );
}
