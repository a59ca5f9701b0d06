//! The outputSchema contract, as the official SDK clients and rmcp see it:
//! a tool lists an outputSchema only under responseValidation `fail`, and
//! then every success result carries `structuredContent` matching it (the
//! SDKs throw otherwise); under `warn` a response that breaks its schema
//! reaches the caller as a success with its data.
//!
//! The upstream is a small OpenAPI document compiled by the real compiler,
//! so the output schemas are the ones users get (with `format`s, `$ref`d
//! components, a wrapped array).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::get;
use axum::{Json, Router};
use catalog::{Catalog, SchemaRefs};
use rmcp::model::PaginatedRequestParams;
use serde_json::{json, Value};
use toolgate_tests::tools::SdkClients;

use crate::support::*;

const SPEC: &str = r##"
openapi: 3.0.3
info: {title: Shop, version: "1"}
paths:
  /items/{id}:
    parameters:
      - {name: id, in: path, required: true, schema: {type: string}}
    get:
      operationId: getItem
      responses:
        "200":
          description: the item
          content:
            application/json:
              schema: {$ref: "#/components/schemas/Item"}
    delete:
      operationId: deleteItem
      responses:
        "200":
          description: the deleted item
          content:
            application/json:
              schema: {$ref: "#/components/schemas/Item"}
        "204": {description: already gone}
  /items/{id}/tags:
    parameters:
      - {name: id, in: path, required: true, schema: {type: string}}
    get:
      operationId: listTags
      responses:
        "200":
          description: the item's tags
          content:
            application/json:
              schema: {type: array, items: {type: string}}
components:
  schemas:
    Item:
      type: object
      required: [id, name]
      properties:
        id: {type: integer, format: int32}
        name: {type: string}
        added: {type: string, format: date-time}
        ships_from: {$ref: "#/components/schemas/Place"}
        ships_to: {$ref: "#/components/schemas/Place"}
    Place:
      type: object
      required: [city]
      properties:
        city: {type: string, minLength: 1}
        country: {type: string, minLength: 2, maxLength: 2}
"##;

