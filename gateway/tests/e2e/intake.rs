//! What an MCP request passes before rmcp sees it: Host before the body,
//! the body limit, the JSON-RPC error codes, the session cap, DELETE's
//! status, `/status` behind the Host check, and the listen backlog.

use std::time::Duration;

use gateway::mcp::endpoint::SessionSettings;
use gateway::mcp::session::SessionLimit;
use gateway::EdgeOptions;
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tower::ServiceExt;

use crate::support::*;
use crate::upstream::TestUpstream;

const ACCEPT: &str = "application/json, text/event-stream";

fn addr_of(url: &str) -> String {
    url.trim_start_matches("http://").to_string()
}

/// Sends a chunked POST whose body never ends (up to `max` bytes) and
/// returns the response's status line and how much of the body had been
/// written when it arrived.
pub(crate) async fn endless_post(url: &str, host: &str, max: usize) -> (String, usize) {
    let stream = tokio::net::TcpStream::connect(addr_of(url)).await.unwrap();
    let (mut rd, mut wr) = stream.into_split();
    let head = format!(
        "POST /mcp HTTP/1.1\r\nhost: {host}\r\ncontent-type: application/json\r\n\
         accept: {ACCEPT}\r\ntransfer-encoding: chunked\r\n\r\n"
    );
    wr.write_all(head.as_bytes()).await.unwrap();
    let sent = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = sent.clone();
    let writer = tokio::spawn(async move {
        let chunk = vec![b' '; 64 * 1024];
        let frame = [
            format!("{:x}\r\n", chunk.len()).into_bytes(),
            chunk,
            b"\r\n".to_vec(),
        ]
        .concat();
        while counter.load(std::sync::atomic::Ordering::SeqCst) < max {
            if wr.write_all(&frame).await.is_err() {
                return;
            }
            counter.fetch_add(64 * 1024, std::sync::atomic::Ordering::SeqCst);
        }
        // Never send the last chunk: the body does not end.
        std::future::pending::<()>().await;
    });
    let mut buf = vec![0u8; 256];
    let n = tokio::time::timeout(WAIT, rd.read(&mut buf))
        .await
        .expect("no response while the body was still streaming")
        .unwrap();
    let at = sent.load(std::sync::atomic::Ordering::SeqCst);
    writer.abort();
    let text = String::from_utf8_lossy(&buf[..n]).to_string();
    (text.lines().next().unwrap_or_default().to_string(), at)
}

#[tokio::test]
async fn a_foreign_host_is_refused_before_the_body_is_read() {
    let up = TestUpstream::start().await;
    let gw = start_gateway(&default_catalog(), config_for(&up.url, "")).await;
    let (status, sent) = endless_post(&gw.url, "evil.example", usize::MAX).await;
    assert!(status.contains(" 403 "), "{status}");
    assert!(sent < 64 * 1024 * 1024, "403 only after {sent} bytes");
}

#[tokio::test]
async fn an_endless_body_is_cut_off_at_the_limit_with_413() {
    let up = TestUpstream::start().await;
    let gw = start_gateway(&default_catalog(), config_for(&up.url, "")).await;
    // 64 MiB offered, never finished: the gateway must answer before the
    // sender is anywhere near done, having kept at most its 4 MiB.
    let (status, sent) = endless_post(&gw.url, "localhost", 64 * 1024 * 1024).await;
    assert!(status.contains(" 413 "), "{status}");
    assert!(sent < 64 * 1024 * 1024, "413 only after {sent} bytes");
}

