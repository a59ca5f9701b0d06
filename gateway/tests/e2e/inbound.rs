//! Inbound authentication against the test identity provider
//! (`toolgate_tests::idp`): JWTs (discovery, JWKS, rotation, attacks), API
//! keys (rotation by file), introspection; the RFC 9728 challenge and
//! metadata; what stays open. A real rmcp client where a call must pass,
//! raw HTTP where the exact answer matters.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use gateway::identity::inbound::{Inbound, InboundRuntime};
use gateway::serving::reload::WatchOptions;
use gateway::EdgeOptions;
use rmcp::model::ProtocolVersion;
use serde_json::{json, Value};
use toolgate_tests::idp::{Alg, Idp, CLIENT_ID, CLIENT_SECRET};

use crate::reload::{kubelet_publish, tempdir};
use crate::support::*;
use crate::upstream::TestUpstream;

/// The resource as clients reach it, through an ingress.
const RESOURCE: &str = "https://mcp.example.com/mcp";
const METADATA_URL: &str = "https://mcp.example.com/.well-known/oauth-protected-resource/mcp";
const AUDIENCE: &str = "toolgate";

const KEY_1: &str = "first-api-key-0123456789abcdef";
const KEY_2: &str = "second-api-key-0123456789abcdef";

fn fast_watch() -> WatchOptions {
    WatchOptions {
        interval: Duration::from_millis(20),
        debounce: Duration::from_millis(20),
        rehash_every: Duration::from_millis(100),
    }
}

/// A gateway in front of `up` with the `inbound:` section `yaml`.
async fn gateway_with(up: &TestUpstream, yaml: &str) -> Gateway {
    let file = gateway::config::parse_file(yaml).expect("fixture inbound config parses");
    let inbound = Inbound::from_config(
        &file.inbound,
        InboundRuntime {
            watch: fast_watch(),
            ..Default::default()
        },
    )
    .await
    .expect("fixture inbound config is valid");
    assert!(inbound.enabled());
    let edge = EdgeOptions {
        inbound,
        ..EdgeOptions::default()
    };
    start_gateway_with(&default_catalog(), config_for(&up.url, ""), edge).await
}

/// `inbound:` trusting `idp` (by OIDC discovery unless `jwks_url`).
fn jwt_yaml(idp: &Idp, extra: &str) -> String {
    format!(
        "inbound:\n  resource: {RESOURCE}\n  scopesSupported: [pets.read]\n  jwt:\n    - issuer: {}\n      audiences: [{AUDIENCE}, other]\n{extra}",
        idp.issuer()
    )
}

/// A raw `initialize` to `path` with `headers`: (status, challenge, body).
async fn raw(gw: &Gateway, path: &str, headers: &[(&str, &str)]) -> (u16, Option<String>, String) {
    let mut req = reqwest::Client::new()
        .post(format!("{}{path}", gw.url))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(
            json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": {},
                "clientInfo": {"name": "raw", "version": "1"}}})
            .to_string(),
        );
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let r = req.send().await.expect("the gateway answers");
    let status = r.status().as_u16();
    let challenge = r
        .headers()
        .get("www-authenticate")
        .map(|v| v.to_str().unwrap().to_string());
    (status, challenge, r.text().await.unwrap_or_default())
}

async fn bearer(gw: &Gateway, token: &str) -> (u16, Option<String>, String) {
    raw(gw, "/mcp", &[("authorization", &format!("Bearer {token}"))]).await
}

fn invalid_token(description: &str) -> Option<String> {
    Some(format!(
        "Bearer resource_metadata=\"{METADATA_URL}\", error=\"invalid_token\", error_description=\"{description}\""
    ))
}

/// Asserts `token` is refused with the RFC 9728 challenge, not echoed.
async fn assert_refused(gw: &Gateway, token: &str, what: &str) {
    let (status, challenge, body) = bearer(gw, token).await;
    assert_eq!(status, 401, "{what}: {body}");
    assert_eq!(
        challenge,
        invalid_token("the credentials are not valid"),
        "{what}"
    );
    assert!(!body.contains(token), "{what}: the token is echoed");
}

async fn connect_with(url: &str, token: &str) -> Client {
    connect_as(url, ProtocolVersion::V_2025_11_25, Some(token)).await
}

