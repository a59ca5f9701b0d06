//! Memory of large responses, measured on the real binary: the peak RSS
//! (`VmHWM`) of a `toolgate serve` child while it relays a ~10 MB JSON
//! array, against its peak after a warm-up call. Run with `--nocapture`
//! to see the numbers:
//!
//! ```text
//! cargo test -p gateway --test e2e memory -- --nocapture --test-threads 1
//! ```
//!
//! The bounds asserted are loose (the numbers are printed): they must hold
//! on a debug build on a busy machine, and still fail the way the gateway
//! behaved before (36x the body for one call, 122x for eight at once).

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::routing::get;
use rmcp::model::{CallToolRequestParams, ClientConfig};
use rmcp::service::{ClientLifecycleMode, ClientServiceExt};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::StreamableHttpClientTransport;
use serde_json::{json, Value};

use crate::reload::{serve, serve_with_env, tempdir, Served};
use crate::support::{catalog_of, tool, upstream};

/// About 10 MB: under the default 10 MiB cap, like the issue's response.
const BODY_BYTES: usize = 10_000_000;

/// Peak growth allowed for one call, as a multiple of the body. Measured
/// (debug build): 36x before responses were sent by reference, 1.1-1.2x
/// after (the body, once, plus output chunks).
const ONE_CALL_FACTOR: usize = 3;

/// `[{"id":0,"name":"pet-0","tag":"dog","status":"available"}, ...]` of at
/// least `target` bytes: small objects, the shape whose `serde_json` tree
/// costs ~15x its text.
pub fn big_array(target: usize) -> Bytes {
    let mut s = String::with_capacity(target + 128);
    s.push('[');
    let mut i = 0usize;
    while s.len() < target {
        if i > 0 {
            s.push(',');
        }
        s.push_str(&format!(
            r#"{{"id":{i},"name":"pet-{i}","tag":"dog","status":"available"}}"#
        ));
        i += 1;
    }
    s.push(']');
    Bytes::from(s)
}

fn item_count(body: &[u8]) -> usize {
    serde_json::from_slice::<Vec<serde::de::IgnoredAny>>(body)
        .expect("the fixture is a JSON array")
        .len()
}

/// Size of `/mid`: a body a transform may take under the default budget.
const MID_BYTES: usize = 2_000_000;

/// An upstream serving `body` at `/items` (and `/ids`), a 2-item array at
/// `/small` and [`MID_BYTES`] of items at `/mid`.
async fn items_upstream(body: Bytes) -> String {
    let small = Bytes::from_static(br#"[{"id":1,"name":"a"},{"id":2,"name":"b"}]"#);
    let mid = big_array(MID_BYTES);
    let json = |b: Bytes| {
        move || {
            let b = b.clone();
            async move { ([(http::header::CONTENT_TYPE, "application/json")], b) }
        }
    };
    let app = axum::Router::new()
        .route("/items", get(json(body.clone())))
        .route("/ids", get(json(body)))
        .route("/mid", get(json(mid)))
        .route("/small", get(json(small)));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    url
}

/// `big__items` (GET /items) and `big__small` (GET /small): arrays of
/// items under an outputSchema, wrapped as `{"result": [...]}`, so the
/// response is validated and sent as text and `structuredContent`.
fn items_catalog() -> catalog::Catalog {
    let output = json!({
        "type": "object",
        "properties": {"result": {"type": "array", "items": {"$ref": "#/$defs/Item"}}},
        "required": ["result"],
        "$defs": {"Item": {"type": "object", "required": ["id", "name"], "properties": {
            "id": {"type": "integer", "minimum": 0},
            "name": {"type": "string"},
            "tag": {"type": "string"},
            "status": {"type": "string", "enum": ["available", "sold"]}}}}
    });
    let empty = json!({"type": "object", "properties": {}, "additionalProperties": false});
    let extra = json!({
        "outputSchema": output,
        "outputWrap": "result",
        "responses": [{"status": "200", "contentType": "application/json"}],
    });
    let mut tools: Vec<Value> = ["items", "small"]
        .iter()
        .map(|p| {
            tool(
                &format!("big__{p}"),
                "GET",
                &format!("/{p}"),
                empty.clone(),
                json!([]),
                extra.clone(),
            )
        })
        .collect();
    // The ids of the items, by a jq response transform.
    let ids = json!({"transforms": {"response": "map(.id)"}});
    for p in ["ids", "mid"] {
        tools.push(tool(
            &format!("big__{p}"),
            "GET",
            &format!("/{p}"),
            empty.clone(),
            json!([]),
            ids.clone(),
        ));
    }
    catalog_of(vec![upstream("big", tools)])
}

fn write_files(dir: &Path, base: &str, extra: &str) -> (String, String) {
    let catalog = dir.join("catalog.json");
    std::fs::write(&catalog, serde_json::to_vec(&items_catalog()).unwrap()).unwrap();
    let config = dir.join("gateway.yaml");
    std::fs::write(
        &config,
        format!("upstreams:\n  big:\n    baseUrl: '{base}'\n{extra}"),
    )
    .unwrap();
    (
        catalog.to_str().unwrap().to_string(),
        config.to_str().unwrap().to_string(),
    )
}

/// A field of `/proc/PID/status`, in bytes.
fn status_bytes(pid: u32, field: &str) -> usize {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    s.lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|rest| {
            rest.trim()
                .trim_end_matches("kB")
                .trim()
                .parse::<usize>()
                .ok()
        })
        .map_or(0, |kib| kib * 1024)
}