/// Item 1 matches its schema. Its `added` is no RFC 3339 date-time: the
/// TypeScript SDK asserts `format` (ajv-formats), JSON Schema and the
/// gateway do not, so a listed schema must not carry it. Item 2 breaks
/// the schema three times, once inside a `Place` (which `schema.refs:
/// defs` lists once under `$defs`).
async fn shop_upstream() -> String {
    let app = Router::new()
        .route(
            "/items/{id}",
            get(
                |axum::extract::Path(id): axum::extract::Path<String>| async move {
                    match id.as_str() {
                        "1" => Json(item_1()).into_response(),
                        _ => Json(item_2()).into_response(),
                    }
                },
            )
            .delete(|| async { StatusCode::NO_CONTENT }),
        )
        .route(
            "/items/{id}/tags",
            get(
                |axum::extract::Path(id): axum::extract::Path<String>| async move {
                    match id.as_str() {
                        "1" => Json(json!(["red", "new"])),
                        _ => Json(json!([1, "new"])),
                    }
                },
            ),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    url
}

fn item_1() -> Value {
    json!({"id": 1, "name": "lamp", "added": "2024-05-01 10:00",
           "ships_to": {"city": "Oslo", "country": "NO"}})
}

fn item_2() -> Value {
    json!({"id": "two", "name": 7, "ships_to": {"city": 5}})
}

fn shop_catalog(refs: SchemaRefs) -> Catalog {
    let mut options = catalog::CompileOptions::default();
    options.schema.refs = refs;
    let u = catalog::compile_upstream(&catalog::UpstreamSource {
        prefix: "shop",
        document: "shop.yaml",
        spec: SPEC.as_bytes(),
        overlays: &[],
        options: &options,
    })
    .expect("the shop document compiles");
    Catalog::new(vec![u])
}

/// A gateway serving the shop with `responseValidation: mode`.
async fn shop_gateway(mode: &str) -> Gateway {
    shop_gateway_with(mode, SchemaRefs::Inline).await
}

async fn shop_gateway_with(mode: &str, refs: SchemaRefs) -> Gateway {
    let up = shop_upstream().await;
    let config = gateway::config::parse(&format!(
        "upstreams:\n  shop:\n    baseUrl: {up}\n    responseValidation: {mode}\n"
    ))
    .unwrap();
    start_gateway(&shop_catalog(refs), config).await
}

/// The calls every client makes, in this order.
fn calls() -> Value {
    json!([
        {"name": "shop__get_item", "arguments": {"id": "1"}},
        {"name": "shop__get_item", "arguments": {"id": "2"}},
        {"name": "shop__list_tags", "arguments": {"id": "1"}},
        {"name": "shop__list_tags", "arguments": {"id": "2"}},
        {"name": "shop__delete_item", "arguments": {"id": "1"}},
    ])
}

/// What one client reports: `call_tools.{py,mjs}`'s output, or the same
/// built from rmcp results.
struct Report {
    /// Tool name → listed outputSchema (`null` when none).
    tools: Vec<(String, Value)>,
    calls: Vec<Value>,
}

impl Report {
    fn parse(client: &str, out: &[u8]) -> Report {
        let v: Value = serde_json::from_slice(out).unwrap_or_else(|e| {
            panic!(
                "{client}: not a report ({e}): {}",
                String::from_utf8_lossy(out)
            )
        });
        Report {
            tools: v["tools"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| {
                    (
                        t["name"].as_str().unwrap().to_string(),
                        t["outputSchema"].clone(),
                    )
                })
                .collect(),
            calls: v["calls"].as_array().unwrap().clone(),
        }
    }

    fn output_schema(&self, tool: &str) -> &Value {
        &self.tools.iter().find(|(n, _)| n == tool).unwrap().1
    }
}

/// Asserts one client's report for a gateway in `warn` mode: no schema
/// listed, every result a success with its data.
fn assert_warn(client: &str, r: &Report) {
    for (name, schema) in &r.tools {
        assert_eq!(
            schema,
            &Value::Null,
            "{client}: {name} lists an outputSchema under warn"
        );
    }
    let c = &r.calls;
    for call in c {
        assert_eq!(call["accepted"], true, "{client}: the SDK refused {call}");
        assert_eq!(call["isError"], false, "{client}: {call}");
    }
    assert_eq!(c[0]["structuredContent"], item_1(), "{client}");
    // Breaks its schema, reaches the caller as data all the same.
    assert_eq!(c[1]["structuredContent"], item_2(), "{client}");
    assert_eq!(
        serde_json::from_str::<Value>(c[1]["text"].as_str().unwrap()).unwrap(),
        item_2(),
        "{client}"
    );
    assert_eq!(
        c[2]["structuredContent"],
        json!({"result": ["red", "new"]}),
        "{client}"
    );
    assert_eq!(
        c[3]["structuredContent"],
        json!({"result": [1, "new"]}),
        "{client}"
    );
    assert_eq!(c[4]["text"], "", "{client}: {}", c[4]);
}

/// Asserts one client's report for a gateway in `fail` mode: schemas
/// listed (without `format`), conforming results structured, the others
/// isError naming why.
fn assert_fail(client: &str, r: &Report) {
    let item = r.output_schema("shop__get_item");
    assert_eq!(item["type"], "object", "{client}: {item}");
    assert_eq!(item["required"], json!(["id", "name"]), "{client}: {item}");
    assert!(
        !item.to_string().contains("format"),
        "{client}: listed with a format: {item}"
    );
    assert_eq!(
        r.output_schema("shop__list_tags")["properties"]["result"]["type"],
        "array",
        "{client}"
    );
    let c = &r.calls;
    for call in c {
        assert_eq!(call["accepted"], true, "{client}: the SDK refused {call}");
    }
    assert_eq!(c[0]["isError"], false, "{client}: {}", c[0]);
    assert_eq!(c[0]["structuredContent"], item_1(), "{client}");
    assert_eq!(c[1]["isError"], true, "{client}: {}", c[1]);
    let t = c[1]["text"].as_str().unwrap();
    assert!(t.contains("does not match"), "{client}: {t}");
    assert!(
        t.contains("id: ") && t.contains("name: ") && t.contains("ships_to.city: "),
        "{client}: violations not named: {t}"
    );
    assert_eq!(c[2]["isError"], false, "{client}: {}", c[2]);
    assert_eq!(
        c[2]["structuredContent"],
        json!({"result": ["red", "new"]}),
        "{client}"
    );
    assert_eq!(c[3]["isError"], true, "{client}: {}", c[3]);
    assert!(
        c[3]["text"].as_str().unwrap().contains("result.0: "),
        "{client}: {}",
        c[3]
    );
    // A 204 cannot carry the structuredContent the schema promises.
    assert_eq!(c[4]["isError"], true, "{client}: {}", c[4]);
    assert!(
        c[4]["text"]
            .as_str()
            .unwrap()
            .contains("HTTP 204 with no body"),
        "{client}: {}",
        c[4]
    );
}

/// This checkout's `tests/clients/{name}`.
fn client_script(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/clients")
        .join(name)
}

/// Runs a client process to completion (each script bounds its own
/// run); its stdout. Waited for off the runtime, which serves the gateway
/// meanwhile.
async fn run_client(client: &str, mut cmd: Command) -> Vec<u8> {
    cmd.stdin(Stdio::null());
    let out = tokio::task::spawn_blocking(move || cmd.output())
        .await
        .unwrap()
        .unwrap_or_else(|e| panic!("{client} did not start: {e}"));
    assert!(
        out.status.success(),
        "{client} failed: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

async fn python_report(sdk: &SdkClients, url: &str, calls: &Value) -> Report {
    let mut cmd = Command::new(&sdk.python);
    cmd.arg(client_script("call_tools.py"))
        .arg(url)
        .arg(calls.to_string());
    let out = run_client("the Python SDK client", cmd).await;
    Report::parse("python", &out)
}

/// Node resolves imports from the script's directory: the script runs
/// from a directory of its own beside a link to the SDK's node_modules.
async fn typescript_report(sdk: &SdkClients, url: &str, calls: &Value) -> Report {
    let dir = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(
        sdk.node_dir.join("node_modules"),
        dir.path().join("node_modules"),
    )
    .unwrap();
    let script = dir.path().join("call_tools.mjs");
    std::fs::copy(client_script("call_tools.mjs"), &script).unwrap();
    let mut cmd = Command::new(&sdk.node);
    cmd.arg(&script).arg(url).arg(calls.to_string());
    let out = run_client("the TypeScript SDK client", cmd).await;
    Report::parse("typescript", &out)
}

/// The same report from rmcp's client (which checks no output schema).
async fn rmcp_report(url: &str) -> Report {
    let client = connect(url).await;
    let mut tools = Vec::new();
    let mut cursor = None;
    loop {
        let page = client
            .list_tools(cursor.map(|c| PaginatedRequestParams::default().with_cursor(Some(c))))
            .await
            .unwrap();
        tools.extend(page.tools);
        cursor = page.next_cursor;
        if cursor.is_none() {
            break;
        }
    }
    let mut out = Vec::new();
    for c in calls().as_array().unwrap() {
        let r = call(&client, c["name"].as_str().unwrap(), c["arguments"].clone()).await;
        out.push(json!({
            "name": c["name"],
            "accepted": true,
            "isError": is_error(&r),
            "structuredContent": r.structured_content,
            "text": text(&r),
        }));
    }
    Report {
        tools: tools
            .iter()
            .map(|t| {
                let schema = t
                    .output_schema
                    .as_ref()
                    .map_or(Value::Null, |s| Value::Object((**s).clone()));
                (t.name.to_string(), schema)
            })
            .collect(),
        calls: out,
    }
}

#[tokio::test]
async fn python_sdk_takes_warn_violations_as_data_and_fail_violations_as_errors() {
    let Some(sdk) = toolgate_tests::tools::sdk_clients() else {
        return;
    };
    let gw = shop_gateway("warn").await;
    assert_warn(
        "python",
        &python_report(&sdk, &format!("{}/mcp", gw.url), &calls()).await,
    );
    let gw = shop_gateway("fail").await;
    assert_fail(
        "python",
        &python_report(&sdk, &format!("{}/mcp", gw.url), &calls()).await,
    );
}

#[tokio::test]
async fn typescript_sdk_takes_warn_violations_as_data_and_fail_violations_as_errors() {
    let Some(sdk) = toolgate_tests::tools::sdk_clients() else {
        return;
    };
    let gw = shop_gateway("warn").await;
    assert_warn(
        "typescript",
        &typescript_report(&sdk, &format!("{}/mcp", gw.url), &calls()).await,
    );
    let gw = shop_gateway("fail").await;
    assert_fail(
        "typescript",
        &typescript_report(&sdk, &format!("{}/mcp", gw.url), &calls()).await,
    );
}

/// `schema.refs: defs` lists `Place`, used twice in an item, once under
/// `$defs`: both SDKs follow the `$ref` (the TypeScript one compiles and
/// checks the schema with AJV), and the gateway's own check finds a
/// violation behind it.
#[tokio::test]
async fn sdks_and_the_gateway_follow_defs_in_output_schemas() {
    let sdk = toolgate_tests::tools::sdk_clients();
    let gw = shop_gateway_with("fail", SchemaRefs::Defs).await;
    let url = format!("{}/mcp", gw.url);
    let mut reports = vec![("rmcp", rmcp_report(&url).await)];
    if let Some(sdk) = &sdk {
        reports.push(("python", python_report(sdk, &url, &calls()).await));
        reports.push(("typescript", typescript_report(sdk, &url, &calls()).await));
    }
    for (client, r) in &reports {
        let item = r.output_schema("shop__get_item");
        let place = &item["properties"]["ships_to"]["$ref"];
        assert!(
            place.as_str().is_some_and(|p| p.starts_with("#/$defs/")),
            "{client}: {item}"
        );
        assert_eq!(item["properties"]["ships_from"]["$ref"], *place, "{client}");
        assert_fail(client, r);
    }
}

#[tokio::test]
async fn rmcp_sees_the_same_contract() {
    let gw = shop_gateway("warn").await;
    assert_warn("rmcp", &rmcp_report(&format!("{}/mcp", gw.url)).await);
    let gw = shop_gateway("fail").await;
    assert_fail("rmcp", &rmcp_report(&format!("{}/mcp", gw.url)).await);
}

/// `off` neither validates nor lists: the data goes out structured.
#[tokio::test]
async fn off_lists_no_output_schema_and_returns_the_data() {
    let gw = shop_gateway("off").await;
    let r = rmcp_report(&format!("{}/mcp", gw.url)).await;
    assert_warn("rmcp (off)", &r);
    assert_eq!(violations(&gw).await, 0, "off validates nothing");
}

/// Under `warn` the violations are still found: logged, and counted in
/// `/status`.
#[tokio::test]
async fn warn_counts_violations_in_status() {
    let gw = shop_gateway("warn").await;
    assert_eq!(violations(&gw).await, 0);
    rmcp_report(&format!("{}/mcp", gw.url)).await;
    // get_item 2 and list_tags 2.
    assert_eq!(violations(&gw).await, 2);
}

/// `/status`'s `responseViolations` of the shop upstream.
async fn violations(gw: &Gateway) -> u64 {
    let v: Value = reqwest::get(format!("{}/status", gw.url))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    v["upstreams"][0]["responseViolations"]
        .as_u64()
        .unwrap_or_else(|| panic!("no responseViolations: {v}"))
}

/// Switching `warn` to `fail` changes what tools/list shows: sessions are
/// told (list_changed) and list again.
#[tokio::test]
async fn switching_to_fail_lists_output_schemas_and_sends_list_changed() {
    let gw = shop_gateway("warn").await;
    let client = connect(&format!("{}/mcp", gw.url)).await;
    let before = client.list_all_tools().await.unwrap();
    assert!(before.iter().all(|t| t.output_schema.is_none()));
    let base = gw
        .store
        .load()
        .tools(None)
        .next()
        .unwrap()
        .upstream
        .base_url
        .clone();
    let config = gateway::config::parse(&format!(
        "upstreams:\n  shop:\n    baseUrl: {base}\n    responseValidation: fail\n"
    ))
    .unwrap();
    let catalog = shop_catalog(SchemaRefs::Inline);
    let provenance = gateway::serving::snapshot::Provenance::of(&catalog, "test");
    gw.store
        .install_with_config(catalog, config, provenance)
        .unwrap();
    client.service().wait_changes(1).await;
    let after = client.list_all_tools().await.unwrap();
    let item = after.iter().find(|t| t.name == "shop__get_item").unwrap();
    assert!(item.output_schema.is_some());
}

/// Every output schema the compiler makes for the corpus is one the
/// TypeScript SDK takes as the gateway lists it under `fail`: the SDK
/// compiles each (AJV) when it lists, and one it cannot compile fails the
/// whole listing.
#[tokio::test]
async fn typescript_sdk_takes_every_corpus_output_schema_under_fail() {
    typescript_sdk_takes_every_corpus_output_schema(SchemaRefs::Inline).await;
}

/// The same with `schema.refs: defs`: AJV resolves every `$ref` the
/// compiler writes.
#[tokio::test]
async fn typescript_sdk_takes_every_corpus_output_schema_with_defs() {
    typescript_sdk_takes_every_corpus_output_schema(SchemaRefs::Defs).await;
}

async fn typescript_sdk_takes_every_corpus_output_schema(refs: SchemaRefs) {
    let Some(sdk) = toolgate_tests::tools::sdk_clients() else {
        return;
    };
    let mut options = catalog::CompileOptions::default();
    options.schema.refs = refs;
    let mut upstreams = Vec::new();
    let mut config = String::from("upstreams:\n");
    for (i, path) in toolgate_corpus::documents().iter().enumerate() {
        let prefix = format!("c{i}");
        let spec = std::fs::read(path).unwrap();
        let document = path.display().to_string();
        let u = catalog::compile_upstream(&catalog::UpstreamSource {
            prefix: &prefix,
            document: &document,
            spec: &spec,
            overlays: &[],
            options: &options,
        })
        .unwrap_or_else(|e| panic!("{document}: {e}"));
        config.push_str(&format!(
            "  {prefix}: {{baseUrl: 'http://127.0.0.1:9', responseValidation: fail}}\n"
        ));
        upstreams.push(u);
    }
    let catalog = Catalog::new(upstreams);
    let listed = catalog
        .upstreams
        .iter()
        .flat_map(|u| &u.tools)
        .filter(|t| catalog::listing::lists_output_schema(t, true))
        .count();
    assert!(listed > 1000, "{listed}");
    let edge = gateway::EdgeOptions {
        page_size: 100,
        ..Default::default()
    };
    let gw = start_gateway_with(&catalog, gateway::config::parse(&config).unwrap(), edge).await;
    let r = typescript_report(&sdk, &format!("{}/mcp", gw.url), &json!([])).await;
    assert_eq!(r.tools.len(), catalog.tool_count());
    let with_schema = r.tools.iter().filter(|(_, s)| !s.is_null()).count();
    assert_eq!(with_schema, listed);
    let with_defs = r
        .tools
        .iter()
        .filter(|(_, s)| s.get("$defs").is_some())
        .count();
    match refs {
        SchemaRefs::Inline => assert_eq!(with_defs, 0),
        SchemaRefs::Defs => assert!(with_defs > 100, "{with_defs}"),
    }
}
