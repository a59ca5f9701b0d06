//! Search mode (`/mcp?mode=search`) as a real MCP client sees it: the
//! meta-tools and the pinned tools in `tools/list`; `search_tools`,
//! `describe_tool` and `call_tool` over exactly the tools the endpoint
//! serves and the caller may call; `list_changed` on reload.

use std::collections::BTreeSet;

use gateway::config::ListingConfig;
use gateway::EdgeOptions;
use rmcp::model::{CallToolResult, ErrorCode};
use serde_json::{json, Value};

use crate::access::{connect_caller, Caller};
use crate::support::*;
use crate::upstream::TestUpstream;

const META: [&str; 3] = ["search_tools", "describe_tool", "call_tool"];

fn listing(yaml: &str) -> ListingConfig {
    gateway::config::parse_file(&format!("listing:\n{yaml}"))
        .expect("fixture listing parses")
        .listing
}

async fn gateway_with(up: &TestUpstream, listing: ListingConfig) -> Gateway {
    let edge = EdgeOptions {
        listing,
        ..EdgeOptions::default()
    };
    start_gateway_with(&default_catalog(), config_for(&up.url, ""), edge).await
}

async fn listed(client: &Client) -> Vec<String> {
    client
        .list_all_tools()
        .await
        .expect("tools/list")
        .iter()
        .map(|t| t.name.to_string())
        .collect()
}

/// `search_tools`' result names, best first.
async fn found(client: &Client, arguments: Value) -> Vec<String> {
    let r = call(client, "search_tools", arguments).await;
    assert!(!is_error(&r), "{}", text(&r));
    results(&r)
        .iter()
        .map(|t| t["name"].as_str().expect("a name").to_string())
        .collect()
}

fn results(r: &CallToolResult) -> Vec<Value> {
    let v = r
        .structured_content
        .clone()
        .expect("search_tools returns structured content");
    let from_text: Value = serde_json::from_str(&text(r)).expect("the text is the same JSON");
    assert_eq!(v, from_text);
    v["tools"].as_array().expect("a tools array").clone()
}

/// A protocol error (not a tool result): its code and message.
async fn protocol_error(client: &Client, name: &str, arguments: Value) -> (ErrorCode, String) {
    match try_call(client, name, arguments).await {
        Err(rmcp::ServiceError::McpError(e)) => (e.code, e.message.to_string()),
        other => panic!("{name}: expected an MCP error, got {other:?}"),
    }
}

#[tokio::test]
async fn search_mode_lists_the_meta_tools_and_the_pinned_tools_only() {
    let up = TestUpstream::start().await;
    // A pinned name that does not exist is skipped, not an error.
    let gw = gateway_with(
        &up,
        listing("  pinned: [other__ping, pets__missing, pets__get_pet]\n"),
    )
    .await;
    let search = connect(&format!("{}/mcp?mode=search", gw.url)).await;
    assert_eq!(
        listed(&search).await,
        [
            "search_tools",
            "describe_tool",
            "call_tool",
            "other__ping",
            "pets__get_pet"
        ]
    );
    // Stateless (2026-07-28) clients get the same listing.
    let stateless = connect_stateless(&format!("{}/mcp?mode=search", gw.url)).await;
    assert_eq!(listed(&stateless).await, listed(&search).await);
    assert_eq!(
        found(&stateless, json!({"query": "ping"})).await[0],
        "other__ping"
    );
    // `/mcp/{prefix}` in search mode pins only its own tools.
    let pets = connect(&format!("{}/mcp/pets?mode=search", gw.url)).await;
    assert_eq!(
        listed(&pets).await,
        [
            "search_tools",
            "describe_tool",
            "call_tool",
            "pets__get_pet"
        ]
    );
    // The meta-tools' schemas are strict.
    for t in search.list_all_tools().await.unwrap() {
        if META.contains(&&*t.name) {
            assert_eq!(t.input_schema["additionalProperties"], false, "{}", t.name);
        }
    }
    // Without `mode` (or with mode=all) the endpoint lists everything.
    for url in [
        format!("{}/mcp", gw.url),
        format!("{}/mcp?mode=all", gw.url),
    ] {
        let all = connect(&url).await;
        let names = listed(&all).await;
        assert_eq!(names.len(), default_catalog().tool_count(), "{url}");
        assert!(!names.iter().any(|n| META.contains(&n.as_str())), "{url}");
    }
}

