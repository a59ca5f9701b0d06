//! The identity provider as an attack surface (issue 26, items 3 to 5):
//! introspection answers for another audience or issuer, introspection as
//! an amplifier (random, malformed, concurrent and flooding tokens) and a
//! slow or oversized JWKS. A controllable front on loopback serves the
//! JWKS (the test IdP's, behind a gate the test holds and releases) and
//! introspection answers the test chooses, and counts what it was asked:
//! the assertions are on those counts, not on timings.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use gateway::identity::inbound::{Inbound, InboundRuntime};
use gateway::observe::metrics::Format;
use gateway::EdgeOptions;
use serde_json::{json, Value};
use tokio::sync::watch;
use toolgate_tests::idp::Idp;

use crate::support::*;
use crate::upstream::TestUpstream;

const RESOURCE: &str = "https://mcp.example.com/mcp";
const AUDIENCE: &str = "toolgate";
const ISSUER: &str = "https://login.example.com";

/// What the front's endpoints do with a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Gate {
    Open,
    /// Held until the test moves the gate.
    Hold,
    /// Answered 500.
    Fail,
}

#[derive(Clone)]
struct Front {
    url: String,
    idp: Option<Idp>,
    gate: Arc<watch::Sender<Gate>>,
    jwks: Arc<AtomicUsize>,
    introspections: Arc<AtomicUsize>,
    /// Introspection answers by token; others are `active: false`.
    answers: Arc<Mutex<HashMap<String, Value>>>,
    /// Copies of the IdP's EC key listed before its real keys.
    padding: usize,
}

impl Front {
    async fn start(idp: Option<Idp>, padding: usize) -> Front {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let front = Front {
            url: format!("http://{}", listener.local_addr().unwrap()),
            idp,
            gate: Arc::new(watch::channel(Gate::Open).0),
            jwks: Arc::default(),
            introspections: Arc::default(),
            answers: Arc::default(),
            padding,
        };
        let app = Router::new()
            .route("/jwks", get(jwks))
            .route("/introspect", post(introspect))
            .with_state(front.clone());
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        front
    }

    fn set(&self, gate: Gate) {
        self.gate.send_replace(gate);
    }

    fn answer(&self, token: &str, answer: Value) {
        self.answers
            .lock()
            .unwrap()
            .insert(token.to_string(), answer);
    }

    fn jwks_requests(&self) -> usize {
        self.jwks.load(Ordering::SeqCst)
    }

    fn introspection_requests(&self) -> usize {
        self.introspections.load(Ordering::SeqCst)
    }

    async fn pass(&self) -> Gate {
        let mut rx = self.gate.subscribe();
        let g = *rx.wait_for(|g| *g != Gate::Hold).await.unwrap();
        g
    }
}

async fn jwks(State(f): State<Front>) -> Response {
    f.jwks.fetch_add(1, Ordering::SeqCst);
    if f.pass().await == Gate::Fail {
        return http::StatusCode::INTERNAL_SERVER_ERROR.into_response();
    }
    let idp = f.idp.as_ref().expect("a JWKS front has an IdP");
    let mut set: Value = reqwest::get(idp.jwks_url())
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let keys = set["keys"].as_array().unwrap().clone();
    let ec = keys.iter().find(|k| k["kid"] == "ec-1").unwrap().clone();
    let mut padded: Vec<Value> = (0..f.padding)
        .map(|i| {
            let mut k = ec.clone();
            k["kid"] = json!(format!("pad-{i}"));
            k
        })
        .collect();
    padded.extend(keys);
    set["keys"] = json!(padded);
    axum::Json(set).into_response()
}

async fn introspect(State(f): State<Front>, body: String) -> Response {
    f.introspections.fetch_add(1, Ordering::SeqCst);
    if f.pass().await == Gate::Fail {
        return http::StatusCode::INTERNAL_SERVER_ERROR.into_response();
    }
    let token = form_urlencoded::parse(body.as_bytes())
        .find(|(k, _)| k == "token")
        .map(|(_, v)| v.into_owned())
        .unwrap();
    let answer = f.answers.lock().unwrap().get(&token).cloned();
    axum::Json(answer.unwrap_or_else(|| json!({"active": false}))).into_response()
}

