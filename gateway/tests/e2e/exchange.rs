//! `auth: {type: tokenExchange}` (RFC 8693) against a loopback token
//! endpoint written here. Callers come from inbound authentication, so the
//! calls go through the call pipeline's public API (`gateway::call::pipeline::call`
//! with a `CallContext` holding a `Caller`); the open-mode refusal goes
//! over the wire.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Form;
use gateway::identity::inbound::{AuthMethod, BearerToken, CallContext};
use gateway::serving::snapshot::{Overrides, RuntimeCache, Snapshot};
use serde_json::json;

use crate::support::*;
use crate::upstream::TestUpstream;

/// One exchange request as the token endpoint saw it.
#[derive(Debug, Clone)]
struct Seen {
    authorization: Option<String>,
    form: HashMap<String, String>,
}

#[derive(Default)]
struct Endpoint {
    seen: Mutex<Vec<Seen>>,
    issued: AtomicUsize,
    /// `expires_in` of the tokens it issues.
    expires_in: AtomicU64,
    /// Refuse exchanges (echoing the subject token, as a careless
    /// endpoint might).
    refuse: AtomicBool,
}

struct TokenEndpoint {
    url: String,
    state: Arc<Endpoint>,
}

impl TokenEndpoint {
    async fn start() -> TokenEndpoint {
        let state = Arc::new(Endpoint::default());
        state.expires_in.store(3600, Ordering::SeqCst);
        let app = axum::Router::new()
            .route("/token", axum::routing::post(exchange))
            .with_state(state.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/token", listener.local_addr().unwrap());
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        TokenEndpoint { url, state }
    }

    fn seen(&self) -> Vec<Seen> {
        self.state.seen.lock().unwrap().clone()
    }

    fn exchanges(&self) -> usize {
        self.state.issued.load(Ordering::SeqCst)
    }
}

async fn exchange(
    State(st): State<Arc<Endpoint>>,
    headers: HeaderMap,
    Form(form): Form<HashMap<String, String>>,
) -> Response {
    st.seen.lock().unwrap().push(Seen {
        authorization: headers
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string),
        form: form.clone(),
    });
    if st.refuse.load(Ordering::SeqCst) {
        return (
            StatusCode::BAD_REQUEST,
            axum::Json(json!({
                "error": "invalid_grant",
                "error_description": format!("bad subject_token {}", form["subject_token"]),
            })),
        )
            .into_response();
    }
    let n = st.issued.fetch_add(1, Ordering::SeqCst) + 1;
    axum::Json(json!({
        "access_token": format!("exchanged-{n}"),
        "issued_token_type": "urn:ietf:params:oauth:token-type:access_token",
        "token_type": "Bearer",
        "expires_in": st.expires_in.load(Ordering::SeqCst),
    }))
    .into_response()
}

fn exchange_config(token_url: &str) -> String {
    format!(
        "    auth: {{type: tokenExchange, tokenUrl: '{token_url}', clientId: {{value: gw}}, \
         clientSecret: {{value: gw-secret}}, audience: pets-api, scopes: [pets.read, pets.write]}}"
    )
}

fn caller(subject: &str) -> CallContext {
    verified_caller(
        subject,
        AuthMethod::Jwt,
        Some(BearerToken::new(&format!("inbound-token-of-{subject}"))),
    )
}

struct Setup {
    up: TestUpstream,
    idp: TokenEndpoint,
    snap: Snapshot,
}

async fn setup() -> Setup {
    gateway::net::install_crypto_provider();
    let up = TestUpstream::start().await;
    let idp = TokenEndpoint::start().await;
    let snap = Snapshot::build(
        &default_catalog(),
        &config_for(&up.url, &exchange_config(&idp.url)),
        &Overrides::default(),
        &mut RuntimeCache::default(),
    )
    .expect("snapshot builds");
    Setup { up, idp, snap }
}

async fn get_pet(snap: &Snapshot, ctx: &CallContext) -> rmcp::model::CallToolResult {
    let t = snap.tool("pets__get_pet").unwrap().clone();
    gateway::call::pipeline::call(&t, Some(args(json!({"id": "7"}))), ctx).await
}

