//! `rateLimit` and `forwardIdentity`: over a real socket (the client IP is
//! the caller key without inbound authentication), and per verified caller
//! through the call pipeline's public API (`gateway::call::pipeline::call` with a
//! `CallContext` holding a `Caller`), since inbound authentication is what
//! makes callers and is tested on its own.

use std::net::{IpAddr, Ipv4Addr};

use gateway::identity::inbound::{AuthMethod, BearerToken, CallContext};
use gateway::serving::snapshot::{Overrides, RuntimeCache, Snapshot};
use serde_json::{json, Value};

use crate::support::*;
use crate::upstream::TestUpstream;

/// Three calls, then nothing for 1000 s: no refill while a test runs.
const THREE_THEN_WAIT: &str = "    rateLimit: {requestsPerSecond: 0.001, burst: 3}";

/// The number in "retry in N s".
fn retry_after(r: &rmcp::model::CallToolResult) -> u64 {
    let t = text(r);
    let n = t
        .split("retry in ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse().ok());
    n.unwrap_or_else(|| panic!("no retry hint in {t:?}"))
}

/// An MCP client whose connections come from `source` (any 127.x address
/// is loopback): another client IP, so another caller key.
async fn connect_from(url: &str, source: Ipv4Addr) -> Client {
    gateway::net::install_crypto_provider();
    let http = reqwest::Client::builder()
        .local_address(IpAddr::V4(source))
        .build()
        .unwrap();
    connect_over(url, http).await
}

#[tokio::test]
async fn the_call_over_the_rate_limit_is_refused_without_an_upstream_request() {
    let up = TestUpstream::start().await;
    let gw = start_gateway(&default_catalog(), config_for(&up.url, THREE_THEN_WAIT)).await;
    let url = format!("{}/mcp", gw.url);
    let client = connect(&url).await;
    for _ in 0..3 {
        let r = call(&client, "pets__get_pet", json!({"id": "7"})).await;
        assert!(!is_error(&r), "{}", text(&r));
    }
    let r = call(&client, "pets__get_pet", json!({"id": "7"})).await;
    assert!(is_error(&r), "the fourth call went through: {}", text(&r));
    assert!(text(&r).contains("rate limit"), "{}", text(&r));
    let wait = retry_after(&r);
    assert!((990..=1000).contains(&wait), "retry in {wait} s");
    assert_eq!(up.count(), 3, "the refused call reached the upstream");

    // Per upstream: `other` has no limit.
    let r = call(&client, "other__ping", json!({})).await;
    assert!(!is_error(&r), "{}", text(&r));
    // Per caller: another client address has a bucket of its own.
    let elsewhere = connect_from(&url, Ipv4Addr::new(127, 0, 0, 2)).await;
    let r = call(&elsewhere, "pets__get_pet", json!({"id": "7"})).await;
    assert!(!is_error(&r), "{}", text(&r));
    assert_eq!(
        up.requests().iter().filter(|r| r.path == "/pets/7").count(),
        4
    );
}

/// An ingress limiting by `Mcp-Method` / `Mcp-Name` needs the gateway to
/// accept them as sent: rmcp checks them against the body on stateless
/// (2026-07-28) requests, so a call that goes through proves they arrived
/// intact, and a mismatching one is refused.
#[tokio::test]
async fn mcp_method_and_name_headers_pass_through() {
    let up = TestUpstream::start().await;
    let gw = start_gateway(&default_catalog(), config_for(&up.url, THREE_THEN_WAIT)).await;
    let post = |name_header: &'static str| {
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
        reqwest::Client::new()
            .post(format!("{}/mcp", gw.url))
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2026-07-28")
            .header("mcp-method", "tools/call")
            .header("mcp-name", name_header)
            .json(&body)
            .send()
    };
    let r = post("pets__get_pet").await.unwrap();
    let status = r.status();
    let v: Value = r.json().await.unwrap();
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["result"]["structuredContent"]["name"], "rex", "{v}");
    let r = post("pets__list_pets").await.unwrap();
    assert_eq!(r.status(), 400, "{}", r.text().await.unwrap());
    assert_eq!(up.count(), 1);
    // The rmcp client sends them itself at 2026-07-28.
    let client = connect_stateless(&format!("{}/mcp", gw.url)).await;
    let r = call(&client, "pets__get_pet", json!({"id": "7"})).await;
    assert!(!is_error(&r), "{}", text(&r));
}

fn caller(subject: &str) -> CallContext {
    verified_caller(
        subject,
        AuthMethod::Jwt,
        Some(BearerToken::new(&format!("inbound-{subject}"))),
    )
}

