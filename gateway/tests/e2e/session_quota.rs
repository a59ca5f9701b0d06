//! Sessions per caller: one caller flooding `initialize` loses its own
//! oldest sessions, not everyone else's room (issue 26, defect 6), and a
//! session opened by one identity is unknown to every other (defect 2).

use std::time::Duration;

use gateway::mcp::endpoint::SessionSettings;
use gateway::mcp::session::{SessionKey, SessionLimit};
use gateway::EdgeOptions;
use serde_json::{json, Value};

use crate::support::*;

const ACCEPT: &str = "application/json, text/event-stream";
const ALICE: &str = "alice-api-key-0123456789abcdef";
const BOB: &str = "bob-api-key-0123456789abcdefgh";

/// A gateway admitting the API keys of `alice` and `bob`, holding `max`
/// sessions and `per_caller` per caller, signing ids with `key`.
async fn gateway(max: usize, per_caller: usize, key: SessionKey) -> (Gateway, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let keys = dir.path().join("keys.yaml");
    std::fs::write(&keys, format!("alice: {ALICE}\nbob: {BOB}\n")).unwrap();
    let file = gateway::config::parse_file(&format!(
        "inbound:\n  resource: https://mcp.example.com/mcp\n  defaultAccess: allow\n  apiKeys: {{file: {}}}\n",
        keys.display()
    ))
    .unwrap();
    let inbound =
        gateway::identity::inbound::Inbound::from_config(&file.inbound, Default::default())
            .await
            .unwrap();
    let edge = EdgeOptions {
        inbound,
        default_access: file.inbound.default_access,
        session_key: key,
        sessions: SessionSettings {
            limit: SessionLimit::new(max).with_per_caller(per_caller),
            idle_timeout: Some(Duration::from_secs(300)),
        },
        ..EdgeOptions::default()
    };
    let gw = start_gateway_with(
        &default_catalog(),
        config_for("http://127.0.0.1:9", ""),
        edge,
    )
    .await;
    (gw, dir)
}

async fn post(
    http: &reqwest::Client,
    url: &str,
    key: &str,
    session: Option<&str>,
    body: &Value,
) -> (u16, String, Option<String>) {
    let mut b = http
        .post(format!("{url}/mcp"))
        .header("content-type", "application/json")
        .header("accept", ACCEPT)
        .header("x-api-key", key)
        .body(body.to_string());
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
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let text = tokio::time::timeout(WAIT, r.text()).await.unwrap().unwrap();
    (status, text, sid)
}

fn initialize() -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"}}})
}

fn list() -> Value {
    json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
}

async fn open(http: &reqwest::Client, url: &str, key: &str) -> Result<String, (u16, String)> {
    match post(http, url, key, None, &initialize()).await {
        (200, _, Some(id)) => Ok(id),
        (status, body, _) => Err((status, body)),
    }
}

