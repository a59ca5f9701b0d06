//! What a client learns, or makes the gateway write, beyond its answers
//! (issue 26, item 9): client strings bounded in logs and exported spans,
//! no session id in logs, an upstream hidden by access rules answering
//! exactly like an unknown prefix, `/status` only for callers that see
//! everything (and on the metrics listener), and the metrics listener on
//! the serving host by default.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use catalog::access::DefaultAccess;
use gateway::EdgeOptions;
use serde_json::{json, Value};
use toolgate_tests::otlp::{Attr, ReceivedSpan, Receiver};

use crate::reload::{serve_with_env, tempdir, Served};
use crate::support::*;
use crate::upstream::TestUpstream;

const ACCEPT: &str = "application/json, text/event-stream";

/// `toolgate serve` of the default catalog exporting spans to `receiver`;
/// `other` points at `other_base`.
fn serve_traced(name: &str, receiver: &Receiver, up: &TestUpstream, other_base: &str) -> Served {
    let dir = tempdir(name);
    let catalog = dir.join("catalog.json");
    std::fs::write(&catalog, serde_json::to_vec(&default_catalog()).unwrap()).unwrap();
    let config = dir.join("gateway.yaml");
    std::fs::write(
        &config,
        format!(
            "upstreams:\n  pets: {{baseUrl: '{}'}}\n  other: {{baseUrl: '{other_base}'}}\n",
            up.url
        ),
    )
    .unwrap();
    let endpoint = receiver.endpoint();
    serve_with_env(
        &[
            "--catalog",
            catalog.to_str().unwrap(),
            "--config",
            config.to_str().unwrap(),
        ],
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()),
            ("OTEL_BSP_SCHEDULE_DELAY", "50"),
        ],
    )
}

/// One JSON-RPC POST to `{url}{path}`: status, body text, session id.
async fn post(
    url: &str,
    path: &str,
    session: Option<&str>,
    body: String,
) -> (u16, String, Option<String>) {
    gateway::net::install_crypto_provider();
    let mut b = reqwest::Client::new()
        .post(format!("{url}{path}"))
        .header("content-type", "application/json")
        .header("accept", ACCEPT)
        .body(body);
    if let Some(s) = session {
        b = b
            .header("mcp-session-id", s)
            .header("mcp-protocol-version", "2025-11-25");
    }
    let r = tokio::time::timeout(WAIT, b.send()).await.unwrap().unwrap();
    let status = r.status().as_u16();
    let sid = r
        .headers()
        .get("mcp-session-id")
        .map(|v| v.to_str().unwrap().to_string());
    let text = tokio::time::timeout(WAIT, r.text()).await.unwrap().unwrap();
    (status, text, sid)
}

fn initialize() -> String {
    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "leaks", "version": "1"}}})
    .to_string()
}

/// A session on `{url}/mcp`, initialized.
async fn session(url: &str) -> String {
    let (status, text, sid) = post(url, "/mcp", None, initialize()).await;
    assert_eq!(status, 200, "{text}");
    let sid = sid.expect("a session id");
    let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string();
    let (status, text, _) = post(url, "/mcp", Some(&sid), note).await;
    assert!(status == 202 || status == 200, "{status} {text}");
    sid
}

fn tool_call(id: Value, name: &str, arguments: Value) -> String {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
           "params": {"name": name, "arguments": arguments}})
    .to_string()
}

/// Bytes of a span's name, attribute keys and text values: what its
/// export grows with.
fn span_bytes(s: &ReceivedSpan) -> usize {
    s.name.len()
        + s.attributes
            .iter()
            .map(|(k, v)| {
                k.len()
                    + match v {
                        Attr::Str(s) => s.len(),
                        _ => 8,
                    }
            })
            .sum::<usize>()
}