/// The snapshot the gateway would serve for `config`.
fn snapshot(config: &gateway::config::GatewayConfig) -> Snapshot {
    gateway::net::install_crypto_provider();
    Snapshot::build(
        &default_catalog(),
        config,
        &Overrides::default(),
        &mut RuntimeCache::default(),
    )
    .expect("snapshot builds")
}

async fn call_as(
    snap: &Snapshot,
    ctx: &CallContext,
    tool: &str,
    args: Value,
) -> rmcp::model::CallToolResult {
    let t = snap.tool(tool).expect("tool exists").clone();
    gateway::call::pipeline::call(&t, Some(crate::support::args(args)), ctx).await
}

#[tokio::test]
async fn verified_callers_are_limited_by_subject_not_address() {
    let up = TestUpstream::start().await;
    let snap = snapshot(&config_for(&up.url, THREE_THEN_WAIT));
    let (alice, bob) = (caller("alice"), caller("bob"));
    for _ in 0..3 {
        let r = call_as(&snap, &alice, "pets__get_pet", json!({"id": "7"})).await;
        assert!(!is_error(&r), "{}", text(&r));
    }
    let r = call_as(&snap, &alice, "pets__get_pet", json!({"id": "7"})).await;
    assert!(is_error(&r) && retry_after(&r) >= 990, "{}", text(&r));
    // Same address, another subject.
    let r = call_as(&snap, &bob, "pets__get_pet", json!({"id": "7"})).await;
    assert!(!is_error(&r), "{}", text(&r));
    assert_eq!(up.count(), 4);
}

#[tokio::test]
async fn forward_identity_carries_the_subject_and_nothing_a_client_sent() {
    let up = TestUpstream::start().await;
    // `X-Trace` is also a header parameter of pets__list_pets and a
    // configured header: neither may stand in for the subject.
    let snap = snapshot(&config_for(
        &up.url,
        "    forwardIdentity: {header: X-Trace}\n    headers: {X-Trace: from-config}",
    ));
    let args = json!({"limit": 1, "X-Trace": "forged"});
    let r = call_as(&snap, &caller("alice"), "pets__list_pets", args.clone()).await;
    assert!(!is_error(&r), "{}", text(&r));
    let seen: Vec<_> = up
        .last()
        .headers
        .get_all("x-trace")
        .iter()
        .cloned()
        .collect();
    assert_eq!(seen, ["alice"]);

    // No verified caller (open mode): the header is not sent at all.
    let r = call_as(&snap, &CallContext::default(), "pets__list_pets", args).await;
    assert!(!is_error(&r), "{}", text(&r));
    assert_eq!(up.last().header("x-trace"), None);
}

#[tokio::test]
async fn forward_identity_over_the_wire_in_open_mode_drops_forged_values() {
    let up = TestUpstream::start().await;
    let gw = start_gateway(
        &default_catalog(),
        config_for(&up.url, "    forwardIdentity: {header: X-Trace}"),
    )
    .await;
    let client = connect(&format!("{}/mcp", gw.url)).await;
    let r = call(
        &client,
        "pets__list_pets",
        json!({"limit": 1, "X-Trace": "admin"}),
    )
    .await;
    assert!(!is_error(&r), "{}", text(&r));
    assert_eq!(up.last().header("x-trace"), None);
}

#[test]
fn bad_settings_name_their_field() {
    for (extra, field) in [
        ("    rateLimit: {requestsPerSecond: 0}", "rateLimit.requestsPerSecond"),
        ("    rateLimit: {requestsPerSecond: -2}", "rateLimit.requestsPerSecond"),
        ("    rateLimit: {requestsPerSecond: 1, burst: 0}", "rateLimit.burst"),
        ("    forwardIdentity: {header: Authorization}", "forwardIdentity.header"),
        ("    forwardIdentity: {header: 'X User'}", "forwardIdentity.header"),
        (
            "    forwardIdentity: {header: X-Key}\n    auth: {type: apiKey, in: header, name: x-key, value: {value: k}}",
            "forwardIdentity.header",
        ),
    ] {
        gateway::net::install_crypto_provider();
        let e = Snapshot::build(
            &default_catalog(),
            &config_for("http://127.0.0.1:9", extra),
            &Overrides::default(),
            &mut RuntimeCache::default(),
        )
        .err()
        .unwrap_or_else(|| panic!("{extra} was accepted"));
        assert_eq!(e.upstream, "pets", "{e}");
        assert!(e.field.ends_with(field), "{extra}: {e}");
    }
}
