//! A caller is its authentication method + issuer + subject (issue 26,
//! defect 2), over the wire: a gateway trusting two identity providers
//! (`toolgate_tests::idp`) and an API-key file, where the same name —
//! `alice` at both IdPs, `ci-bot` as a JWT subject and as an API key —
//! must be different callers for token exchange, rate limits, access
//! rules, session ownership and forwarded identity.

use rmcp::model::ProtocolVersion;
use serde_json::{json, Value};
use toolgate_tests::idp::{Idp, CLIENT_ID, CLIENT_SECRET};

use crate::support::*;
use crate::upstream::TestUpstream;

const AUDIENCE: &str = "toolgate";
const CI_BOT_KEY: &str = "ci-bot-api-key-0123456789abcdef";

/// A gateway trusting JWTs of `a` and `b` and the API key of `ci-bot`,
/// with `pets` configured by `pets_extra` (indented under it).
async fn gateway(
    a: &Idp,
    b: &Idp,
    up: &TestUpstream,
    pets_extra: &str,
) -> (Gateway, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let keys = dir.path().join("keys.yaml");
    std::fs::write(&keys, format!("ci-bot: {CI_BOT_KEY}\n")).expect("write the key file");
    let file = gateway::config::parse_file(&format!(
        "inbound:\n  resource: https://mcp.example.com/mcp\n  defaultAccess: allow\n  \
         apiKeys: {{file: {}}}\n  jwt:\n    - issuer: {}\n      audiences: [{AUDIENCE}]\n    \
         - issuer: {}\n      audiences: [{AUDIENCE}]\n",
        keys.display(),
        a.issuer(),
        b.issuer(),
    ))
    .expect("fixture inbound config parses");
    let inbound =
        gateway::identity::inbound::Inbound::from_config(&file.inbound, Default::default())
            .await
            .expect("fixture inbound config is valid");
    let edge = gateway::EdgeOptions {
        inbound,
        default_access: file.inbound.default_access,
        ..gateway::EdgeOptions::default()
    };
    let gw = start_gateway_with(&default_catalog(), config_for(&up.url, pets_extra), edge).await;
    (gw, dir)
}

async fn client_of(gw: &Gateway, credential: &str) -> Client {
    connect_as(
        &format!("{}/mcp", gw.url),
        ProtocolVersion::V_2025_11_25,
        Some(credential),
    )
    .await
}

const FORWARD: &str =
    "    forwardIdentity: {header: X-Forwarded-User, issuerHeader: X-Forwarded-Issuer}";

#[tokio::test]
async fn the_same_subject_at_another_issuer_never_gets_the_first_ones_exchanged_token() {
    let (a, b, up) = (
        Idp::start().await,
        Idp::start().await,
        TestUpstream::start().await,
    );
    let extra = format!(
        "    auth: {{type: tokenExchange, tokenUrl: '{}', clientId: {{value: {CLIENT_ID}}}, \
         clientSecret: {{value: {CLIENT_SECRET}}}, audience: pets-api}}\n{FORWARD}",
        a.token_url()
    );
    let (gw, _dir) = gateway(&a, &b, &up, &extra).await;

    let alice_a = a.token().subject("alice").aud(AUDIENCE).mint();
    let r = call(
        &client_of(&gw, &alice_a).await,
        "pets__get_pet",
        json!({"id": "1"}),
    )
    .await;
    assert!(!is_error(&r), "{}", text(&r));
    let issued = a.exchanges()[0].issued.clone().expect("A issued a token");
    let seen = up.last();
    assert_eq!(
        seen.header("authorization"),
        Some(format!("Bearer {issued}").as_str())
    );
    assert_eq!(seen.header("x-forwarded-user"), Some("alice"));
    assert_eq!(seen.header("x-forwarded-issuer"), Some(a.issuer()));

    // alice of B: before the fix the cache answered with A's alice's
    // token and the token endpoint never heard of her. Now the endpoint
    // is asked with B's token, which A (rightly) refuses.
    let alice_b = b.token().subject("alice").aud(AUDIENCE).mint();
    let r = call(
        &client_of(&gw, &alice_b).await,
        "pets__get_pet",
        json!({"id": "2"}),
    )
    .await;
    assert!(is_error(&r), "B's alice was served: {}", text(&r));
    let exchanges = a.exchanges();
    assert_eq!(
        exchanges.len(),
        2,
        "the token endpoint was not asked for B's alice"
    );
    assert_eq!(exchanges[1].subject_token, alice_b);
    assert_eq!(exchanges[1].issued, None);
    assert_eq!(up.count(), 1, "the upstream was called for B's alice");
}