#[tokio::test]
async fn the_upstream_gets_the_exchanged_token_never_the_inbound_one() {
    let s = setup().await;
    let alice = caller("alice");
    let r = get_pet(&s.snap, &alice).await;
    assert!(!is_error(&r), "{}", text(&r));

    let seen = s.idp.seen();
    assert_eq!(seen.len(), 1);
    let f = &seen[0].form;
    assert_eq!(
        f["grant_type"],
        "urn:ietf:params:oauth:grant-type:token-exchange"
    );
    assert_eq!(f["subject_token"], "inbound-token-of-alice");
    assert_eq!(
        f["subject_token_type"],
        "urn:ietf:params:oauth:token-type:access_token"
    );
    assert_eq!(f["audience"], "pets-api");
    assert_eq!(f["scope"], "pets.read pets.write");
    // base64("gw:gw-secret")
    assert_eq!(
        seen[0].authorization.as_deref(),
        Some("Basic Z3c6Z3ctc2VjcmV0")
    );

    let rec = s.up.last();
    assert_eq!(rec.header("authorization"), Some("Bearer exchanged-1"));
    for (_, v) in rec.headers.iter() {
        assert!(!v.to_str().unwrap_or("").contains("inbound-token"), "{v:?}");
    }

    // Cached per subject: alice again costs no exchange, bob one of his own.
    get_pet(&s.snap, &alice).await;
    assert_eq!(s.idp.exchanges(), 1, "alice's token was not cached");
    assert_eq!(
        s.up.last().header("authorization"),
        Some("Bearer exchanged-1")
    );
    let r = get_pet(&s.snap, &caller("bob")).await;
    assert!(!is_error(&r), "{}", text(&r));
    assert_eq!(s.idp.exchanges(), 2);
    assert_eq!(
        s.idp.seen()[1].form["subject_token"],
        "inbound-token-of-bob"
    );
    assert_eq!(
        s.up.last().header("authorization"),
        Some("Bearer exchanged-2")
    );
}

/// On this single-threaded runtime `join_all` polls every call once
/// before the token endpoint can answer, so all of them are waiting while
/// the first exchange is in flight.
#[tokio::test]
async fn concurrent_calls_of_one_caller_cause_one_exchange() {
    let s = setup().await;
    let alice = caller("alice");
    let calls: Vec<_> = (0..8).map(|_| get_pet(&s.snap, &alice)).collect();
    for r in futures::future::join_all(calls).await {
        assert!(!is_error(&r), "{}", text(&r));
    }
    assert_eq!(s.idp.exchanges(), 1);
    assert_eq!(s.up.count(), 8);
}

#[tokio::test]
async fn an_expired_token_is_exchanged_again() {
    let s = setup().await;
    // Tokens that are stale the moment they arrive.
    s.idp.state.expires_in.store(0, Ordering::SeqCst);
    let alice = caller("alice");
    get_pet(&s.snap, &alice).await;
    get_pet(&s.snap, &alice).await;
    assert_eq!(s.idp.exchanges(), 2);
    assert_eq!(
        s.up.last().header("authorization"),
        Some("Bearer exchanged-2")
    );
}

#[tokio::test]
async fn a_refused_exchange_is_a_tool_error_without_secrets() {
    let s = setup().await;
    s.idp.state.refuse.store(true, Ordering::SeqCst);
    let r = get_pet(&s.snap, &caller("alice")).await;
    assert!(is_error(&r));
    let t = text(&r);
    assert!(t.contains("HTTP 400") && t.contains("invalid_grant"), "{t}");
    for secret in ["inbound-token-of-alice", "gw-secret"] {
        assert!(!t.contains(secret), "{t}");
    }
    assert_eq!(s.up.count(), 0);
}

#[tokio::test]
async fn callers_without_a_bearer_token_are_refused() {
    let s = setup().await;
    let with_key = verified_caller("ci-bot", AuthMethod::ApiKey, None);
    for ctx in [with_key, CallContext::default()] {
        let r = get_pet(&s.snap, &ctx).await;
        assert!(is_error(&r));
        assert!(
            text(&r).contains("needs a caller authenticated with a bearer token"),
            "{}",
            text(&r)
        );
    }
    assert_eq!(s.idp.exchanges(), 0);
    assert_eq!(s.up.count(), 0);
}

/// Open mode over the wire: no caller, no call.
#[tokio::test]
async fn without_inbound_auth_the_upstream_is_not_called() {
    let up = TestUpstream::start().await;
    let idp = TokenEndpoint::start().await;
    let gw = start_gateway(
        &default_catalog(),
        config_for(&up.url, &exchange_config(&idp.url)),
    )
    .await;
    let client = connect(&format!("{}/mcp", gw.url)).await;
    let r = call(&client, "pets__get_pet", json!({"id": "7"})).await;
    assert!(is_error(&r));
    assert!(text(&r).contains("bearer token"), "{}", text(&r));
    assert_eq!((up.count(), idp.exchanges()), (0, 0));
}

#[test]
fn debug_output_of_the_runtime_shows_no_secret() {
    gateway::net::install_crypto_provider();
    let cfg = config_for(
        "http://127.0.0.1:9",
        &exchange_config("http://127.0.0.1:9/token"),
    );
    let snap = Snapshot::build(
        &default_catalog(),
        &cfg,
        &Overrides::default(),
        &mut RuntimeCache::default(),
    )
    .unwrap();
    let dbg = format!("{:?}", snap.tool("pets__get_pet").unwrap().upstream);
    assert!(dbg.contains("TokenExchange"), "{dbg}");
    assert!(!dbg.contains("gw-secret"), "{dbg}");
    let ctx = caller("alice");
    assert!(!format!("{ctx:?}").contains("inbound-token-of-alice"));
}