/// The attack: a 1 MiB unknown tool name (1 MB WARN line, a span
/// named after it) and a 3 MiB JSON-RPC id (3 MB of span export), then a
/// call that logs inside its span, which carried the session id.
#[tokio::test]
async fn client_strings_are_bounded_in_logs_and_spans_and_no_session_id_is_logged() {
    let receiver = Receiver::start().await;
    let up = TestUpstream::start().await;
    // Nothing listens here: `other__ping` logs a warning inside its span.
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", l.local_addr().unwrap())
    };
    let served = serve_traced("leaks-bounded", &receiver, &up, &closed);
    let url = served.url.clone();
    let sid = session(&url).await;

    let long_name = "n".repeat(1 << 20);
    let (status, text, _) = post(
        &url,
        "/mcp",
        Some(&sid),
        tool_call(json!(2), &long_name, json!({})),
    )
    .await;
    assert_eq!(status, 200, "{}", &text[..text.len().min(300)]);
    assert!(
        text.contains("unknown tool"),
        "{}",
        &text[..text.len().min(300)]
    );
    // The answer does not echo the mebibyte either.
    assert!(text.len() < 4096, "an answer of {} bytes", text.len());

    let long_id = "i".repeat(3 << 20);
    let (status, text, _) = post(
        &url,
        "/mcp",
        Some(&sid),
        tool_call(json!(long_id), "pets__get_pet", json!({"id": "7"})),
    )
    .await;
    assert_eq!(status, 200, "{}", &text[..text.len().min(300)]);

    let from = served.log_count();
    let (status, _, _) = post(
        &url,
        "/mcp",
        Some(&sid),
        tool_call(json!(4), "other__ping", json!({})),
    )
    .await;
    assert_eq!(status, 200);
    let warning = served.wait_log(from, &["upstream call failed"]).await;

    // Spans: the unknown tool's has the constant name, both carry at most
    // a bounded prefix of what the client sent.
    let unknown = receiver
        .wait_for("the unknown tool's span", |s| {
            s.str("gen_ai.tool.name")
                .is_some_and(|n| n.starts_with("nnnn"))
        })
        .await;
    assert_eq!(unknown.name, "tools/call");
    let tool = unknown.str("gen_ai.tool.name").unwrap_or_default();
    assert!(tool.len() < 200, "gen_ai.tool.name of {} bytes", tool.len());
    let long = receiver
        .wait_for("the long id's span", |s| {
            s.str("jsonrpc.request.id")
                .is_some_and(|n| n.starts_with("iiii"))
        })
        .await;
    assert_eq!(long.name, "tools/call pets__get_pet");
    let failed = receiver
        .wait_for("the failed call's span", |s| {
            s.name == "tools/call other__ping"
        })
        .await;
    let exported: usize = receiver.spans().iter().map(span_bytes).sum();
    let largest = receiver.spans().iter().map(span_bytes).max().unwrap_or(0);
    eprintln!(
        "spans: {} exported, {exported} bytes of names and attributes, largest {largest}",
        receiver.spans().len()
    );
    assert!(largest < 4096, "a span of {largest} bytes");

    // Logs: no line anywhere near the request's size.
    let logs = served.logs.lock().unwrap().clone();
    let longest = logs.iter().map(String::len).max().unwrap_or(0);
    eprintln!("logs: {} lines, longest {longest} bytes", logs.len());
    assert!(longest < 16 * 1024, "a log line of {longest} bytes");

    // The session id: in no log line; spans carry a digest of it, the
    // same for every request of the session.
    assert!(
        logs.iter().all(|l| !l.contains(&sid)),
        "the session id {sid} is logged"
    );
    let digest = failed.str("mcp.session.id").unwrap_or_default().to_string();
    assert_eq!(digest.len(), 16, "{failed:?}");
    assert!(digest.chars().all(|c| c.is_ascii_hexdigit()), "{digest}");
    assert_ne!(digest, sid);
    assert_eq!(unknown.str("mcp.session.id"), Some(digest.as_str()));
    assert!(warning.contains(&digest), "{warning}");
}

/// `pets` grants `get_pet` to anyone; `other` has no policy and default
/// access is deny: hidden from the anonymous caller.
async fn hiding_gateway(up: &TestUpstream) -> Gateway {
    let edge = EdgeOptions {
        default_access: DefaultAccess::Deny,
        ..EdgeOptions::default()
    };
    start_gateway_with(
        &default_catalog(),
        config_for(
            &up.url,
            "    access:\n      rules: [{tools: [\"get_pet\"]}]",
        ),
        edge,
    )
    .await
}

#[tokio::test]
async fn an_upstream_hidden_by_access_rules_answers_like_an_unknown_prefix() {
    let up = TestUpstream::start().await;
    let gw = hiding_gateway(&up).await;
    let (hidden, hidden_body, hidden_sid) = post(&gw.url, "/mcp/other", None, initialize()).await;
    let (unknown, unknown_body, unknown_sid) =
        post(&gw.url, "/mcp/nosuch", None, initialize()).await;
    assert_eq!(
        (hidden, unknown),
        (404, 404),
        "{hidden_body} / {unknown_body}"
    );
    assert_eq!(
        hidden_body.replace("other", "PREFIX"),
        unknown_body.replace("nosuch", "PREFIX")
    );
    assert_eq!((hidden_sid, unknown_sid), (None, None));
    // Other methods too.
    let get = |path: &str| {
        let url = format!("{}{path}", gw.url);
        async move {
            let r = reqwest::Client::new()
                .get(url)
                .header("accept", ACCEPT)
                .send()
                .await
                .unwrap();
            (r.status().as_u16(), r.text().await.unwrap())
        }
    };
    let (h, hb) = get("/mcp/other").await;
    let (u, ub) = get("/mcp/nosuch").await;
    assert_eq!(
        (h, hb.replace("other", "PREFIX")),
        (u, ub.replace("nosuch", "PREFIX"))
    );
    // The upstream it may use is served as before.
    let (granted, body, _) = post(&gw.url, "/mcp/pets", None, initialize()).await;
    assert_eq!(granted, 200, "{body}");
}