/// Resets the child's peak RSS to its current RSS (Linux >= 4.0).
fn reset_peak(pid: u32) {
    std::fs::write(format!("/proc/{pid}/clear_refs"), "5").expect("clear_refs is writable");
}

fn mib(b: usize) -> f64 {
    b as f64 / (1024.0 * 1024.0)
}

/// tools/call as one stateless (2026-07-28) JSON-RPC POST; the response,
/// body unread.
async fn post_call(http: &reqwest::Client, gw: &str, tool: &str) -> reqwest::Response {
    let body = json!({
        "jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {
            "name": tool, "arguments": {},
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientInfo": {"name": "e2e", "version": "1"},
                "io.modelcontextprotocol/clientCapabilities": {}
            }
        }
    });
    let r = http
        .post(format!("{gw}/mcp"))
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/call")
        .header("mcp-name", tool)
        .json(&body)
        .timeout(Duration::from_secs(120))
        .send()
        .await
        .expect("tools/call POST");
    assert!(r.status().is_success(), "HTTP {}", r.status());
    r
}

/// tools/call as one stateless (2026-07-28) JSON-RPC POST; the result.
async fn raw_call(http: &reqwest::Client, gw: &str, tool: &str) -> Value {
    let r = post_call(http, gw, tool).await;
    let bytes = r.bytes().await.expect("tools/call response body");
    let mut v: Value = serde_json::from_slice(&bytes).expect("a JSON-RPC response");
    v["result"].take()
}

/// Checks a result carries all `n` items, as text and as structuredContent.
fn assert_complete(result: &Value, n: usize) {
    assert_eq!(
        result["isError"],
        json!(false),
        "{:.300}",
        result.to_string()
    );
    let structured = result["structuredContent"]["result"]
        .as_array()
        .unwrap_or_else(|| panic!("no structuredContent: {:.300}", result.to_string()));
    assert_eq!(structured.len(), n);
    let text = result["content"][0]["text"].as_str().expect("a text block");
    // The text is the structured result, serialised.
    let from_text: Value = serde_json::from_str(text).expect("the text is JSON");
    assert_eq!(&from_text, &result["structuredContent"]);
}

struct Setup {
    served: Served,
    body: Bytes,
    items: usize,
    _dir: std::path::PathBuf,
}

async fn setup(name: &str, config_extra: &str, env: &[(&str, &str)]) -> Setup {
    gateway::net::install_crypto_provider();
    let body = big_array(BODY_BYTES);
    let items = item_count(&body);
    let base = items_upstream(body.clone()).await;
    let dir = tempdir(name);
    let (catalog, config) = write_files(&dir, &base, config_extra);
    let args = ["--catalog", catalog.as_str(), "--config", config.as_str()];
    let served = if env.is_empty() {
        serve(&args)
    } else {
        serve_with_env(&args, env)
    };
    Setup {
        served,
        body,
        items,
        _dir: dir,
    }
}

/// Warm-up: validators compiled, pools and buffers allocated; then the
/// peak is reset so the next measurement is the call's own.
async fn warm_up(http: &reqwest::Client, s: &Setup) -> usize {
    let r = raw_call(http, &s.served.url, "big__small").await;
    assert_complete(&r, 2);
    let pid = s.served.child.id();
    tokio::time::sleep(Duration::from_millis(300)).await;
    reset_peak(pid);
    status_bytes(pid, "VmHWM:")
}

