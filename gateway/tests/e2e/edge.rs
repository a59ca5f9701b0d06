use serde_json::json;
use tower::ServiceExt;

use crate::support::*;
use crate::upstream::TestUpstream;

#[tokio::test]
async fn prefix_endpoint_serves_only_its_upstream() {
    let up = TestUpstream::start().await;
    let gw = start_gateway(&default_catalog(), config_for(&up.url, "")).await;
    let other = connect(&format!("{}/mcp/other", gw.url)).await;
    let tools = other.list_all_tools().await.unwrap();
    assert_eq!(
        tools.iter().map(|t| t.name.to_string()).collect::<Vec<_>>(),
        vec!["other__ping"]
    );
    let e = try_call(&other, "pets__get_pet", json!({"id": "7"}))
        .await
        .unwrap_err();
    assert!(e.to_string().contains("unknown tool"), "{e}");
    assert_eq!(up.count(), 0);
    let r = call(&other, "other__ping", json!({})).await;
    assert!(!is_error(&r));
    assert_eq!(up.last().path, "/other-base/ping");
}

/// With Nagle's algorithm on, a response written in two parts (rmcp's SSE
/// headers, then the message) waited for the client's delayed ACK: about
/// 40 ms per call on a kept-alive connection. Twenty calls then took over
/// 800 ms; without the stall they take a few milliseconds each, even in a
/// debug build on a busy machine.
#[tokio::test]
async fn calls_on_a_kept_alive_connection_do_not_stall() {
    let up = TestUpstream::start().await;
    let gw = start_gateway(&default_catalog(), config_for(&up.url, "")).await;
    let client = connect_pooled(&format!("{}/mcp", gw.url)).await;
    let r = call(&client, "pets__get_pet", json!({"id": "1"})).await;
    assert!(!is_error(&r), "{}", text(&r));
    let started = std::time::Instant::now();
    for i in 0..20 {
        let r = call(&client, "pets__get_pet", json!({"id": i.to_string()})).await;
        assert!(!is_error(&r), "{}", text(&r));
    }
    let elapsed = started.elapsed();
    assert!(
        elapsed < std::time::Duration::from_millis(600),
        "20 calls on one connection took {elapsed:?}"
    );
}

/// A stateless (2026-07-28) call is answered with plain JSON, not a
/// one-event SSE stream.
#[tokio::test]
async fn stateless_calls_are_answered_with_json() {
    let up = TestUpstream::start().await;
    let gw = start_gateway(&default_catalog(), config_for(&up.url, "")).await;
    let body = json!({
        "jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {
            "name": "pets__get_pet", "arguments": {"id": "7"},
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
                "io.modelcontextprotocol/clientCapabilities": {}
            }
        }
    });
    let r = reqwest::Client::new()
        .post(format!("{}/mcp", gw.url))
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/call")
        .header("mcp-name", "pets__get_pet")
        .json(&body)
        .send()
        .await
        .unwrap();
    let status = r.status();
    let ct = r.headers()["content-type"].to_str().unwrap().to_string();
    let text = r.text().await.unwrap();
    assert_eq!(status, 200, "{text}");
    assert!(ct.starts_with("application/json"), "{ct}: {text}");
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["id"], 1, "{v}");
    assert_eq!(v["result"]["structuredContent"]["name"], "rex", "{v}");
    assert_eq!(up.last().path, "/pets/7");
}

#[tokio::test]
async fn unknown_prefix_is_404() {
    let up = TestUpstream::start().await;
    let gw = start_gateway(&default_catalog(), config_for(&up.url, "")).await;
    let r = reqwest::get(format!("{}/mcp/nope", gw.url)).await.unwrap();
    assert_eq!(r.status(), 404);
}

fn state() -> gateway::AppState {
    gateway::net::install_crypto_provider();
    let store = gateway::CatalogStore::new(Default::default(), Default::default());
    gateway::AppState::new(store, &gateway::EdgeOptions::default())
}

#[tokio::test]
async fn readyz_is_503_until_a_catalog_loads() {
    let st = state();
    let store = st.shared.store.clone();
    let app = gateway::app(st);
    let req = || {
        axum::http::Request::get("/readyz")
            .body(axum::body::Body::empty())
            .unwrap()
    };
    assert_eq!(app.clone().oneshot(req()).await.unwrap().status(), 503);
    let healthz = axum::http::Request::get("/healthz")
        .body(axum::body::Body::empty())
        .unwrap();
    assert_eq!(app.clone().oneshot(healthz).await.unwrap().status(), 200);
    let mut catalog = default_catalog();
    catalog
        .upstreams
        .iter_mut()
        .for_each(|u| u.default_base_url = Some("http://127.0.0.1:9".into()));
    store.install(&catalog).unwrap();
    assert_eq!(app.oneshot(req()).await.unwrap().status(), 200);
}

#[tokio::test]
async fn foreign_host_header_is_refused() {
    let app = gateway::app(state());
    let req = axum::http::Request::post("/mcp")
        .header("host", "evil.example")
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(axum::body::Body::from(
            json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}).to_string(),
        ))
        .unwrap();
    let resp = app.oneshot(req).await.unwrap();
    assert_eq!(resp.status(), 403);
}

fn ping(host: &str, origin: Option<&str>) -> axum::http::Request<axum::body::Body> {
    let mut b = axum::http::Request::post("/mcp")
        .header("host", host)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream");
    if let Some(o) = origin {
        b = b.header("origin", o);
    }
    b.body(axum::body::Body::from(
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"}}})
        .to_string(),
    ))
    .unwrap()
}

#[tokio::test]
async fn foreign_origin_is_refused_and_allowed_hosts_are_configurable() {
    gateway::net::install_crypto_provider();
    let store = gateway::CatalogStore::new(Default::default(), Default::default());
    let edge = gateway::EdgeOptions {
        allowed_hosts: vec!["mcp.example.com".into()],
        ..Default::default()
    };
    let app = gateway::app(gateway::AppState::new(store, &edge));
    let status = |r: axum::http::Request<axum::body::Body>| {
        let app = app.clone();
        async move { app.oneshot(r).await.unwrap().status() }
    };
    assert_eq!(status(ping("mcp.example.com", None)).await, 200);
    assert_eq!(
        status(ping("mcp.example.com", Some("https://mcp.example.com"))).await,
        200
    );
    assert_eq!(
        status(ping("mcp.example.com", Some("http://evil.example"))).await,
        403
    );
    assert_eq!(status(ping("localhost", None)).await, 403);
}