/// A gateway whose `inbound:` section is `yaml`.
async fn gateway_with(up: &TestUpstream, yaml: &str) -> Gateway {
    let file = gateway::config::parse_file(yaml).expect("fixture inbound config parses");
    let inbound = Inbound::from_config(&file.inbound, InboundRuntime::default())
        .await
        .expect("fixture inbound config is valid");
    let edge = EdgeOptions {
        inbound,
        ..EdgeOptions::default()
    };
    start_gateway_with(&default_catalog(), config_for(&up.url, ""), edge).await
}

fn introspection_yaml(front: &Front, extra: &str) -> String {
    format!(
        "inbound:\n  resource: {RESOURCE}\n  introspection:\n    url: {}/introspect\n    clientId: toolgate\n    clientSecret: {{value: s}}\n{extra}",
        front.url
    )
}

fn jwt_yaml(idp: &Idp, front: &Front, extra: &str) -> String {
    format!(
        "inbound:\n  resource: {RESOURCE}\n{extra}  jwt:\n    - issuer: {}\n      audiences: [{AUDIENCE}]\n      jwksUrl: {}/jwks\n",
        idp.issuer(),
        front.url
    )
}

/// A raw `initialize` with `token`: (status, Retry-After).
async fn bearer(gw: &Gateway, token: &str) -> (u16, Option<String>) {
    let r = reqwest::Client::new()
        .post(format!("{}/mcp", gw.url))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("authorization", format!("Bearer {token}"))
        .body(
            json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": {},
                "clientInfo": {"name": "raw", "version": "1"}}})
            .to_string(),
        )
        .send()
        .await
        .expect("the gateway answers");
    let retry = r
        .headers()
        .get("retry-after")
        .map(|v| v.to_str().unwrap().to_string());
    (r.status().as_u16(), retry)
}

/// `toolgate_auth_denials_total{reason="throttled"}` of `gw`.
fn throttled(gw: &Gateway) -> u64 {
    let text = gw.store.metrics().encode(Format::Prometheus).unwrap();
    text.lines()
        .find(|l| l.starts_with("toolgate_auth_denials_total{reason=\"throttled\"}"))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no throttled denials series:\n{text}"))
}