#[tokio::test]
async fn one_name_at_two_issuers_and_as_an_api_key_is_three_callers() {
    let (a, b, up) = (
        Idp::start().await,
        Idp::start().await,
        TestUpstream::start().await,
    );
    // One call each, then nothing for 1000 s. Rules for exactly two of
    // the three `ci-bot`s, as the README says to write them.
    let extra = format!(
        "    rateLimit: {{requestsPerSecond: 0.001, burst: 1}}\n{FORWARD}\n    access:\n      rules:\n        \
         - when: 'method == \"apiKey\" && subject == \"ci-bot\"'\n        \
         - when: 'issuer == \"{}\" && subject == \"ci-bot\"'",
        a.issuer()
    );
    let (gw, _dir) = gateway(&a, &b, &up, &extra).await;
    let jwt_a = client_of(&gw, &a.token().subject("ci-bot").aud(AUDIENCE).mint()).await;
    let jwt_b = client_of(&gw, &b.token().subject("ci-bot").aud(AUDIENCE).mint()).await;
    let key = client_of(&gw, CI_BOT_KEY).await;

    // Access rules: B's ci-bot is granted nothing of `pets`.
    let names = |tools: Vec<rmcp::model::Tool>| -> Vec<String> {
        tools.iter().map(|t| t.name.to_string()).collect()
    };
    let of_b = names(jwt_b.list_all_tools().await.expect("tools/list"));
    assert_eq!(of_b, ["other__ping"], "B's ci-bot sees pets tools");
    assert!(names(jwt_a.list_all_tools().await.expect("tools/list"))
        .contains(&"pets__get_pet".to_string()));
    let refused = try_call(&jwt_b, "pets__get_pet", json!({"id": "1"})).await;
    assert!(
        refused.is_err(),
        "B's ci-bot called pets__get_pet: {refused:?}"
    );

    // Rate limits: A's ci-bot spends its one call; the API key ci-bot
    // still has its own.
    let r = call(&jwt_a, "pets__get_pet", json!({"id": "1"})).await;
    assert!(!is_error(&r), "{}", text(&r));
    assert_eq!(
        (
            up.last().header("x-forwarded-user"),
            up.last().header("x-forwarded-issuer")
        ),
        (Some("ci-bot"), Some(a.issuer()))
    );
    let r = call(&jwt_a, "pets__get_pet", json!({"id": "1"})).await;
    assert!(
        is_error(&r) && text(&r).contains("retry in"),
        "{}",
        text(&r)
    );
    let r = call(&key, "pets__get_pet", json!({"id": "1"})).await;
    assert!(
        !is_error(&r),
        "the API key shares the JWT's bucket: {}",
        text(&r)
    );
    assert_eq!(
        (
            up.last().header("x-forwarded-user"),
            up.last().header("x-forwarded-issuer")
        ),
        (Some("ci-bot"), Some("api-key"))
    );
    assert_eq!(up.count(), 2);
}

/// A raw `POST /mcp` with `credential`: (status, session id).
async fn post(
    gw: &Gateway,
    credential: &str,
    session: Option<&str>,
    body: Value,
) -> (u16, Option<String>) {
    let mut req = reqwest::Client::new()
        .post(format!("{}/mcp", gw.url))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("authorization", format!("Bearer {credential}"))
        .body(body.to_string());
    if let Some(s) = session {
        req = req
            .header("mcp-session-id", s)
            .header("mcp-protocol-version", "2025-11-25");
    }
    let r = req.send().await.expect("the gateway answers");
    let sid = r
        .headers()
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    (r.status().as_u16(), sid)
}

#[tokio::test]
async fn a_session_of_alice_at_one_issuer_is_unknown_to_alice_at_another() {
    let (a, b, up) = (
        Idp::start().await,
        Idp::start().await,
        TestUpstream::start().await,
    );
    let (gw, _dir) = gateway(&a, &b, &up, "").await;
    let alice_a = a.token().subject("alice").aud(AUDIENCE).mint();
    let alice_b = b.token().subject("alice").aud(AUDIENCE).mint();
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"}}});
    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"});
    let (status, sid) = post(&gw, &alice_a, None, init).await;
    assert_eq!(status, 200);
    let sid = sid.expect("a session id");
    assert_eq!(post(&gw, &alice_b, Some(&sid), list.clone()).await.0, 404);
    assert_eq!(post(&gw, CI_BOT_KEY, Some(&sid), list.clone()).await.0, 404);
    let renewed = a.token().subject("alice").aud(AUDIENCE).mint();
    assert_eq!(
        post(&gw, &renewed, Some(&sid), list).await.0,
        200,
        "a new token of the same caller keeps its session"
    );
}