#[tokio::test]
async fn the_configured_mode_is_the_default_and_the_query_parameter_overrides_it() {
    let up = TestUpstream::start().await;
    let gw = gateway_with(
        &up,
        listing(
            "  mode: search\n  prefixMode: all\n  descriptions: {searchTools: Find pet tools.}\n",
        ),
    )
    .await;
    let root = connect(&format!("{}/mcp", gw.url)).await;
    let tools = root.list_all_tools().await.unwrap();
    let names: Vec<&str> = tools.iter().map(|t| &*t.name).collect();
    assert_eq!(names, META);
    assert_eq!(tools[0].description.as_deref(), Some("Find pet tools."));
    let all = connect(&format!("{}/mcp?mode=all", gw.url)).await;
    assert_eq!(listed(&all).await.len(), default_catalog().tool_count());
    let pets = connect(&format!("{}/mcp/pets", gw.url)).await;
    assert!(listed(&pets).await.contains(&"pets__get_pet".to_string()));
    let pets = connect(&format!("{}/mcp/pets?mode=search", gw.url)).await;
    assert_eq!(listed(&pets).await, META);
}

#[tokio::test]
async fn search_describe_and_call_reach_the_tool_through_the_meta_tools() {
    let up = TestUpstream::start().await;
    let gw = gateway_with(&up, ListingConfig::default()).await;
    let client = connect(&format!("{}/mcp?mode=search", gw.url)).await;

    let r = call(&client, "search_tools", json!({"query": "get a pet by id"})).await;
    let hits = results(&r);
    assert_eq!(hits[0]["name"], "pets__get_pet", "{hits:?}");
    // The first three results carry their input schema, the rest do not.
    for (i, h) in hits.iter().enumerate() {
        assert_eq!(h.get("inputSchema").is_some(), i < 3, "{h}");
    }
    assert_eq!(hits[0]["annotations"]["readOnlyHint"], true);
    assert_eq!(
        found(&client, json!({"query": "pet", "limit": 1}))
            .await
            .len(),
        1
    );

    // describe_tool gives the tool as /mcp's tools/list lists it.
    let whole = connect(&format!("{}/mcp", gw.url)).await;
    let listed = whole
        .list_all_tools()
        .await
        .unwrap()
        .into_iter()
        .find(|t| t.name == "pets__get_pet")
        .expect("listed on /mcp");
    let d = call(&client, "describe_tool", json!({"name": "pets__get_pet"})).await;
    assert!(!is_error(&d), "{}", text(&d));
    assert_eq!(
        d.structured_content.expect("structured"),
        serde_json::to_value(&listed).unwrap()
    );

    // call_tool reaches the upstream; its result is the tool's.
    let before = up.count();
    let via_meta = call(
        &client,
        "call_tool",
        json!({"name": "pets__get_pet", "arguments": {"id": "7"}}),
    )
    .await;
    assert!(!is_error(&via_meta), "{}", text(&via_meta));
    assert_eq!(up.count(), before + 1);
    assert_eq!(up.last().path, "/pets/7");
    // A direct call works in search mode too, with the same result.
    let direct = call(&client, "pets__get_pet", json!({"id": "7"})).await;
    assert_eq!(direct.structured_content, via_meta.structured_content);
    assert_eq!(up.count(), before + 2);

    // Bad arguments: the same error as a direct call, and no request.
    let bad = json!({"id": ""});
    let via_meta = call(
        &client,
        "call_tool",
        json!({"name": "pets__get_pet", "arguments": bad}),
    )
    .await;
    let direct = call(&client, "pets__get_pet", bad).await;
    assert!(is_error(&via_meta) && is_error(&direct));
    assert!(
        text(&direct).contains("invalid arguments"),
        "{}",
        text(&direct)
    );
    assert_eq!(text(&via_meta), text(&direct));
    assert_eq!(up.count(), before + 2);

    // Unknown tools: the direct call's error, from describe and call.
    let direct = protocol_error(&client, "pets__nope", json!({})).await;
    assert_eq!(direct.0, ErrorCode::INVALID_PARAMS);
    for meta in ["describe_tool", "call_tool"] {
        let e = protocol_error(&client, meta, json!({"name": "pets__nope"})).await;
        assert_eq!(e, direct, "{meta}");
    }
    // The meta-tools' own arguments are checked like a tool's.
    for (meta, args) in [
        ("search_tools", json!({})),
        ("search_tools", json!({"query": "pet", "limit": 51})),
        ("describe_tool", json!({"name": "pets__get_pet", "x": 1})),
        ("call_tool", json!({"arguments": {}})),
    ] {
        let r = call(&client, meta, args.clone()).await;
        assert!(is_error(&r), "{meta} {args}");
        assert!(
            text(&r).starts_with(&format!("invalid arguments for {meta}")),
            "{}",
            text(&r)
        );
    }
}

