//! OpenTelemetry traces of the real `toolgate serve`, exported over
//! OTLP/HTTP to the in-test receiver ([`toolgate_tests::otlp`]): the spans
//! of one tools/call and their links, the trace context the upstream
//! receives, a trace continued from `params._meta.traceparent`, error
//! types, and trace ids in JSON logs.

use std::path::PathBuf;

use rmcp::model::{CallToolRequestParams, RequestMetaObject};
use serde_json::{json, Value};
use toolgate_tests::otlp::{Attr, ReceivedSpan, Receiver, SpanKind};

use crate::reload::{serve_with_env, tempdir, Served};
use crate::support::{args, call, connect, default_catalog, is_error, WAIT};
use crate::upstream::TestUpstream;

/// A trace id and span id the "client" made up.
const CLIENT_TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CLIENT_SPAN: &str = "00f067aa0ba902b7";

struct Traced {
    receiver: Receiver,
    up: TestUpstream,
    served: Served,
}

/// `toolgate serve` exporting to a fresh receiver; `pets` fails responses
/// that do not match their schema, `other`'s base URL is `other_base`.
/// Extra `args` go to `serve`.
async fn start(name: &str, other_base: Option<&str>, extra: &[&str]) -> Traced {
    let receiver = Receiver::start().await;
    let up = TestUpstream::start().await;
    let dir: PathBuf = tempdir(name);
    let catalog = dir.join("catalog.json");
    std::fs::write(&catalog, serde_json::to_vec(&default_catalog()).unwrap()).unwrap();
    let config = dir.join("gateway.yaml");
    let other = other_base.map_or_else(|| up.url.clone(), str::to_string);
    std::fs::write(
        &config,
        format!(
            "upstreams:\n  pets: {{baseUrl: '{}', responseValidation: fail}}\n  other: {{baseUrl: '{other}'}}\n",
            up.url
        ),
    )
    .unwrap();
    let mut argv = vec![
        "--catalog",
        catalog.to_str().unwrap(),
        "--config",
        config.to_str().unwrap(),
    ];
    argv.extend_from_slice(extra);
    let endpoint = receiver.endpoint();
    let served = serve_with_env(
        &argv,
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()),
            // Export each batch soon after its spans end.
            ("OTEL_BSP_SCHEDULE_DELAY", "50"),
        ],
    );
    Traced {
        receiver,
        up,
        served,
    }
}

/// The span named `name` in trace `trace`, once exported.
async fn span(receiver: &Receiver, trace: &str, name: &str) -> ReceivedSpan {
    receiver
        .wait_for(&format!("'{name}' in trace {trace}"), |s| {
            s.trace_id == trace && s.name == name
        })
        .await
}

#[tokio::test]
async fn one_tools_call_exports_linked_spans_and_propagates_to_the_upstream() {
    let t = start("traces-call", None, &[]).await;
    let client = connect(&format!("{}/mcp", t.served.url)).await;
    let result = call(&client, "pets__get_pet", json!({"id": "7"})).await;
    assert!(!is_error(&result), "{result:?}");

    let rpc = t
        .receiver
        .wait_for("the tools/call span", |s| {
            s.name == "tools/call pets__get_pet"
        })
        .await;
    let trace = rpc.trace_id.clone();
    assert_eq!(rpc.service, "toolgate-gateway");
    assert_eq!(rpc.kind, SpanKind::Server);
    assert_eq!(rpc.str("mcp.method.name"), Some("tools/call"));
    assert_eq!(rpc.str("gen_ai.tool.name"), Some("pets__get_pet"));
    assert_eq!(rpc.str("gen_ai.operation.name"), Some("execute_tool"));
    assert_eq!(rpc.str("toolgate.upstream"), Some("pets"));
    assert!(rpc.str("jsonrpc.request.id").is_some(), "{rpc:?}");
    assert!(
        rpc.str("mcp.session.id").is_some_and(|s| !s.is_empty()),
        "{rpc:?}"
    );
    assert!(rpc.str("mcp.protocol.version").is_some(), "{rpc:?}");
    assert_eq!(rpc.attr("error.type"), None, "{rpc:?}");

    // The HTTP server span is the JSON-RPC span's parent and the root.
    let server = t
        .receiver
        .wait_for("the HTTP span of the call", |s| {
            s.trace_id == trace && s.span_id == rpc.parent_span_id
        })
        .await;
    assert_eq!(server.name, "POST /mcp");
    assert_eq!(server.kind, SpanKind::Server);
    assert_eq!(server.parent_span_id, "", "{server:?}");
    assert_eq!(server.str("http.request.method"), Some("POST"));
    assert_eq!(server.str("http.route"), Some("/mcp"));
    assert_eq!(server.str("url.path"), Some("/mcp"));
    assert_eq!(server.int("http.response.status_code"), Some(200));

    for step in ["validate arguments", "build request", "validate response"] {
        let s = span(&t.receiver, &trace, step).await;
        assert!(s.is_child_of(&rpc), "{step}: {s:?} under {rpc:?}");
        assert_eq!(s.attr("error.type"), None, "{s:?}");
    }

    let upstream = span(&t.receiver, &trace, "GET /pets/{id}").await;
    assert!(upstream.is_child_of(&rpc), "{upstream:?}");
    assert_eq!(upstream.kind, SpanKind::Client);
    assert_eq!(upstream.str("http.request.method"), Some("GET"));
    assert_eq!(upstream.str("url.template"), Some("/pets/{id}"));
    assert_eq!(upstream.str("server.address"), Some("127.0.0.1"));
    let port: i64 = t.up.url.rsplit(':').next().unwrap().parse().unwrap();
    assert_eq!(upstream.int("server.port"), Some(port));
    assert_eq!(upstream.int("http.response.status_code"), Some(200));

    // The upstream continues the trace under the client span.
    let received = t.up.last();
    assert_eq!(
        received.header("traceparent"),
        Some(format!("00-{trace}-{}-01", upstream.span_id).as_str()),
        "{:?}",
        received.headers
    );
}