async fn names(client: &Client) -> Vec<String> {
    let tools = tokio::time::timeout(WAIT, client.list_all_tools())
        .await
        .expect("timed out listing tools")
        .expect("tools/list answers");
    tools.into_iter().map(|t| t.name.to_string()).collect()
}

#[tokio::test]
async fn a_valid_token_lists_and_calls_tools_on_both_endpoints() {
    let (idp, up) = (Idp::start().await, TestUpstream::start().await);
    let gw = gateway_with(&up, &jwt_yaml(&idp, "")).await;
    for alg in [Alg::Rs256, Alg::Ps256, Alg::Es256, Alg::EdDsa] {
        let token = idp.token().aud(AUDIENCE).alg(alg).mint();
        let client = connect_with(&format!("{}/mcp", gw.url), &token).await;
        assert!(names(&client).await.contains(&"pets__get_pet".to_string()));
        let r = call(&client, "pets__get_pet", json!({"id": "7"})).await;
        assert!(!is_error(&r), "{alg:?}: {}", text(&r));
    }
    let token = idp.token().aud("other").mint();
    let scoped = connect_with(&format!("{}/mcp/other", gw.url), &token).await;
    assert_eq!(names(&scoped).await, ["other__ping"]);
    // Discovery once, keys once: every later token used the cache.
    assert_eq!((idp.discovery_fetches(), idp.jwks_fetches()), (1, 1));
    assert_eq!(up.last().header("authorization"), None);
}

#[tokio::test]
async fn refused_credentials_get_401_with_the_rfc9728_challenge() {
    let (idp, up) = (Idp::start().await, TestUpstream::start().await);
    let gw = gateway_with(&up, &jwt_yaml(&idp, "")).await;
    let good = idp.token().aud(AUDIENCE);

    let (status, challenge, _) = raw(&gw, "/mcp", &[]).await;
    assert_eq!(status, 401);
    assert_eq!(
        challenge.as_deref(),
        Some(format!("Bearer resource_metadata=\"{METADATA_URL}\"").as_str()),
        "no credentials: no error attribute"
    );
    let (status, _, _) = raw(&gw, "/mcp/pets", &[("authorization", "Basic dTpw")]).await;
    assert_eq!(status, 401, "another scheme is no credential");

    // Refused before any key is fetched.
    assert_refused(&gw, &idp.attack_alg_none(&good), "alg none").await;
    assert_refused(
        &gw,
        &idp.attack_hs256_with_public_key(&good),
        "HS256 with the public key",
    )
    .await;
    assert_refused(
        &gw,
        &good.clone().iss("https://evil.example.com").mint(),
        "wrong issuer",
    )
    .await;
    assert_eq!(
        idp.jwks_fetches(),
        0,
        "attack tokens made the gateway fetch keys"
    );

    assert_refused(
        &gw,
        &idp.token().aud("someone-else").mint(),
        "wrong audience",
    )
    .await;
    assert_refused(&gw, &idp.token().mint(), "no audience").await;
    assert_refused(&gw, &good.clone().no_sub().mint(), "no subject").await;
    assert_refused(&gw, "not-a-jwt-nor-a-key", "opaque, no introspection").await;
    let (status, challenge, _) = bearer(&gw, &good.clone().expired().mint()).await;
    assert_eq!(status, 401);
    assert_eq!(challenge, invalid_token("the access token expired"));
    let long = "a".repeat(gateway::identity::inbound::MAX_TOKEN_BYTES + 1);
    let (status, _, _) = bearer(&gw, &long).await;
    assert_eq!(status, 401);

    // The scoped endpoint refuses alike, before saying whether the prefix exists.
    for path in ["/mcp/pets", "/mcp/nonexistent"] {
        let (status, challenge, _) = raw(&gw, path, &[]).await;
        assert_eq!((status, challenge.is_some()), (401, true), "{path}");
    }
    assert_eq!(bearer(&gw, &good.mint()).await.0, 200);
    assert_eq!(up.count(), 0);

    // The challenge's metadata URL (here reached without the ingress).
    let expected = json!({
        "resource": RESOURCE,
        "authorization_servers": [idp.issuer()],
        "scopes_supported": ["pets.read"],
        "bearer_methods_supported": ["header"],
    });
    for path in [
        "/.well-known/oauth-protected-resource/mcp",
        "/.well-known/oauth-protected-resource",
    ] {
        let r = reqwest::get(format!("{}{path}", gw.url)).await.unwrap();
        assert_eq!(r.status(), 200, "{path}");
        assert_eq!(r.json::<Value>().await.unwrap(), expected, "{path}");
    }
}