#[tokio::test]
async fn a_prefix_endpoint_neither_finds_nor_calls_another_upstreams_tools() {
    let up = TestUpstream::start().await;
    let gw = gateway_with(&up, ListingConfig::default()).await;
    let root = connect(&format!("{}/mcp?mode=search", gw.url)).await;
    assert!(found(&root, json!({"query": "ping"}))
        .await
        .contains(&"other__ping".to_string()));

    let pets = connect(&format!("{}/mcp/pets?mode=search", gw.url)).await;
    let hits = found(&pets, json!({"query": "ping pet"})).await;
    assert!(!hits.is_empty());
    assert!(hits.iter().all(|n| n.starts_with("pets__")), "{hits:?}");
    assert!(found(&pets, json!({"query": "ping", "prefix": "other"}))
        .await
        .is_empty());
    let unknown = protocol_error(&pets, "other__nope", json!({})).await;
    for (name, args) in [
        ("other__ping", json!({})),
        ("call_tool", json!({"name": "other__ping"})),
        ("describe_tool", json!({"name": "other__ping"})),
    ] {
        let e = protocol_error(&pets, name, args).await;
        assert_eq!(e.0, unknown.0, "{name}");
        assert_eq!(
            e.1.replace("other__ping", "NAME"),
            unknown.1.replace("other__nope", "NAME"),
            "{name}"
        );
    }
    assert!(up.requests().iter().all(|r| r.path != "/other-base/ping"));
}

/// `pets`: a read-only GET and a DELETE only `pets.admin` may call.
fn admin_rules(up: &TestUpstream) -> gateway::config::GatewayConfig {
    config_for(
        &up.url,
        "    access:\n      rules: [{scopes: [pets.admin]}, {readOnly: true}]",
    )
}

fn admin_catalog() -> catalog::Catalog {
    let empty = json!({"type": "object", "properties": {}, "additionalProperties": false});
    catalog_of(vec![
        upstream(
            "pets",
            vec![
                tool(
                    "pets__get_pet",
                    "GET",
                    "/pets/7",
                    empty.clone(),
                    json!([]),
                    json!({"annotations": {"readOnlyHint": true}, "description": "Get a pet"}),
                ),
                tool(
                    "pets__delete_pet",
                    "DELETE",
                    "/pets/7",
                    empty,
                    json!([]),
                    json!({"annotations": {"destructiveHint": true}, "description": "Delete a pet"}),
                ),
            ],
        ),
        upstream("other", other_tools()),
    ])
}

#[tokio::test]
async fn a_tool_outside_the_callers_access_is_neither_found_nor_callable() {
    let (idp, up) = (
        toolgate_tests::idp::Idp::start().await,
        TestUpstream::start().await,
    );
    let gw = start_gateway_trusting(&idp, &admin_catalog(), admin_rules(&up), "allow").await;
    let bearer = |scope: &str| Caller {
        headers: vec![(
            "authorization".into(),
            format!("Bearer {}", idp.token().aud("toolgate").scope(scope).mint()),
        )],
    };
    let url = format!("{}/mcp?mode=search", gw.url);
    let admin = connect_caller(&url, &bearer("pets.admin")).await;
    let reader = connect_caller(&url, &bearer("pets.read")).await;

    let query = json!({"query": "delete a pet"});
    assert_eq!(found(&admin, query.clone()).await[0], "pets__delete_pet");
    let seen: BTreeSet<String> = found(&reader, query).await.into_iter().collect();
    assert!(!seen.contains("pets__delete_pet"), "{seen:?}");
    assert!(seen.contains("pets__get_pet"), "{seen:?}");

    let before = up.count();
    let unknown = protocol_error(&reader, "pets__nope", json!({})).await;
    for (name, args) in [
        ("pets__delete_pet", json!({})),
        ("call_tool", json!({"name": "pets__delete_pet"})),
        ("describe_tool", json!({"name": "pets__delete_pet"})),
    ] {
        let e = protocol_error(&reader, name, args).await;
        assert_eq!(e.0, unknown.0, "{name}");
        assert_eq!(
            e.1.replace("pets__delete_pet", "NAME"),
            unknown.1.replace("pets__nope", "NAME"),
            "{name}"
        );
    }
    assert_eq!(up.count(), before);
    let r = call(&admin, "call_tool", json!({"name": "pets__delete_pet"})).await;
    assert!(!is_error(&r), "{}", text(&r));
    assert_eq!(up.last().method, "DELETE");
}

