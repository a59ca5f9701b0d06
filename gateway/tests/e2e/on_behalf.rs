//! Calls on behalf of a caller, over the wire: a real MCP client sends a
//! token from the test identity provider (`toolgate_tests::idp`), the
//! gateway verifies it, exchanges it at the same IdP (RFC 8693) for the
//! upstream's audience, forwards the verified subject, and counts calls
//! per subject.

use serde_json::json;
use toolgate_tests::idp::{Idp, CLIENT_ID, CLIENT_SECRET};

use crate::support::*;
use crate::upstream::TestUpstream;

const AUDIENCE: &str = "toolgate";

/// A gateway trusting `idp`, with `pets_extra` under `upstreams.pets`.
async fn gateway(idp: &Idp, up: &TestUpstream, pets_extra: &str) -> Gateway {
    start_gateway_trusting(
        idp,
        &default_catalog(),
        config_for(&up.url, pets_extra),
        "allow",
    )
    .await
}

async fn client_of(gw: &Gateway, token: &str) -> Client {
    connect_as(
        &format!("{}/mcp", gw.url),
        rmcp::model::ProtocolVersion::V_2025_11_25,
        Some(token),
    )
    .await
}

#[tokio::test]
async fn the_upstream_receives_a_token_exchanged_at_the_idp_never_the_callers() {
    let (idp, up) = (Idp::start().await, TestUpstream::start().await);
    let extra = format!(
        "    auth: {{type: tokenExchange, tokenUrl: '{}', clientId: {{value: {CLIENT_ID}}}, \
         clientSecret: {{value: {CLIENT_SECRET}}}, audience: pets-api, scopes: [pets.read]}}\n\
         \x20   forwardIdentity: {{header: X-Forwarded-User}}",
        idp.token_url()
    );
    let gw = gateway(&idp, &up, &extra).await;
    let inbound = idp.token().subject("alice").aud(AUDIENCE).mint();
    let client = client_of(&gw, &inbound).await;
    for _ in 0..2 {
        let r = call(&client, "pets__get_pet", json!({"id": "7"})).await;
        assert!(!is_error(&r), "{}", text(&r));
    }

    let exchanges = idp.exchanges();
    assert_eq!(
        exchanges.len(),
        1,
        "the second call reuses the exchanged token"
    );
    let x = &exchanges[0];
    assert_eq!(
        x.subject_token, inbound,
        "the caller's token is what is exchanged"
    );
    assert_eq!(x.audience.as_deref(), Some("pets-api"));
    assert_eq!(x.scope.as_deref(), Some("pets.read"));
    let issued = x.issued.clone().expect("the IdP issued a token");
    assert_ne!(issued, inbound);
    for r in up.requests() {
        assert_eq!(
            r.header("authorization"),
            Some(format!("Bearer {issued}").as_str())
        );
        assert_eq!(r.header("x-forwarded-user"), Some("alice"));
    }
    assert_eq!(up.count(), 2);

    // Another caller: its own exchange, its own subject.
    let bob = idp.token().subject("bob").aud(AUDIENCE).mint();
    let r = call(
        &client_of(&gw, &bob).await,
        "pets__get_pet",
        json!({"id": "8"}),
    )
    .await;
    assert!(!is_error(&r), "{}", text(&r));
    let exchanges = idp.exchanges();
    assert_eq!(exchanges.len(), 2);
    assert_eq!(exchanges[1].subject_token, bob);
    assert_eq!(up.last().header("x-forwarded-user"), Some("bob"));
    assert!(up.requests().iter().all(|r| !r
        .header("authorization")
        .unwrap_or("")
        .contains(&inbound)
        && !r.header("authorization").unwrap_or("").contains(&bob)));
}

#[tokio::test]
async fn each_verified_subject_has_its_own_rate_limit() {
    let (idp, up) = (Idp::start().await, TestUpstream::start().await);
    let gw = gateway(
        &idp,
        &up,
        "    rateLimit: {requestsPerSecond: 0.001, burst: 2}",
    )
    .await;
    let alice = client_of(&gw, &idp.token().subject("alice").aud(AUDIENCE).mint()).await;
    for _ in 0..2 {
        let r = call(&alice, "pets__get_pet", json!({"id": "1"})).await;
        assert!(!is_error(&r), "{}", text(&r));
    }
    let over = call(&alice, "pets__get_pet", json!({"id": "1"})).await;
    assert!(is_error(&over));
    assert!(text(&over).contains("retry in"), "{}", text(&over));
    assert_eq!(up.count(), 2, "the refused call never reached the upstream");

    // Same address, another subject: a bucket of its own. A new token of
    // the same subject is the same caller.
    let bob = client_of(&gw, &idp.token().subject("bob").aud(AUDIENCE).mint()).await;
    let r = call(&bob, "pets__get_pet", json!({"id": "2"})).await;
    assert!(!is_error(&r), "{}", text(&r));
    let alice_again = client_of(&gw, &idp.token().subject("alice").aud(AUDIENCE).mint()).await;
    assert!(is_error(
        &call(&alice_again, "pets__get_pet", json!({"id": "1"})).await
    ));
    assert_eq!(up.count(), 3);
}