#[tokio::test]
async fn an_unknown_kid_makes_one_jwks_refetch_per_interval() {
    let (idp, up) = (Idp::start().await, TestUpstream::start().await);
    let yaml = format!("{}      jwksUrl: {}\n", jwt_yaml(&idp, ""), idp.jwks_url());
    let gw = gateway_with(&up, &yaml).await;
    assert_eq!(bearer(&gw, &idp.token().aud(AUDIENCE).mint()).await.0, 200);
    assert_eq!((idp.discovery_fetches(), idp.jwks_fetches()), (0, 1));
    for _ in 0..3 {
        let t = idp.token().aud(AUDIENCE).kid("made-up").mint();
        assert_refused(&gw, &t, "unknown kid").await;
    }
    assert_eq!(idp.jwks_fetches(), 2, "one refetch for three unknown kids");
}

/// Keys that cannot be fetched are not the token's fault: 503, and the
/// retry waits out the refetch interval (no fetch per request).
#[tokio::test]
async fn an_unreachable_jwks_answers_503_not_401() {
    let (idp, up) = (Idp::start().await, TestUpstream::start().await);
    let yaml = format!(
        "{}      jwksUrl: http://127.0.0.1:9/jwks\n",
        jwt_yaml(&idp, "")
    );
    let gw = gateway_with(&up, &yaml).await;
    for _ in 0..2 {
        let (status, challenge, _) = bearer(&gw, &idp.token().aud(AUDIENCE).mint()).await;
        assert_eq!((status, challenge), (503, None));
    }
}

#[tokio::test]
async fn a_key_rotated_at_the_idp_is_picked_up_without_restart() {
    let (idp, up) = (Idp::start().await, TestUpstream::start().await);
    let gw = gateway_with(&up, &jwt_yaml(&idp, "")).await;
    let old = idp.token().aud(AUDIENCE).mint();
    let client = connect_with(&format!("{}/mcp", gw.url), &old).await;
    assert!(!names(&client).await.is_empty());
    idp.rotate_key();
    let new = idp.token().aud(AUDIENCE).subject("bob").mint();
    let client = connect_with(&format!("{}/mcp", gw.url), &new).await;
    let r = call(&client, "pets__get_pet", json!({"id": "1"})).await;
    assert!(!is_error(&r), "{}", text(&r));
    assert_eq!(idp.jwks_fetches(), 2);
    assert_refused(&gw, &old, "a token of the retired key").await;
}

#[tokio::test]
async fn api_keys_rotate_by_rewriting_the_file() {
    let up = TestUpstream::start().await;
    let dir = tempdir("inbound-api-keys");
    kubelet_publish(
        &dir,
        1,
        "keys.yaml",
        format!("ci-bot: {KEY_1}\n").as_bytes(),
    );
    let yaml = format!(
        "inbound:\n  resource: {RESOURCE}\n  apiKeys: {{file: {}}}\n",
        dir.join("keys.yaml").display()
    );
    let gw = gateway_with(&up, &yaml).await;
    let client = connect_with(&format!("{}/mcp", gw.url), KEY_1).await;
    let r = call(&client, "pets__get_pet", json!({"id": "1"})).await;
    assert!(!is_error(&r), "{}", text(&r));
    assert_eq!(raw(&gw, "/mcp", &[("x-api-key", KEY_1)]).await.0, 200);
    assert_refused(&gw, KEY_2, "a key not in the file").await;
    let (status, challenge, _) = raw(&gw, "/mcp", &[("x-api-key", KEY_2)]).await;
    assert_eq!(
        (status, challenge),
        (401, invalid_token("the credentials are not valid"))
    );

    kubelet_publish(
        &dir,
        2,
        "keys.yaml",
        format!("ci-bot:\n  key: {KEY_2}\n  scopes: [pets.read]\n").as_bytes(),
    );
    until("the old key to be refused", || async {
        bearer(&gw, KEY_1).await.0 == 401
    })
    .await;
    let client = connect_with(&format!("{}/mcp/pets", gw.url), KEY_2).await;
    assert!(!names(&client).await.is_empty());
}