/// Peak growth of a fresh gateway for one call of `big__items`, over a
/// session (SSE) or stateless (JSON).
async fn one_call_growth(name: &str, session: bool) -> (usize, usize, usize) {
    let s = setup(name, "", &[]).await;
    let http = reqwest::Client::new();
    let pid = s.served.child.id();
    let base = warm_up(&http, &s).await;
    if session {
        let mut cfg =
            StreamableHttpClientTransportConfig::with_uri(format!("{}/mcp", s.served.url));
        cfg.max_sse_event_size = 256 << 20;
        let client = ClientConfig::default()
            .serve_with_lifecycle(
                StreamableHttpClientTransport::from_config(cfg),
                ClientLifecycleMode::Initialize,
            )
            .await
            .expect("MCP client connects");
        let r = client
            .call_tool(CallToolRequestParams::new("big__items"))
            .await
            .expect("tools/call over a session");
        let peak = status_bytes(pid, "VmHWM:");
        assert_complete(&serde_json::to_value(&r).unwrap(), s.items);
        let _ = client.cancel().await;
        (peak.saturating_sub(base), base, s.body.len())
    } else {
        let r = raw_call(&http, &s.served.url, "big__items").await;
        let peak = status_bytes(pid, "VmHWM:");
        assert_complete(&r, s.items);
        (peak.saturating_sub(base), base, s.body.len())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_10_mb_json_response_costs_a_small_multiple_of_its_size() {
    let (stateless, base, n) = one_call_growth("mem-one-json", false).await;
    let (session, base2, _) = one_call_growth("mem-one-sse", true).await;
    println!(
        "\none {:.1} MB JSON array through toolgate:\n  \
         stateless JSON: peak {:.1} MiB over a {:.1} MiB baseline = {:.1}x the body\n  \
         session SSE:    peak {:.1} MiB over a {:.1} MiB baseline = {:.1}x the body",
        n as f64 / 1e6,
        mib(stateless),
        mib(base),
        stateless as f64 / n as f64,
        mib(session),
        mib(base2),
        session as f64 / n as f64,
    );
    assert!(
        stateless < ONE_CALL_FACTOR * n && session < ONE_CALL_FACTOR * n,
        "one call grew the gateway by {:.1} MiB (stateless) / {:.1} MiB (session) for a {:.1} MiB body",
        mib(stateless),
        mib(session),
        mib(n)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn eight_concurrent_10_mb_responses_stay_within_a_small_multiple_of_their_sum() {
    let s = Arc::new(setup("mem-eight", "", &[]).await);
    let http = reqwest::Client::new();
    let pid = s.served.child.id();
    let base = warm_up(&http, &s).await;
    let calls: Vec<_> = (0..8)
        .map(|_| {
            let (http, s) = (http.clone(), s.clone());
            tokio::spawn(async move {
                let r = raw_call(&http, &s.served.url, "big__items").await;
                assert_complete(&r, s.items);
            })
        })
        .collect();
    for c in calls {
        c.await.expect("call task");
    }
    let grew = status_bytes(pid, "VmHWM:").saturating_sub(base);
    let n = s.body.len();
    println!(
        "\neight concurrent {:.1} MB responses: peak {:.1} MiB over a {:.1} MiB baseline = {:.1}x one body",
        n as f64 / 1e6,
        mib(grew),
        mib(base),
        grew as f64 / n as f64
    );
    // Measured: 122x one body before, 5.5x after.
    assert!(
        grew < 2 * 8 * n,
        "eight calls grew the gateway by {:.1} MiB",
        mib(grew)
    );
}

fn error_text(result: &Value) -> String {
    assert_eq!(
        result["isError"],
        json!(true),
        "{:.300}",
        result.to_string()
    );
    result["content"][0]["text"]
        .as_str()
        .unwrap_or("")
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_response_larger_than_the_whole_memory_budget_is_a_tool_error_naming_it() {
    let s = setup(
        "mem-over",
        "",
        &[("TOOLGATE_MAX_RESPONSE_MEMORY_BYTES", "5000000")],
    )
    .await;
    let http = reqwest::Client::new();
    let t = error_text(&raw_call(&http, &s.served.url, "big__items").await);
    assert!(
        t.contains("response memory budget") && t.contains("--max-response-memory-bytes"),
        "{t}"
    );
    // Small responses still pass.
    assert_complete(&raw_call(&http, &s.served.url, "big__small").await, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_call_that_gets_no_response_memory_within_its_timeout_fails_naming_the_budget() {
    // Room for one body; a response a client does not read keeps its share.
    let s = setup(
        "mem-wait",
        "    timeoutSeconds: 2\n",
        &[("TOOLGATE_MAX_RESPONSE_MEMORY_BYTES", "15000000")],
    )
    .await;
    let http = reqwest::Client::new();
    let stuck = post_call(&http, &s.served.url, "big__items").await;
    let started = std::time::Instant::now();
    let t = error_text(&raw_call(&http, &s.served.url, "big__items").await);
    assert!(
        t.contains(
            "response memory budget (14999552 bytes, --max-response-memory-bytes) stayed in use"
        ),
        "{t}"
    );
    assert!(started.elapsed() >= Duration::from_millis(1500));
    // The unread response gone, its share comes back.
    drop(stuck);
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_complete(&raw_call(&http, &s.served.url, "big__items").await, s.items);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_response_transform_is_charged_for_its_trees_and_refused_beyond_the_budget() {
    let s = setup(
        "mem-jq",
        "",
        &[("TOOLGATE_MAX_RESPONSE_MEMORY_BYTES", "200000000")],
    )
    .await;
    let http = reqwest::Client::new();
    let pid = s.served.child.id();
    let base = warm_up(&http, &s).await;
    // 2 MB of items: ~37 MB of serde_json tree by the estimate, charged
    // twice (jq's copy); within 200 MB.
    let r = raw_call(&http, &s.served.url, "big__mid").await;
    assert_eq!(r["isError"], json!(false), "{:.300}", r.to_string());
    let ids: Value = serde_json::from_str(r["content"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(
        ids.as_array().map(Vec::len),
        Some(item_count(&big_array(MID_BYTES)))
    );
    let grew = status_bytes(pid, "VmHWM:").saturating_sub(base);
    println!(
        "\na jq transform of a {:.1} MB body: peak {:.1} MiB over a {:.1} MiB baseline = {:.1}x the body",
        MID_BYTES as f64 / 1e6,
        mib(grew),
        mib(base),
        grew as f64 / MID_BYTES as f64
    );
    // 10 MB: its trees would not fit; refused before they are built.
    let t = error_text(&raw_call(&http, &s.served.url, "big__ids").await);
    assert!(
        t.contains("the response transform needs")
            && t.contains("response memory budget, which is 199999488 bytes in all (--max-response-memory-bytes)"),
        "{t}"
    );
    let grew = status_bytes(pid, "VmHWM:").saturating_sub(base);
    assert!(
        grew < 100 << 20,
        "the refused transform still grew the gateway by {:.1} MiB",
        mib(grew)
    );
}

/// Hostile requests, measured on the real binary: a 1 GiB body refused for
/// its Host or its size, and a flood of `initialize` past the session cap,
/// leave the gateway's peak memory where it was (the issue measured 2.1 GB
/// for the first and 1.56 GB for 25k sessions). Bounds: the 4 MiB body
/// limit, and the capped sessions at ~60 KiB each, plus slack.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn hostile_bodies_and_session_floods_leave_the_peak_memory_flat() {
    const CAP: usize = 100;
    let s = setup(
        "mem-hostile",
        "",
        &[
            ("TOOLGATE_MAX_SESSIONS", "100"),
            // One client floods here: the whole cap is its quota.
            ("TOOLGATE_MAX_SESSIONS_PER_CALLER", "100"),
        ],
    )
    .await;
    let http = reqwest::Client::new();
    let pid = s.served.child.id();
    let base = warm_up(&http, &s).await;

    let (status, _) = crate::intake::endless_post(&s.served.url, "evil.example", 1 << 30).await;
    assert!(status.contains(" 403 "), "{status}");
    let (status, _) = crate::intake::endless_post(&s.served.url, "localhost", 1 << 30).await;
    assert!(status.contains(" 413 "), "{status}");
    let bodies = status_bytes(pid, "VmHWM:").saturating_sub(base);

    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "flood", "version": "1"}}});
    let mut refused = 0;
    for _ in 0..CAP * 10 {
        let r = http
            .post(format!("{}/mcp", s.served.url))
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(init.to_string())
            .send()
            .await
            .expect("answered");
        refused += usize::from(r.status() == 503);
    }
    assert_eq!(refused, CAP * 9, "every initialize past the cap is refused");
    let sessions = status_bytes(pid, "VmHWM:").saturating_sub(base);
    println!(
        "\nhostile requests: 1 GiB bodies (403, 413) peak +{:.1} MiB; {} initialize calls (cap {CAP}) peak +{:.1} MiB",
        mib(bodies),
        CAP * 10,
        mib(sessions)
    );
    assert!(
        bodies < 16 << 20,
        "1 GiB bodies grew the gateway by {:.1} MiB",
        mib(bodies)
    );
    assert!(
        sessions < (16 << 20) + CAP * (120 << 10),
        "{CAP} sessions grew the gateway by {:.1} MiB",
        mib(sessions)
    );
}