#[tokio::test]
async fn a_trace_started_in_meta_traceparent_continues() {
    let t = start("traces-meta", None, &[]).await;
    let client = connect(&format!("{}/mcp", t.served.url)).await;
    let mut meta = RequestMetaObject::new();
    meta.insert(
        "traceparent".into(),
        Value::String(format!("00-{CLIENT_TRACE}-{CLIENT_SPAN}-01")),
    );
    let mut p = CallToolRequestParams::new("pets__get_pet");
    p.arguments = Some(args(json!({"id": "7"})));
    p.meta = Some(meta);
    let result = tokio::time::timeout(WAIT, client.call_tool(p))
        .await
        .expect("tools/call answered in time")
        .expect("tools/call answered");
    assert!(!is_error(&result), "{result:?}");

    let rpc = span(&t.receiver, CLIENT_TRACE, "tools/call pets__get_pet").await;
    assert_eq!(rpc.parent_span_id, CLIENT_SPAN, "{rpc:?}");
    let upstream = span(&t.receiver, CLIENT_TRACE, "GET /pets/{id}").await;
    assert!(upstream.is_child_of(&rpc), "{upstream:?}");
    assert_eq!(
        t.up.last().header("traceparent"),
        Some(format!("00-{CLIENT_TRACE}-{}-01", upstream.span_id).as_str())
    );
}

#[tokio::test]
async fn invalid_arguments_have_an_error_type_and_reach_no_upstream() {
    let t = start("traces-invalid", None, &[]).await;
    let client = connect(&format!("{}/mcp", t.served.url)).await;
    let result = call(&client, "pets__get_pet", json!({"id": ""})).await;
    assert!(is_error(&result), "{result:?}");

    let rpc = t
        .receiver
        .wait_for("the failed tools/call span", |s| {
            s.name == "tools/call pets__get_pet"
        })
        .await;
    assert_eq!(
        rpc.attr("error.type"),
        Some(&Attr::Str("invalid_arguments".into())),
        "{rpc:?}"
    );
    let check = span(&t.receiver, &rpc.trace_id, "validate arguments").await;
    assert!(check.is_child_of(&rpc));
    assert_eq!(check.str("error.type"), Some("invalid_arguments"));
    assert_eq!(t.up.count(), 0);
}

#[tokio::test]
async fn json_logs_inside_a_call_carry_its_trace_and_span_ids() {
    // `other` points at a port nothing listens on: the call logs a
    // warning inside its JSON-RPC span.
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", l.local_addr().unwrap())
    };
    let t = start("traces-logs", Some(&closed), &["--log-format", "json"]).await;
    let client = connect(&format!("{}/mcp", t.served.url)).await;
    let from = t.served.log_count();
    let result = call(&client, "other__ping", json!({})).await;
    assert!(is_error(&result), "{result:?}");

    let rpc = t
        .receiver
        .wait_for("the failed tools/call span", |s| {
            s.name == "tools/call other__ping"
        })
        .await;
    assert_eq!(rpc.str("error.type"), Some("upstream_unreachable"));
    let line = t
        .served
        .wait_log(from, &["upstream call failed", &rpc.trace_id])
        .await;
    let line: Value = serde_json::from_str(&line).expect("a JSON log line");
    assert_eq!(line["trace_id"], rpc.trace_id.as_str(), "{line}");
    assert_eq!(line["span_id"], rpc.span_id.as_str(), "{line}");
    assert_eq!(line["level"], "WARN");
    assert_eq!(line["span"]["mcp.method.name"], "tools/call", "{line}");
    assert_eq!(line["span"]["gen_ai.tool.name"], "other__ping", "{line}");
    assert_eq!(line["span"]["http.route"], "/mcp", "{line}");
    assert_eq!(line["span"]["name"], "tools/call other__ping", "{line}");
}