/// Polls `check` until it holds.
async fn until<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    tokio::time::timeout(WAIT, async {
        while !check().await {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("timed out waiting for {what}"));
}

fn random_token(i: usize) -> String {
    let n = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("rnd{i}x{n:x}")
}

#[tokio::test]
async fn introspection_answers_for_another_audience_or_issuer_are_refused() {
    let (front, up) = (Front::start(None, 0).await, TestUpstream::start().await);
    let active = |extra: Value| {
        let mut a = json!({"active": true, "sub": "ann", "scope": "shop.admin"});
        for (k, v) in extra.as_object().unwrap() {
            a[k] = v.clone();
        }
        a
    };
    front.answer("other-aud", active(json!({"aud": "some-other-api"})));
    front.answer("our-aud", active(json!({"aud": AUDIENCE})));
    front.answer("aud-list", active(json!({"aud": ["x", AUDIENCE]})));
    front.answer("no-aud", active(json!({})));
    front.answer("resource-aud", active(json!({"aud": RESOURCE})));
    front.answer("aud-number", active(json!({"aud": 7})));
    front.answer("our-iss", active(json!({"aud": AUDIENCE, "iss": ISSUER})));
    front.answer(
        "other-iss",
        active(json!({"aud": AUDIENCE, "iss": "https://evil.example.com"})),
    );

    let configured = gateway_with(
        &up,
        &introspection_yaml(
            &front,
            &format!("    audiences: [{AUDIENCE}]\n    issuer: {ISSUER}\n"),
        ),
    )
    .await;
    for (token, status) in [
        ("other-aud", 401),
        ("aud-number", 401),
        ("other-iss", 401),
        ("resource-aud", 401),
        ("our-aud", 200),
        ("aud-list", 200),
        ("our-iss", 200),
        ("no-aud", 200),
    ] {
        assert_eq!(bearer(&configured, token).await.0, status, "{token}");
    }

    // Defaults: the resource is the audience; requireAudience refuses
    // answers without one.
    let strict = gateway_with(
        &up,
        &introspection_yaml(&front, "    requireAudience: true\n"),
    )
    .await;
    for (token, status) in [
        ("other-aud", 401),
        ("our-aud", 401),
        ("no-aud", 401),
        ("resource-aud", 200),
    ] {
        assert_eq!(bearer(&strict, token).await.0, status, "strict: {token}");
    }
}

#[tokio::test]
async fn tokens_that_cannot_be_valid_never_reach_the_idp() {
    let (front, up) = (Front::start(None, 0).await, TestUpstream::start().await);
    let gw = gateway_with(&up, &introspection_yaml(&front, "    maxTokenBytes: 512\n")).await;
    let long = "a".repeat(513);
    for token in [
        "abc%def",
        "tok,en",
        "{json}",
        "a=b",
        "===",
        "semi;colon",
        "quo\"te",
        &long,
    ] {
        assert_eq!(bearer(&gw, token).await.0, 401, "{token}");
    }
    assert_eq!(front.introspection_requests(), 0);
    // The longest possible token, padding included, is still asked about.
    let fits = format!("{}==", "a".repeat(510));
    assert_eq!(bearer(&gw, &fits).await.0, 401);
    assert_eq!(front.introspection_requests(), 1);
}

/// Issue 26's amplification: every distinct random token was one POST to
/// the IdP. Now the IdP sees at most the configured rate (plus its burst)
/// and the rest are 503 with Retry-After, counted; a caller already
/// admitted keeps passing without a new introspection.
#[tokio::test]
async fn random_tokens_cost_the_idp_a_bounded_number_of_requests() {
    let (front, up) = (Front::start(None, 0).await, TestUpstream::start().await);
    front.answer("known", json!({"active": true, "sub": "ann"}));
    let gw = gateway_with(
        &up,
        &introspection_yaml(&front, "    maxRequestsPerSecond: 5\n"),
    )
    .await;
    assert_eq!(bearer(&gw, "known").await.0, 200);

    let started = Instant::now();
    let tokens: Vec<String> = (0..300).map(random_token).collect();
    let mut statuses = HashMap::<u16, usize>::new();
    for batch in tokens.chunks(20) {
        let answers = futures::future::join_all(batch.iter().map(|t| bearer(&gw, t))).await;
        for (status, retry) in answers {
            *statuses.entry(status).or_default() += 1;
            if status == 503 {
                let secs: u64 = retry.expect("503 says when to retry").parse().unwrap();
                assert!(secs >= 1, "{secs}");
            }
        }
        assert_eq!(bearer(&gw, "known").await.0, 200, "a cached caller passes");
    }
    let elapsed = started.elapsed().as_secs() + 1;
    let asked = front.introspection_requests() - 1;
    eprintln!(
        "300 random tokens in {:?}: {asked} introspections, answers {statuses:?}",
        started.elapsed()
    );
    assert!(
        asked as u64 <= 5 + 5 * elapsed,
        "{asked} introspections in {elapsed} s"
    );
    assert_eq!(statuses.get(&401).copied().unwrap_or(0), asked);
    let refused = statuses.get(&503).copied().unwrap_or(0);
    assert_eq!(refused + asked, 300);
    assert_eq!(throttled(&gw), refused as u64);
}

#[tokio::test]
async fn requests_for_one_token_share_one_introspection_and_the_excess_gets_503() {
    let (front, up) = (Front::start(None, 0).await, TestUpstream::start().await);
    front.answer("tok-a", json!({"active": true, "sub": "ann"}));
    front.answer("tok-b", json!({"active": true, "sub": "bob"}));
    let gw = Arc::new(
        gateway_with(
            &up,
            &introspection_yaml(&front, "    maxConcurrentRequests: 2\n"),
        )
        .await,
    );
    front.set(Gate::Hold);
    let same: Vec<_> = (0..10)
        .map(|_| {
            let gw = gw.clone();
            tokio::spawn(async move { bearer(&gw, "tok-a").await.0 })
        })
        .collect();
    until("the first introspection", || async {
        front.introspection_requests() >= 1
    })
    .await;
    // Give the other nine time to arrive: with one introspection each
    // they would show here.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(front.introspection_requests(), 1);

    let b = {
        let gw = gw.clone();
        tokio::spawn(async move { bearer(&gw, "tok-b").await.0 })
    };
    until("the second introspection", || async {
        front.introspection_requests() >= 2
    })
    .await;
    // Both slots are busy with a held IdP: a third token is not queued.
    let (status, retry) = tokio::time::timeout(Duration::from_secs(5), bearer(&gw, "tok-c"))
        .await
        .expect("the third token is answered while the IdP holds the others");
    assert_eq!((status, retry.as_deref()), (503, Some("1")));
    assert_eq!(throttled(&gw), 1);

    front.set(Gate::Open);
    for h in same {
        assert_eq!(h.await.unwrap(), 200);
    }
    assert_eq!(b.await.unwrap(), 200);
    assert_eq!(front.introspection_requests(), 2);
}

#[tokio::test]
async fn active_answers_survive_a_flood_of_refused_ones() {
    let (front, up) = (Front::start(None, 0).await, TestUpstream::start().await);
    front.answer("tok-a", json!({"active": true, "sub": "ann"}));
    let gw = gateway_with(
        &up,
        &introspection_yaml(
            &front,
            "    cacheMaxEntries: 5\n    maxRequestsPerSecond: 1000\n",
        ),
    )
    .await;
    assert_eq!(bearer(&gw, "tok-a").await.0, 200);
    for i in 0..30 {
        assert_eq!(bearer(&gw, &random_token(i)).await.0, 401);
    }
    assert_eq!(front.introspection_requests(), 31);
    assert_eq!(bearer(&gw, "tok-a").await.0, 200);
    assert_eq!(
        front.introspection_requests(),
        31,
        "the active answer was pushed out by refused ones"
    );
}

/// Issue 26: a JWKS answering slower than the refetch interval made each
/// waiting request fetch again after the one before it. Now they all wait
/// for one fetch and share its failure.
#[tokio::test]
async fn a_slow_failing_jwks_is_fetched_once_for_all_waiters() {
    let idp = Idp::start().await;
    let (front, up) = (
        Front::start(Some(idp.clone()), 0).await,
        TestUpstream::start().await,
    );
    let gw =
        Arc::new(gateway_with(&up, &jwt_yaml(&idp, &front, "  jwksMinRefetchSeconds: 1\n")).await);
    front.set(Gate::Hold);
    let started = Instant::now();
    let waiters: Vec<_> = (0..5)
        .map(|i| {
            let (gw, t) = (
                gw.clone(),
                idp.token().aud(AUDIENCE).subject(&format!("u{i}")).mint(),
            );
            tokio::spawn(async move { bearer(&gw, &t).await })
        })
        .collect();
    until("the first JWKS fetch", || async {
        front.jwks_requests() >= 1
    })
    .await;
    // Past the refetch interval while the fetch still runs.
    tokio::time::sleep(Duration::from_millis(1200)).await;
    front.set(Gate::Fail);
    for w in waiters {
        let (status, retry) = w.await.unwrap();
        assert_eq!((status, retry.is_some()), (503, true));
    }
    eprintln!("5 waiters answered after {:?}", started.elapsed());
    assert_eq!(front.jwks_requests(), 1, "one fetch for every waiter");
    // Right after the failure: no fetch per request (at most one more, if
    // a slow machine let the interval pass).
    let again = (0..5).map(|_| {
        let (gw, t) = (gw.clone(), idp.token().aud(AUDIENCE).mint());
        async move { bearer(&gw, &t).await.0 }
    });
    futures::future::join_all(again).await;
    assert!(front.jwks_requests() <= 2, "{}", front.jwks_requests());
    front.set(Gate::Open);
    until("keys after the interval", || async {
        bearer(&gw, &idp.token().aud(AUDIENCE).mint()).await.0 == 200
    })
    .await;
    assert!(front.jwks_requests() <= 3, "{}", front.jwks_requests());
}

/// Keys past the refresh age keep serving while one background refresh
/// runs (it hangs here); once it lands, a key the IdP removed is refused,
/// with no token naming an unknown key to prompt it.
#[tokio::test]
async fn stale_keys_serve_during_one_refresh_and_removed_keys_stop() {
    let idp = Idp::start().await;
    let (front, up) = (
        Front::start(Some(idp.clone()), 0).await,
        TestUpstream::start().await,
    );
    let gw =
        Arc::new(gateway_with(&up, &jwt_yaml(&idp, &front, "  jwksRefreshSeconds: 1\n")).await);
    let old = idp.token().aud(AUDIENCE).mint();
    assert_eq!(bearer(&gw, &old).await.0, 200);
    front.set(Gate::Hold);
    // Counted after the gate closed: held.
    let held = front.jwks_requests() + 1;
    until("the background refresh", || async {
        front.jwks_requests() >= held
    })
    .await;

    let served: Vec<_> = (0..5)
        .map(|i| {
            let (gw, t) = (
                gw.clone(),
                idp.token().aud(AUDIENCE).subject(&format!("u{i}")).mint(),
            );
            tokio::spawn(async move { bearer(&gw, &t).await.0 })
        })
        .collect();
    let served = tokio::time::timeout(Duration::from_secs(5), futures::future::join_all(served))
        .await
        .expect("stale keys serve while the refresh hangs");
    assert!(
        served.iter().all(|s| *s.as_ref().unwrap() == 200),
        "{served:?}"
    );
    assert_eq!(front.jwks_requests(), held, "one refresh for all");

    idp.rotate_key();
    front.set(Gate::Open);
    until("the removed key refused", || async {
        bearer(&gw, &old).await.0 == 401
    })
    .await;
    assert_eq!(bearer(&gw, &idp.token().aud(AUDIENCE).mint()).await.0, 200);
    // Removed again, with only tokens of a listed key arriving: refused
    // once the next refresh (1 s) lands.
    let second = idp.token().aud(AUDIENCE).mint();
    idp.rotate_key();
    let removed = Instant::now();
    until("the second removed key refused", || async {
        bearer(&gw, &second).await.0 == 401
    })
    .await;
    assert!(
        removed.elapsed() < Duration::from_secs(5),
        "{:?}",
        removed.elapsed()
    );
}

/// Keys past the 64th were dropped without a word; now a warning names
/// the issuer.
#[tokio::test]
async fn a_jwks_of_more_than_64_keys_is_reported() {
    let log = Arc::new(Mutex::new(Vec::new()));
    let writer = {
        let log = log.clone();
        move || Capture(log.clone())
    };
    let _guard = tracing::subscriber::set_default(
        tracing_subscriber::fmt()
            .with_max_level(tracing::Level::WARN)
            .with_ansi(false)
            .with_writer(writer)
            .finish(),
    );
    let idp = Idp::start().await;
    let (front, up) = (
        Front::start(Some(idp.clone()), 70).await,
        TestUpstream::start().await,
    );
    let gw = gateway_with(&up, &jwt_yaml(&idp, &front, "")).await;
    assert_eq!(bearer(&gw, &idp.token().aud(AUDIENCE).mint()).await.0, 401);
    let text = String::from_utf8(log.lock().unwrap().clone()).unwrap();
    let line = text
        .lines()
        .find(|l| l.contains("more than 64"))
        .unwrap_or_else(|| panic!("no warning:\n{text}"));
    assert!(
        line.contains("WARN") && line.contains(idp.issuer()),
        "{line}"
    );
    assert!(line.contains("keys=73"), "{line}");
}

struct Capture(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Capture {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