#[tokio::test]
async fn an_unknown_mode_is_a_400_naming_the_parameter() {
    let up = TestUpstream::start().await;
    let gw = gateway_with(&up, ListingConfig::default()).await;
    let http = reqwest::Client::new();
    for path in [
        "/mcp?mode=bogus",
        "/mcp/pets?mode=bogus",
        "/mcp?mode=search&mode=x",
    ] {
        let r = http
            .post(format!("{}{path}", gw.url))
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 400, "{path}");
        let body: Value = r.json().await.unwrap();
        let error = body["error"].as_str().unwrap_or_default();
        assert!(error.contains("'mode'"), "{path}: {body}");
    }
}

#[tokio::test]
async fn a_search_mode_session_is_told_when_its_tools_change() {
    let up = TestUpstream::start().await;
    let gw = gateway_with(&up, listing("  pinned: [pets__adopt_pet]\n")).await;
    let client = connect(&format!("{}/mcp?mode=search", gw.url)).await;
    assert_eq!(listed(&client).await, META);
    assert!(found(&client, json!({"query": "adopt"})).await.is_empty());

    let mut tools = pets_tools();
    tools.push(tool(
        "pets__adopt_pet",
        "POST",
        "/adoptions",
        json!({"type": "object"}),
        json!([]),
        json!({"description": "Adopt a pet from the shelter"}),
    ));
    let next = catalog_of(vec![
        upstream("pets", tools),
        upstream("other", other_tools()),
    ]);
    gw.store.install(&next).expect("installs");
    client.service().wait_changes(1).await;
    assert_eq!(
        listed(&client).await,
        [
            "search_tools",
            "describe_tool",
            "call_tool",
            "pets__adopt_pet"
        ]
    );
    assert_eq!(
        found(&client, json!({"query": "adopt"})).await,
        ["pets__adopt_pet"]
    );
}

/// The official Python SDK finds a tool with `search_tools` and runs it
/// with `call_tool` (`tests/clients/search_client.py`).
#[tokio::test]
async fn the_python_sdk_searches_and_calls_through_the_meta_tools() {
    let Some(sdk) = toolgate_tests::tools::sdk_clients() else {
        return;
    };
    let up = TestUpstream::start().await;
    let gw = gateway_with(&up, ListingConfig::default()).await;
    let script =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/clients/search_client.py");
    let before = up.count();
    let child = std::process::Command::new(&sdk.python)
        .arg(&script)
        .arg(format!("{}/mcp?mode=search", gw.url))
        .arg("get a pet by its id")
        .arg("pets__get_pet")
        .arg(r#"{"id": "7"}"#)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("the Python client starts");
    // Off the runtime: the gateway under test serves on it meanwhile.
    let out = tokio::time::timeout(
        WAIT * 6,
        tokio::task::spawn_blocking(move || child.wait_with_output()),
    )
    .await
    .expect("timed out waiting for the Python client")
    .expect("the wait runs")
    .expect("the Python client's output");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "python client failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let last = stdout.lines().last().unwrap_or_default();
    let result: Value = serde_json::from_str(last).expect("the result as JSON");
    assert_eq!(result, json!({"id": 7, "name": "rex"}));
    assert_eq!(up.count(), before + 1);
    assert_eq!(up.last().path, "/pets/7");
}