#[tokio::test]
async fn a_declared_length_over_the_limit_is_refused_unread() {
    let edge = EdgeOptions {
        max_request_body_bytes: 1024,
        ..EdgeOptions::default()
    };
    let gw = start_gateway_with(
        &default_catalog(),
        config_for("http://127.0.0.1:9", ""),
        edge,
    )
    .await;
    let stream = tokio::net::TcpStream::connect(addr_of(&gw.url))
        .await
        .unwrap();
    let (mut rd, mut wr) = stream.into_split();
    wr.write_all(
        format!(
            "POST /mcp HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\n\
             accept: {ACCEPT}\r\ncontent-length: 1073741824\r\n\r\n{{"
        )
        .as_bytes(),
    )
    .await
    .unwrap();
    let mut buf = vec![0u8; 512];
    let n = tokio::time::timeout(WAIT, rd.read(&mut buf))
        .await
        .expect("no answer to a 1 GiB Content-Length")
        .unwrap();
    let text = String::from_utf8_lossy(&buf[..n]);
    assert!(text.starts_with("HTTP/1.1 413"), "{text}");
    assert!(text.contains("1024 bytes"), "{text}");
    // A body under the limit still works.
    open_session(&gw.url)
        .await
        .expect("a small initialize is served");
}

async fn post(url: &str, session: Option<&str>, body: &Value) -> (u16, String, Option<String>) {
    post_raw(url, session, body.to_string()).await
}

async fn post_raw(url: &str, session: Option<&str>, body: String) -> (u16, String, Option<String>) {
    let mut b = reqwest::Client::new()
        .post(format!("{url}/mcp"))
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

fn initialize() -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"}}})
}

/// Opens a session; `Err((status, body))` when refused.
async fn open_session(url: &str) -> Result<String, (u16, String)> {
    let (status, text, sid) = post(url, None, &initialize()).await;
    match (status, sid) {
        (200, Some(id)) => Ok(id),
        _ => Err((status, text)),
    }
}