#[tokio::test]
async fn introspection_decides_opaque_tokens_and_is_cached() {
    let (idp, up) = (Idp::start().await, TestUpstream::start().await);
    let dir = tempdir("inbound-introspection");
    std::fs::write(dir.join("secret"), format!("{CLIENT_SECRET}\n")).unwrap();
    let yaml = format!(
        "inbound:\n  resource: {RESOURCE}\n  introspection:\n    url: {}\n    clientId: {CLIENT_ID}\n    clientSecret: {{file: {}}}\n",
        idp.introspection_url(),
        dir.join("secret").display()
    );
    let gw = gateway_with(&up, &yaml).await;
    let token = idp.opaque().subject("dave").scope("pets.read").issue();
    let client = connect_with(&format!("{}/mcp", gw.url), &token).await;
    let r = call(&client, "pets__get_pet", json!({"id": "1"})).await;
    assert!(!is_error(&r), "{}", text(&r));
    assert_eq!(bearer(&gw, &token).await.0, 200);
    let asked: Vec<_> = idp
        .introspections()
        .into_iter()
        .map(|i| (i.token, i.active))
        .collect();
    assert_eq!(
        asked,
        [(token.clone(), true)],
        "one introspection for all those requests"
    );

    let revoked = idp.opaque().issue();
    idp.revoke(&revoked);
    assert_refused(&gw, &revoked, "revoked").await;
    assert_refused(&gw, "never-issued-token", "unknown").await;
    // A JWT of an issuer not configured is introspected too (and refused).
    assert_refused(&gw, &idp.token().aud(AUDIENCE).mint(), "JWT, no jwt issuer").await;
    assert_refused(&gw, &revoked, "revoked, cached").await;
    assert_eq!(idp.introspections().len(), 4);

    idp.fail_introspection(Some(http::StatusCode::INTERNAL_SERVER_ERROR));
    let (status, challenge, _) = bearer(&gw, &idp.opaque().issue()).await;
    assert_eq!(
        (status, challenge),
        (503, None),
        "an IdP outage is not the token's fault"
    );
}

#[tokio::test]
async fn probes_and_metadata_stay_open_and_status_needs_credentials() {
    let (idp, up) = (Idp::start().await, TestUpstream::start().await);
    let gw = gateway_with(&up, &jwt_yaml(&idp, "")).await;
    let get = |path: &str, token: Option<String>| {
        let mut r = reqwest::Client::new().get(format!("{}{path}", gw.url));
        if let Some(t) = token {
            r = r.bearer_auth(t);
        }
        async move { r.send().await.unwrap().status().as_u16() }
    };
    assert_eq!(get("/healthz", None).await, 200);
    assert_eq!(get("/readyz", None).await, 200);
    assert_eq!(
        get("/.well-known/oauth-protected-resource/mcp", None).await,
        200
    );
    assert_eq!(get("/status", None).await, 401);
    assert_eq!(
        get("/status", Some(idp.token().aud(AUDIENCE).mint())).await,
        200
    );
}