async fn get_status(url: &str) -> (u16, String) {
    gateway::net::install_crypto_provider();
    let r = reqwest::get(format!("{url}/status")).await.unwrap();
    (r.status().as_u16(), r.text().await.unwrap())
}

#[tokio::test]
async fn status_on_the_mcp_port_is_only_for_callers_that_see_every_tool() {
    let up = TestUpstream::start().await;
    let gw = hiding_gateway(&up).await;
    let (status, body) = get_status(&gw.url).await;
    let nowhere = reqwest::get(format!("{}/nowhere", gw.url)).await.unwrap();
    assert_eq!(status, 404, "{body}");
    assert_eq!(
        (status, body.as_str()),
        (
            nowhere.status().as_u16(),
            nowhere.text().await.unwrap().as_str()
        )
    );
    assert!(!body.contains("other"), "{body}");

    // Nothing hidden: the whole status, as before.
    let open = start_gateway(&default_catalog(), config_for(&up.url, "")).await;
    let (status, body) = get_status(&open.url).await;
    assert_eq!(status, 200, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["upstreams"].as_array().map(Vec::len), Some(2), "{v}");
}

/// Lines `toolgate serve` logs until it serves, with `env` added to a
/// clean environment (no `TOOLGATE_METRICS_ADDR`).
fn serve_logs_until_serving(args: &[&str], env: &[(&str, &str)]) -> (Served, Vec<String>) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_toolgate"))
        .arg("serve")
        .args(["--listen", "127.0.0.1:0"])
        .args(args)
        .env_remove("TOOLGATE_METRICS_ADDR")
        .env_remove("TOOLGATE_LOG_FORMAT")
        .env_remove("POD_NAMESPACE")
        .env("RUST_LOG", "info")
        .envs(env.iter().copied())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("toolgate starts");
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let logs = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let kept = logs.clone();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            kept.lock().unwrap().push(line.clone());
            if line.contains("toolgate serving MCP at") {
                let _ = tx.send(());
            }
        }
    });
    rx.recv_timeout(WAIT).expect("toolgate serves");
    let lines = logs.lock().unwrap().clone();
    let url = lines
        .iter()
        .find_map(|l| l.split("at http://").nth(1))
        .and_then(|rest| rest.split_whitespace().next())
        .map(|u| format!("http://{}", u.trim_end_matches("/mcp")))
        .unwrap_or_default();
    (Served { child, url, logs }, lines)
}

#[tokio::test]
async fn metrics_listen_on_the_serving_host_and_serve_the_status() {
    let dir = tempdir("leaks-metrics");
    let catalog = dir.join("catalog.json");
    std::fs::write(&catalog, serde_json::to_vec(&default_catalog()).unwrap()).unwrap();
    let catalog = catalog.to_str().unwrap();
    let config = dir.join("gateway.yaml");
    std::fs::write(
        &config,
        "upstreams:\n  pets: {baseUrl: 'http://127.0.0.1:9'}\n  other: {baseUrl: 'http://127.0.0.1:9'}\n",
    )
    .unwrap();
    let config = config.to_str().unwrap();

    // No --metrics-addr: port 9090 of the --listen host, never every
    // interface. The port may be taken by another local gateway: then a
    // warning, not an error.
    let (served, lines) =
        serve_logs_until_serving(&["--catalog", catalog, "--config", config], &[]);
    let metrics: Vec<&String> = lines.iter().filter(|l| l.contains(":9090")).collect();
    assert!(
        metrics.iter().any(|l| l.contains("127.0.0.1:9090")),
        "{lines:#?}"
    );
    assert!(
        lines.iter().all(|l| !l.contains("0.0.0.0:9090")),
        "{lines:#?}"
    );
    assert!(metrics.iter().all(|l| !l.contains("ERROR")), "{metrics:#?}");
    drop(served);

    // The metrics listener serves `/status` too, to whoever reaches it.
    let (served, lines) = serve_logs_until_serving(
        &["--catalog", catalog, "--config", config],
        &[("TOOLGATE_METRICS_ADDR", "127.0.0.1:0")],
    );
    let metrics_url = lines
        .iter()
        .find_map(|l| l.split("metrics served on ").nth(1))
        .and_then(|rest| rest.split_whitespace().next())
        .map(|u| u.trim_end_matches("/metrics").to_string())
        .unwrap_or_else(|| panic!("no metrics line in {lines:#?}"));
    let (status, body) = tokio::time::timeout(Duration::from_secs(10), get_status(&metrics_url))
        .await
        .expect("/status on the metrics listener answers");
    assert_eq!(status, 200, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["upstreams"].as_array().map(Vec::len), Some(2), "{v}");
    assert!(!served.url.is_empty());
}