async fn delete(url: &str, session: &str) -> u16 {
    reqwest::Client::new()
        .delete(format!("{url}/mcp"))
        .header("mcp-session-id", session)
        .header("mcp-protocol-version", "2025-11-25")
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

async fn capped(max: usize, idle: Duration) -> Gateway {
    let edge = EdgeOptions {
        sessions: SessionSettings {
            limit: SessionLimit::new(max),
            idle_timeout: Some(idle),
        },
        ..EdgeOptions::default()
    };
    start_gateway_with(
        &default_catalog(),
        config_for("http://127.0.0.1:9", ""),
        edge,
    )
    .await
}

fn assert_full(refused: Result<String, (u16, String)>) {
    let (status, body) = refused.expect_err("a session past the cap was opened");
    assert_eq!(status, 503, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    let msg = v["error"]["message"].as_str().unwrap_or_default();
    assert!(msg.contains("too many open sessions"), "{v}");
    assert!(msg.contains("limit 3") || msg.contains("limit 1"), "{v}");
}

#[tokio::test]
async fn sessions_past_the_cap_are_refused_until_one_is_deleted() {
    let gw = capped(3, Duration::from_secs(300)).await;
    let mut ids = Vec::new();
    for _ in 0..3 {
        ids.push(open_session(&gw.url).await.expect("under the cap"));
    }
    assert_full(open_session(&gw.url).await);
    assert_eq!(delete(&gw.url, &ids[0]).await, 200);
    let fourth = open_session(&gw.url).await.expect("a slot was freed");
    // The others still work.
    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"});
    assert_eq!(post(&gw.url, Some(&fourth), &list).await.0, 200);
    assert_eq!(post(&gw.url, Some(&ids[1]), &list).await.0, 200);
}

#[tokio::test]
async fn an_idle_session_expires_and_frees_its_slot() {
    let gw = capped(1, Duration::from_millis(500)).await;
    let first = open_session(&gw.url).await.unwrap();
    let refused = open_session(&gw.url).await;
    let (status, _) = refused.expect_err("cap 1");
    assert_eq!(status, 503);
    let started = std::time::Instant::now();
    let second = loop {
        match open_session(&gw.url).await {
            Ok(id) => break id,
            Err(_) if started.elapsed() < WAIT => {
                tokio::time::sleep(Duration::from_millis(100)).await
            }
            Err((s, b)) => panic!("the idle session never expired: {s} {b}"),
        }
    };
    // The first client comes back: its session would have to be restored
    // here, and the replica is full again.
    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"});
    let (status, body, _) = post(&gw.url, Some(&first), &list).await;
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("too many open sessions"), "{body}");
    assert_eq!(delete(&gw.url, &second).await, 200);
    assert_eq!(post(&gw.url, Some(&first), &list).await.0, 200);
}

#[tokio::test]
async fn an_sdk_client_past_the_cap_gets_an_error_naming_it() {
    use rmcp::ServiceExt;
    let gw = capped(1, Duration::from_secs(300)).await;
    let _held = connect(&format!("{}/mcp", gw.url)).await;
    let transport =
        rmcp::transport::StreamableHttpClientTransport::from_uri(format!("{}/mcp", gw.url));
    let refused = tokio::time::timeout(
        WAIT,
        Recorder::new(rmcp::model::ProtocolVersion::V_2025_11_25).serve(transport),
    )
    .await
    .expect("the refusal is prompt");
    let e = refused.err().expect("a client past the cap connected");
    assert!(format!("{e:?}").contains("too many open sessions"), "{e:?}");
}

#[tokio::test]
async fn delete_of_a_session_answers_200() {
    let gw = capped(3, Duration::from_secs(300)).await;
    let id = open_session(&gw.url).await.unwrap();
    assert_eq!(delete(&gw.url, &id).await, 200);
    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"});
    assert_eq!(post(&gw.url, Some(&id), &list).await.0, 404, "deleted");
}

fn error_code(body: &str) -> i64 {
    let v: Value = serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {body}"));
    v["error"]["code"].as_i64().unwrap_or_else(|| panic!("{v}"))
}

const META: &str = r#"{"io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {}}"#;

#[tokio::test]
async fn malformed_json_and_batches_get_json_rpc_errors_not_415() {
    let gw = capped(3, Duration::from_secs(300)).await;
    let sid = open_session(&gw.url).await.unwrap();
    for session in [None, Some(sid.as_str())] {
        let (s, b, _) = post_raw(&gw.url, session, r#"{"jsonrpc": "2.0", "id": 1,"#.into()).await;
        assert_eq!((s, error_code(&b)), (400, -32700), "{b}");
        let batch = json!([{"jsonrpc": "2.0", "id": 1, "method": "ping"}]);
        let (s, b, _) = post(&gw.url, session, &batch).await;
        assert_eq!((s, error_code(&b)), (400, -32600), "{b}");
        let (s, b, _) = post(&gw.url, session, &json!({"jsonrpc": "2.0", "id": 7})).await;
        assert_eq!((s, error_code(&b)), (400, -32600), "{b}");
    }
}

#[tokio::test]
async fn tools_call_with_bad_params_is_invalid_params_on_both_paths() {
    let up = TestUpstream::start().await;
    let gw = start_gateway(&default_catalog(), config_for(&up.url, "")).await;
    let sid = open_session(&gw.url).await.unwrap();
    // Session path (2025-11-25).
    for params in [
        None,
        Some(json!({"name": 5})),
        Some(json!({"name": "pets__get_pet", "arguments": "id=7"})),
    ] {
        let mut body = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call"});
        if let Some(p) = params {
            body["params"] = p;
        }
        let (s, b, _) = post(&gw.url, Some(&sid), &body).await;
        assert_eq!((s, error_code(&b)), (200, -32602), "{body}: {b}");
        assert!(b.contains("\"id\":3"), "{b}");
        assert!(b.contains("tools/call"), "{b}");
    }
    // Stateless path (2026-07-28), answered by the gateway itself.
    let meta: Value = serde_json::from_str(META).unwrap();
    for params in [
        json!({"_meta": meta}),
        json!({"name": ["x"], "_meta": meta}),
    ] {
        let body = json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": params});
        let r = reqwest::Client::new()
            .post(format!("{}/mcp", gw.url))
            .header("accept", ACCEPT)
            .header("mcp-protocol-version", "2026-07-28")
            .json(&body)
            .send()
            .await
            .unwrap();
        let s = r.status().as_u16();
        let b = r.text().await.unwrap();
        assert_eq!((s, error_code(&b)), (200, -32602), "{body}: {b}");
    }
    assert_eq!(up.count(), 0);
    // An unknown method is still -32601.
    let (_, b, _) = post(
        &gw.url,
        Some(&sid),
        &json!({"jsonrpc": "2.0", "id": 5, "method": "no/such"}),
    )
    .await;
    assert!(b.contains("-32601"), "{b}");
}

fn app_with_hosts(hosts: &[&str]) -> axum::Router {
    gateway::net::install_crypto_provider();
    let store = gateway::CatalogStore::new(Default::default(), Default::default());
    let mut catalog = default_catalog();
    catalog
        .upstreams
        .iter_mut()
        .for_each(|u| u.default_base_url = Some("http://127.0.0.1:9".into()));
    store.install(&catalog).unwrap();
    let edge = EdgeOptions {
        allowed_hosts: hosts.iter().map(|h| h.to_string()).collect(),
        ..Default::default()
    };
    gateway::app(gateway::AppState::new(store, &edge))
}

async fn get(app: &axum::Router, path: &str, host: &str) -> (u16, Value) {
    let req = axum::http::Request::get(path)
        .header("host", host)
        .body(axum::body::Body::empty())
        .unwrap();
    let resp = app.clone().oneshot(req).await.unwrap();
    let status = resp.status().as_u16();
    let body = axum::body::to_bytes(resp.into_body(), 1 << 20)
        .await
        .unwrap();
    (status, serde_json::from_slice(&body).unwrap_or(Value::Null))
}

#[tokio::test]
async fn status_is_refused_to_a_foreign_host_and_readyz_tells_it_only_the_verdict() {
    let app = app_with_hosts(&["mcp.example.com"]);
    let (s, v) = get(&app, "/status", "mcp.example.com").await;
    assert_eq!(s, 200);
    assert!(v.to_string().contains("pets"), "{v}");
    let (s, v) = get(&app, "/status", "evil.example").await;
    assert_eq!(s, 403, "{v}");
    // Probes name the pod IP: /readyz answers, without what is served.
    let (s, v) = get(&app, "/readyz", "10.1.2.3:8080").await;
    assert_eq!((s, v), (200, json!({"ready": true})));
    let (s, v) = get(&app, "/readyz", "mcp.example.com").await;
    assert_eq!(s, 200);
    assert!(v["catalog"].is_string(), "{v}");
    // A scoped endpoint does not tell a foreign host which prefixes exist.
    let (s, _) = get(&app, "/mcp/nope", "evil.example").await;
    assert_eq!(s, 403);
}

/// `TcpListener::bind` listens with a backlog of 128: the 130th connection
/// of a burst waits on SYN retransmits (a second or more). `ops::bind`
/// asks for 4096.
#[tokio::test]
async fn a_burst_of_connections_fits_the_listen_backlog() {
    let somaxconn: usize = std::fs::read_to_string("/proc/sys/net/core/somaxconn")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(4096);
    const BURST: usize = 600;
    if somaxconn < BURST {
        eprintln!(
            "net.core.somaxconn is {somaxconn}: the kernel caps the backlog below {BURST}; skipped"
        );
        return;
    }
    let listener = gateway::edge::shutdown::bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let addr = listener.local_addr().unwrap();
    // Nothing accepts: every connection must fit in the queue.
    let connects = (0..BURST).map(|_| async move {
        tokio::time::timeout(
            Duration::from_millis(900),
            tokio::net::TcpStream::connect(addr),
        )
        .await
        .ok()
        .and_then(Result::ok)
    });
    let streams = futures::future::join_all(connects).await;
    let ok = streams.iter().filter(|s| s.is_some()).count();
    assert_eq!(ok, BURST, "only {ok} of {BURST} connections were queued");
    drop(listener);
}