#[tokio::test]
async fn without_inbound_the_gateway_stays_open_and_has_no_metadata() {
    let up = TestUpstream::start().await;
    let gw = start_gateway(&default_catalog(), config_for(&up.url, "")).await;
    assert_eq!(raw(&gw, "/mcp", &[]).await.0, 200);
    let r = reqwest::get(format!("{}/.well-known/oauth-protected-resource", gw.url))
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
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

// ---- the real binary ------------------------------------------------------

/// `toolgate serve` with `args`, everything it writes kept.
struct Logged {
    child: std::process::Child,
    url: String,
    log: Arc<Mutex<String>>,
    readers: Vec<std::thread::JoinHandle<()>>,
}

fn serve_logged(args: &[&str]) -> Logged {
    let mut child = Command::new(env!("CARGO_BIN_EXE_toolgate"))
        .arg("serve")
        .args(["--listen", "127.0.0.1:0", "--poll-interval-ms", "50"])
        .args(args)
        .env("TOOLGATE_METRICS_ADDR", "off")
        .env("RUST_LOG", "debug")
        .env_remove("TOOLGATE_LOG_FORMAT")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("toolgate starts");
    let log = Arc::new(Mutex::new(String::new()));
    let (tx, rx) = std::sync::mpsc::channel();
    let mut readers = Vec::new();
    let out: Box<dyn std::io::Read + Send> = Box::new(child.stdout.take().unwrap());
    let err: Box<dyn std::io::Read + Send> = Box::new(child.stderr.take().unwrap());
    for stream in [out, err] {
        let (log, tx) = (log.clone(), tx.clone());
        readers.push(std::thread::spawn(move || {
            for line in BufReader::new(stream).lines().map_while(Result::ok) {
                if let Some(i) = line.find("at http://") {
                    let url = line[i + 3..].split_whitespace().next().unwrap_or("");
                    let _ = tx.send(url.trim_end_matches("/mcp").to_string());
                }
                let mut l = log.lock().unwrap();
                l.push_str(&line);
                l.push('\n');
            }
        }));
    }
    let url = rx
        .recv_timeout(WAIT)
        .unwrap_or_else(|_| panic!("toolgate printed no URL:\n{}", log.lock().unwrap()));
    Logged {
        child,
        url,
        log,
        readers,
    }
}

impl Logged {
    /// SIGTERM; everything it wrote, once it exited.
    fn stop(mut self) -> String {
        let pid = self.child.id().to_string();
        let _ = Command::new("kill").args(["-TERM", &pid]).status();
        let status = self.child.wait().expect("toolgate exits");
        for r in self.readers {
            let _ = r.join();
        }
        let log = self.log.lock().unwrap().clone();
        assert!(status.success(), "toolgate exited with {status:?}:\n{log}");
        log
    }
}

/// Secret values a test used, each with what it is.
#[derive(Default)]
struct Secrets(Vec<(String, String)>);

impl Secrets {
    fn add(&mut self, what: &str, value: &str) {
        self.0.push((what.to_string(), value.to_string()));
        // A JWT's header and claims are shared with other tokens; its
        // signature is what only this token has.
        if let Some(sig) = value
            .rsplit('.')
            .next()
            .filter(|s| s.len() >= 16 && value.matches('.').count() == 2)
        {
            self.0
                .push((format!("{what} (signature)"), sig.to_string()));
        }
    }

    fn assert_not_in(&self, log: &str) {
        for (what, value) in &self.0 {
            assert!(!log.contains(value.as_str()), "{what} appears in the log");
        }
    }
}

/// Runs the binary at debug level with every method on, authenticates
/// successfully and not with each, and greps all it wrote for the
/// secrets. Add other secrets a feature uses (upstream credentials,
/// exchanged tokens) to `secrets` and drive the feature before `stop`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secrets_never_appear_in_the_logs() {
    let (idp, up) = (Idp::start().await, TestUpstream::start().await);
    let dir = tempdir("inbound-secrets");
    let (catalog, _) = write_slow_catalog_files(&dir, &up.url);
    std::fs::write(dir.join("secret"), CLIENT_SECRET).unwrap();
    const UPSTREAM_TOKEN: &str = "upstream-credential-5b1e0c7d9a";
    std::fs::write(dir.join("upstream-token"), UPSTREAM_TOKEN).unwrap();
    std::fs::write(dir.join("keys.yaml"), format!("ci-bot: {KEY_1}\n")).unwrap();
    let config = dir.join("gateway.yaml");
    std::fs::write(
        &config,
        format!(
            "{}  apiKeys: {{file: {keys}}}\n  introspection:\n    url: {}\n    clientId: {CLIENT_ID}\n    clientSecret: {{file: {secret}}}\nupstreams:\n  pets: {{baseUrl: '{up}', auth: {{type: bearer, token: {{file: {upstream_token}}}}}}}\n  other: {{baseUrl: '{up}', auth: {{type: tokenExchange, tokenUrl: '{}', audience: other-api, clientId: {{value: {CLIENT_ID}}}, clientSecret: {{file: {secret}}}}}}}\n",
            jwt_yaml(&idp, ""),
            idp.introspection_url(),
            idp.token_url(),
            upstream_token = dir.join("upstream-token").display(),
            keys = dir.join("keys.yaml").display(),
            secret = dir.join("secret").display(),
            up = up.url,
        ),
    )
    .unwrap();
    let served = serve_logged(&[
        "--catalog",
        catalog.to_str().unwrap(),
        "--config",
        config.to_str().unwrap(),
    ]);
    let gw_url = format!("{}/mcp", served.url);
    let mut secrets = Secrets::default();
    secrets.add("introspection client secret", CLIENT_SECRET);
    secrets.add("upstream credential", UPSTREAM_TOKEN);

    let jwt = idp.token().aud(AUDIENCE).mint();
    let opaque = idp.opaque().issue();
    for (what, good) in [
        ("API key", KEY_1),
        ("JWT", jwt.as_str()),
        ("opaque token", opaque.as_str()),
    ] {
        secrets.add(what, good);
        let client = connect_with(&gw_url, good).await;
        let r = call(&client, "pets__get_pet", json!({"id": "1"})).await;
        assert!(!is_error(&r), "{what}: {}", text(&r));
    }
    // The upstream got the gateway's credential; `other` gets the
    // caller's token exchanged (both secrets too).
    assert_eq!(
        up.last().header("authorization"),
        Some(format!("Bearer {UPSTREAM_TOKEN}").as_str())
    );
    let client = connect_with(&gw_url, &jwt).await;
    let r = call(&client, "other__ping", json!({})).await;
    assert!(!is_error(&r), "token exchange: {}", text(&r));
    let exchanged = idp
        .exchanges()
        .last()
        .and_then(|x| x.issued.clone())
        .expect("the IdP issued a token");
    assert_eq!(
        up.last().header("authorization"),
        Some(format!("Bearer {exchanged}").as_str())
    );
    secrets.add("exchanged token", &exchanged);
    let refused = [
        ("unknown API key", KEY_2.to_string()),
        ("expired JWT", idp.token().aud(AUDIENCE).expired().mint()),
        (
            "JWT of an unknown kid",
            idp.token().aud(AUDIENCE).kid("nope").mint(),
        ),
        (
            "unknown opaque token",
            "opaque-never-issued-3f9a2c".to_string(),
        ),
    ];
    for (what, bad) in &refused {
        secrets.add(what, bad);
        let r = reqwest::Client::new()
            .post(&gw_url)
            .bearer_auth(bad)
            .header("content-type", "application/json")
            .body("{}")
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 401, "{what}");
    }
    let log = served.stop();
    assert!(
        log.contains("credentials refused"),
        "debug logging is on:\n{log}"
    );
    secrets.assert_not_in(&log);
}