/// One stateless (2026-07-28) tools/call POST with a `traceparent`
/// header and, if given, `params._meta.traceparent`.
async fn raw_call(url: &str, header: &str, meta: Option<&str>) -> Value {
    let mut meta_obj = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "traces", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {}
    });
    if let Some(m) = meta {
        meta_obj["traceparent"] = m.into();
    }
    let body = json!({
        "jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "pets__get_pet", "arguments": {"id": "7"}, "_meta": meta_obj}
    });
    gateway::net::install_crypto_provider();
    let resp = reqwest::Client::new()
        .post(format!("{url}/mcp"))
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/call")
        .header("mcp-name", "pets__get_pet")
        .header("traceparent", header)
        .json(&body)
        .send()
        .await
        .expect("the gateway answers");
    assert!(resp.status().is_success(), "{resp:?}");
    resp.json().await.expect("a JSON-RPC response")
}

#[tokio::test]
async fn the_traceparent_header_parents_the_http_span() {
    let t = start("traces-header", None, &[]).await;
    let header = format!("00-{CLIENT_TRACE}-{CLIENT_SPAN}-01");
    let answer = raw_call(&t.served.url, &header, None).await;
    assert_eq!(answer["result"]["isError"], false, "{answer}");

    let server = span(&t.receiver, CLIENT_TRACE, "POST /mcp").await;
    assert_eq!(server.parent_span_id, CLIENT_SPAN, "{server:?}");
    let rpc = span(&t.receiver, CLIENT_TRACE, "tools/call pets__get_pet").await;
    assert!(rpc.is_child_of(&server), "{rpc:?}");
    assert_eq!(rpc.str("mcp.protocol.version"), Some("2026-07-28"));
}

#[tokio::test]
async fn meta_traceparent_wins_over_the_header_for_the_call() {
    let t = start("traces-both", None, &[]).await;
    let header = format!("00-{CLIENT_TRACE}-{CLIENT_SPAN}-01");
    let meta_trace = "0af7651916cd43dd8448eb211c80319c";
    let meta_span = "b7ad6b7169203331";
    let meta = format!("00-{meta_trace}-{meta_span}-01");
    let answer = raw_call(&t.served.url, &header, Some(&meta)).await;
    assert_eq!(answer["result"]["isError"], false, "{answer}");

    // The HTTP span follows the header; the call follows `_meta`.
    let server = span(&t.receiver, CLIENT_TRACE, "POST /mcp").await;
    assert_eq!(server.parent_span_id, CLIENT_SPAN);
    let rpc = span(&t.receiver, meta_trace, "tools/call pets__get_pet").await;
    assert_eq!(rpc.parent_span_id, meta_span, "{rpc:?}");
    let upstream = span(&t.receiver, meta_trace, "GET /pets/{id}").await;
    assert_eq!(
        t.up.last().header("traceparent"),
        Some(format!("00-{meta_trace}-{}-01", upstream.span_id).as_str())
    );
}

#[tokio::test]
async fn upstream_errors_and_unkept_responses_have_their_error_types() {
    let t = start("traces-errors", None, &[]).await;
    let client = connect(&format!("{}/mcp", t.served.url)).await;
    for id in ["500", "bad"] {
        let result = call(&client, "pets__get_pet", json!({ "id": id })).await;
        assert!(is_error(&result), "{id}: {result:?}");
    }

    let failed = t
        .receiver
        .wait_for("a tools/call span failed by the upstream's status", |s| {
            s.name == "tools/call pets__get_pet" && s.str("error.type") == Some("upstream_status")
        })
        .await;
    let upstream = span(&t.receiver, &failed.trace_id, "GET /pets/{id}").await;
    assert_eq!(upstream.int("http.response.status_code"), Some(500));
    assert_eq!(upstream.str("error.type"), Some("500"));

    let unkept = t
        .receiver
        .wait_for("a tools/call span failed by response validation", |s| {
            s.name == "tools/call pets__get_pet"
                && s.str("error.type") == Some("response_validation")
        })
        .await;
    let check = span(&t.receiver, &unkept.trace_id, "validate response").await;
    assert!(check.is_child_of(&unkept), "{check:?}");
    assert_eq!(check.str("error.type"), Some("response_validation"));
}
