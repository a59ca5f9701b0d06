//! Issue 13's fidelity rules on the wire: a document compiled in-process,
//! served by the gateway, called by an rmcp client, seen by the upstream.

use catalog::{compile_upstream, CompileOptions, UpstreamSource};
use serde_json::{json, Value};

use crate::support::*;
use crate::upstream::TestUpstream;

fn document() -> Value {
    json!({"openapi": "3.0.3", "info": {"title": "Pets", "version": "1"},
        "paths": {
            "/pets": {"post": {"operationId": "addPet",
                // No `required`: the body still is, as its schema requires `name`.
                "requestBody": {"content": {"application/json": {
                    "schema": {"$ref": "#/components/schemas/Pet"}}}},
                "responses": {"200": {"description": "ok"}}}},
            "/pets/{id}": {"patch": {"operationId": "patchPet",
                "parameters": [
                    {"name": "id", "in": "path", "required": true, "schema": {"type": "string"}},
                    {"name": "X-Api-Version", "in": "header", "required": true,
                     "schema": {"type": "string", "enum": ["2024-01-01"]}},
                    {"name": "format", "in": "query", "required": true,
                     "schema": {"type": "string", "enum": ["json"]}}],
                "requestBody": {"required": true, "content": {
                    "application/json-patch+json": {"schema": {"$ref": "#/components/schemas/Pet"}},
                    "application/merge-patch+json": {"schema": {"$ref": "#/components/schemas/Pet"}}}},
                "responses": {"200": {"description": "ok"}}}}},
        "components": {"schemas": {"Pet": {"type": "object", "required": ["name"],
            "properties": {"name": {"type": "string"}, "tag": {"type": "string"}}}}}})
}

async fn setup() -> (TestUpstream, Gateway, Client) {
    let up = TestUpstream::start().await;
    let spec = serde_json::to_vec(&document()).unwrap();
    let compiled = compile_upstream(&UpstreamSource {
        prefix: "pets",
        document: "fidelity.json",
        spec: &spec,
        overlays: &[],
        options: &CompileOptions::default(),
    })
    .unwrap();
    let config = gateway::config::parse(&format!("upstreams:\n  pets:\n    baseUrl: {}\n", up.url))
        .expect("config parses");
    let gw = start_gateway(&catalog_of(vec![compiled]), config).await;
    let client = connect(&format!("{}/mcp", gw.url)).await;
    (up, gw, client)
}

#[tokio::test]
async fn required_fields_of_an_optional_body_are_asked_for() {
    let (up, _gw, client) = setup().await;
    let tools = client.list_all_tools().await.unwrap();
    let add = tools.iter().find(|t| t.name == "pets__add_pet").unwrap();
    assert_eq!(add.input_schema.get("required"), Some(&json!(["name"])));

    let r = call(&client, "pets__add_pet", json!({"tag": "x"})).await;
    assert!(is_error(&r));
    assert!(text(&r).contains("name"), "{}", text(&r));
    assert_eq!(up.count(), 0, "the upstream was called");

    let r = call(&client, "pets__add_pet", json!({"name": "Rex"})).await;
    assert!(!is_error(&r), "{}", text(&r));
    let body: Value = serde_json::from_slice(&up.last().body).unwrap();
    assert_eq!(body, json!({"name": "Rex"}));
}

#[tokio::test]
async fn constants_and_the_fitting_media_type_reach_the_upstream() {
    let (up, _gw, client) = setup().await;
    let tools = client.list_all_tools().await.unwrap();
    let patch = tools.iter().find(|t| t.name == "pets__patch_pet").unwrap();
    let props = patch.input_schema["properties"].as_object().unwrap();
    assert!(!props.contains_key("X-Api-Version"), "{props:?}");
    assert!(!props.contains_key("format"), "{props:?}");

    let r = call(
        &client,
        "pets__patch_pet",
        json!({"id": "7", "name": "Rex"}),
    )
    .await;
    assert!(!is_error(&r), "{}", text(&r));
    let seen = up.last();
    assert_eq!(seen.method, "PATCH");
    assert_eq!(seen.path, "/pets/7");
    assert_eq!(seen.query.as_deref(), Some("format=json"));
    assert_eq!(seen.header("x-api-version"), Some("2024-01-01"));
    assert_eq!(
        seen.header("content-type"),
        Some("application/merge-patch+json")
    );

    // The constants are not arguments: a client cannot send other values.
    let r = call(
        &client,
        "pets__patch_pet",
        json!({"id": "7", "name": "Rex", "X-Api-Version": "1999"}),
    )
    .await;
    assert!(is_error(&r), "{}", text(&r));
}