#[test]
fn serve_refuses_an_invalid_inbound_section_naming_the_field() {
    let dir = tempdir("inbound-invalid");
    let cases = [
        (
            "inbound:\n  resource: https://x/mcp\n  jwt: [{issuer: 'https://idp', audiences: []}]\n",
            &["--catalog", "c.json"][..],
            "inbound.jwt[0].audiences",
        ),
        (
            "inbound:\n  jwt: [{issuer: 'https://idp', audiences: [a]}]\n",
            &["--catalog", "c.json"][..],
            "inbound.resource",
        ),
        (
            "inbound:\n  resource: https://x/mcp\n  apiKeys: {file: /nonexistent/keys.yaml}\n",
            &["--catalog", "c.json"][..],
            "inbound.apiKeys.file",
        ),
        ("inbound: {}\nupstreams: {}\n", &["--kube"][..], "upstreams"),
    ];
    for (i, (yaml, args, field)) in cases.iter().enumerate() {
        let config = dir.join(format!("gateway-{i}.yaml"));
        std::fs::write(&config, yaml).unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_toolgate"))
            .current_dir(&dir)
            .args(["serve", "--listen", "127.0.0.1:0", "--config"])
            .arg(&config)
            .args(*args)
            .env_remove("POD_NAMESPACE")
            .output()
            .expect("toolgate runs");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{yaml}: started");
        assert!(stderr.contains(field), "{yaml}: {stderr}");
    }
}