async fn delete(http: &reqwest::Client, url: &str, key: &str, session: &str) -> u16 {
    http.delete(format!("{url}/mcp"))
        .header("x-api-key", key)
        .header("mcp-session-id", session)
        .header("mcp-protocol-version", "2025-11-25")
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

/// The value of the series `name` (with its labels) in the gateway's
/// metrics.
fn metric(gw: &Gateway, series: &str) -> f64 {
    let text = gw
        .store
        .metrics()
        .encode(gateway::observe::metrics::Format::Prometheus)
        .unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {series} in\n{text}"))
}

#[tokio::test]
async fn a_caller_flooding_initialize_loses_its_own_oldest_sessions_not_others_room() {
    let (gw, _dir) = gateway(8, 2, SessionKey::random()).await;
    let http = reqwest::Client::new();
    let bob_first = open(&http, &gw.url, BOB)
        .await
        .expect("bob opens a session");
    // 100 sessions from one caller: before per-caller quotas the 8th
    // filled the replica and every other caller got 503.
    let mut alice = Vec::new();
    for i in 0..100 {
        let id = open(&http, &gw.url, ALICE)
            .await
            .unwrap_or_else(|e| panic!("alice's session {i} refused: {e:?}"));
        alice.push(id);
    }
    assert_eq!(
        metric(
            &gw,
            "toolgate_sessions_evicted_total{reason=\"caller_quota\"}"
        ),
        98.0
    );
    assert_eq!(metric(&gw, "mcp_server_sessions_active"), 3.0);
    // Bob's session was not touched, and bob still has room.
    let (status, body, _) = post(&http, &gw.url, BOB, Some(&bob_first), &list()).await;
    assert_eq!(status, 200, "{body}");
    let bob_second = open(&http, &gw.url, BOB).await.expect("bob has room");
    // Alice's newest sessions are hers; the oldest was closed here and is
    // restored on its next use, closing her least recently used one.
    let newest = &alice[99];
    assert_eq!(
        post(&http, &gw.url, ALICE, Some(newest), &list()).await.0,
        200
    );
    assert_eq!(
        post(&http, &gw.url, ALICE, Some(&alice[0]), &list())
            .await
            .0,
        200
    );
    assert_eq!(
        metric(
            &gw,
            "toolgate_sessions_evicted_total{reason=\"caller_quota\"}"
        ),
        99.0
    );
    assert_eq!(metric(&gw, "mcp_server_sessions_active"), 4.0);
    assert_eq!(
        post(&http, &gw.url, BOB, Some(&bob_second), &list())
            .await
            .0,
        200
    );
    assert_eq!(
        metric(
            &gw,
            "toolgate_sessions_refused_total{reason=\"caller_quota\"}"
        ),
        0.0
    );
}

#[tokio::test]
async fn the_slots_of_closed_sessions_go_back_to_their_caller() {
    // One caller at a time fills the whole replica: what DELETE frees
    // must be counted off the caller, or the second round is refused.
    let (gw, _dir) = gateway(3, 3, SessionKey::random()).await;
    let http = reqwest::Client::new();
    for round in 0..3 {
        let mut ids = Vec::new();
        for _ in 0..3 {
            ids.push(open(&http, &gw.url, ALICE).await.expect("room"));
        }
        let (status, body) = open(&http, &gw.url, BOB)
            .await
            .expect_err("the replica is full");
        assert_eq!(status, 503, "round {round}: {body}");
        for id in &ids {
            assert_eq!(delete(&http, &gw.url, ALICE, id).await, 200);
        }
        let id = open(&http, &gw.url, BOB).await.expect("freed");
        assert_eq!(delete(&http, &gw.url, BOB, &id).await, 200);
    }
    assert_eq!(metric(&gw, "mcp_server_sessions_active"), 0.0);
}

#[tokio::test]
async fn another_identity_presenting_a_session_id_gets_404_as_for_an_unknown_one() {
    let key = SessionKey::random();
    let (gw, _dir) = gateway(8, 4, key.clone()).await;
    let key_of = |_: &Gateway| key.clone();
    let http = reqwest::Client::new();
    let alices = open(&http, &gw.url, ALICE).await.unwrap();
    let (status, body, _) = post(&http, &gw.url, BOB, Some(&alices), &list()).await;
    let unknown = post(&http, &gw.url, BOB, Some("v1.nope.nope"), &list()).await;
    assert_eq!((status, &body), (unknown.0, &unknown.1));
    assert_eq!(status, 404, "{body}");
    assert_eq!(delete(&http, &gw.url, BOB, &alices).await, 404);
    assert_eq!(
        post(&http, &gw.url, ALICE, Some(&alices), &list()).await.0,
        200,
        "bob's DELETE did not end alice's session"
    );
    // A replica that does not hold the session (it would restore it from
    // the id) tells the owner from the others alike.
    let (other, _dir2) = gateway(8, 4, key.clone()).await;
    let (status, body, _) = post(&http, &other.url, BOB, Some(&alices), &list()).await;
    assert_eq!(status, 404, "{body}");
    assert_eq!(metric(&other, "mcp_server_sessions_active"), 0.0);
    let (status, body, _) = post(&http, &other.url, ALICE, Some(&alices), &list()).await;
    assert_eq!(status, 200, "{body}");
    // A session of no owner (opened anonymously, or by a version before
    // sessions had owners) serves no verified caller.
    let params = serde_json::from_value(initialize()["params"].clone()).unwrap();
    let old = key_of(&gw).issue(None, Some(params));
    let (status, _, _) = post(&http, &gw.url, ALICE, Some(&old), &list()).await;
    assert_eq!(status, 404);
}
