//! The gateway's JSON-RPC intake: an HTTP request to `/mcp` or
//! `/mcp/{prefix}` through the whole axum router and rmcp's Streamable
//! HTTP transport (headers, session restore from a signed id, JSON-RPC
//! parsing, tools/list, tools/call with argument validation and request
//! building), in process.
//!
//! Input: one byte choosing the request's shape (endpoint, protocol
//! version header, session id, routing headers, Accept; see [`request`]),
//! then the POST body (which may be amplified: `toolgate_fuzz::amplify`).
//!
//! Each input gets a fresh runtime and router (the compiled catalog is
//! shared), so sessions and tasks never carry over between inputs; the
//! upstream is a closed loopback port, so tool calls fail fast at connect.
//! `FUZZ_DEBUG=1` prints each response's status and start.
#![no_main]

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use axum::body::Body;
use gateway::mcp::session::SessionKey;
use gateway::serving::snapshot::Overrides;
use gateway::{AppState, CatalogStore, EdgeOptions};
use libfuzzer_sys::fuzz_target;
use rmcp::model::{ClientCapabilities, Implementation, InitializeRequestParams, ProtocolVersion};
use tower::ServiceExt;

/// Longest time a response may take to finish: every request here ends
/// quickly (no upstream is reachable), so a slower one is a hang.
const RESPONSE_DEADLINE: Duration = Duration::from_secs(5);
/// Responses are read up to this size; more is a finding by itself.
const MAX_RESPONSE_BYTES: usize = 64 << 20;

struct World {
    store: Arc<CatalogStore>,
    key: SessionKey,
    /// Valid session ids: for `/mcp` and for `/mcp/pets`.
    sessions: [String; 2],
}

fn world() -> &'static World {
    static W: OnceLock<World> = OnceLock::new();
    W.get_or_init(|| {
        gateway::net::install_crypto_provider();
        // A port that was just free: connecting is refused at once.
        let closed = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a loopback port");
        let mut overrides = Overrides::default();
        overrides.base_urls.insert(
            gateway::demo::PREFIX.into(),
            format!("http://{closed}{}", gateway::demo::API_BASE),
        );
        let store = CatalogStore::new(Default::default(), overrides);
        let catalog = gateway::demo::petstore_catalog().expect("demo catalog");
        store.install(&catalog).expect("demo catalog installs");
        let key = SessionKey::new(&[7u8; 32]).expect("key");
        let mut params = InitializeRequestParams::new(
            ClientCapabilities::default(),
            Implementation::new("fuzz", "1"),
        );
        params.protocol_version = ProtocolVersion::V_2025_06_18;
        let sessions = [
            key.issue(None, Some(params.clone())),
            key.issue(Some(gateway::demo::PREFIX), Some(params)),
        ];
        World {
            store,
            key,
            sessions,
        }
    })
}

/// The `Mcp-Method` and `Mcp-Name` headers a 2026-07-28 client derives
/// from its body.
fn routing_headers(body: &[u8]) -> Option<(String, Option<String>)> {
    let v: serde_json::Value = serde_json::from_slice(body).ok()?;
    let method = v.get("method")?.as_str()?.to_string();
    let name = v
        .pointer("/params/name")
        .and_then(|n| n.as_str())
        .map(str::to_string);
    Some((method, name))
}

/// Shape bits: 0 scoped endpoint; 1-2 MCP-Protocol-Version header (none,
/// 2025-06-18, 2026-07-28, 2025-03-26); 3-4 session id (none, valid,
/// another endpoint's, forged); 5 routing headers from the body; 6-7
/// content negotiation (0-1 usual, 2 JSON-only Accept, 3 DELETE without
/// Content-Type).
fn request(shape: u8, body: &[u8], w: &World) -> http::Request<Body> {
    let scoped = shape & 1 != 0;
    let uri = if scoped { "/mcp/pets" } else { "/mcp" };
    let odd = shape >> 6 == 3;
    let method = if odd {
        http::Method::DELETE
    } else {
        http::Method::POST
    };
    let mut b = http::Request::builder()
        .method(method)
        .uri(uri)
        .header("host", "localhost");
    b = match (shape >> 1) & 3 {
        0 => b,
        1 => b.header("mcp-protocol-version", "2025-06-18"),
        2 => b.header("mcp-protocol-version", "2026-07-28"),
        _ => b.header("mcp-protocol-version", "2025-03-26"),
    };
    b = match (shape >> 3) & 3 {
        0 => b,
        1 => b.header("mcp-session-id", &w.sessions[usize::from(scoped)]),
        // Another endpoint's id: must not open this one.
        2 => b.header("mcp-session-id", &w.sessions[usize::from(!scoped)]),
        _ => b.header("mcp-session-id", "v1.e30.AAAA"),
    };
    if shape & 0x20 != 0 {
        if let Some((method, name)) = routing_headers(body) {
            // Header values must be visible ASCII; a body that names
            // something else is sent without the header.
            if let Ok(v) = http::HeaderValue::from_str(&method) {
                b = b.header("mcp-method", v);
            }
            if let Some(Ok(v)) = name.map(|n| http::HeaderValue::from_str(&n)) {
                b = b.header("mcp-name", v);
            }
        }
    }
    b = match shape >> 6 {
        2 => b.header("accept", "application/json"),
        _ => b.header("accept", "application/json, text/event-stream"),
    };
    if !odd {
        b = b.header("content-type", "application/json");
    }
    b.body(Body::from(body.to_vec())).expect("request")
}

fuzz_target!(|data: &[u8]| {
    let Some((&shape, body)) = data.split_first() else {
        return;
    };
    let w = world();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let opts = EdgeOptions {
        sse_keep_alive: None,
        session_key: w.key.clone(),
        ..EdgeOptions::default()
    };
    let req = request(shape, &toolgate_fuzz::amplify(body), w);
    rt.block_on(async {
        let app = gateway::app(AppState::new(w.store.clone(), &opts));
        let served = tokio::time::timeout(RESPONSE_DEADLINE, async {
            let resp = app.oneshot(req).await.expect("the router is infallible");
            let status = resp.status();
            let body = axum::body::to_bytes(resp.into_body(), MAX_RESPONSE_BYTES).await;
            let text = || {
                body.as_ref()
                    .map(|b| String::from_utf8_lossy(b).into_owned())
                    .unwrap_or_default()
            };
            // The upstream is down, the catalog is fine: whatever the client
            // sends, it is a 4xx or a JSON-RPC error, never the server failing.
            assert!(!status.is_server_error(), "{status}: {:.2000}", text());
            if std::env::var_os("FUZZ_DEBUG").is_some() {
                eprintln!("{status} {:.300}", text());
            }
            body
        })
        .await;
        match served {
            Err(_) => panic!("no complete response within {RESPONSE_DEADLINE:?}"),
            Ok(Err(e)) => panic!("response body failed: {e}"),
            Ok(Ok(_)) => {}
        }
    });
    opts.cancel.cancel();
    drop(rt);
});
