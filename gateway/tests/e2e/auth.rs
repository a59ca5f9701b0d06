use rmcp::model::ProtocolVersion;
use serde_json::json;

use crate::support::*;
use crate::upstream::TestUpstream;

async fn seen_by_upstream(auth_yaml: &str) -> (TestUpstream, Gateway, Client) {
    let up = TestUpstream::start().await;
    let auth_yaml = auth_yaml.replace("TOKEN_URL", &format!("{}/token", up.url));
    let gw = start_gateway(&default_catalog(), config_for(&up.url, &auth_yaml)).await;
    let client = connect(&format!("{}/mcp", gw.url)).await;
    let r = call(&client, "pets__get_pet", json!({"id": "7"})).await;
    assert!(!is_error(&r), "{}", text(&r));
    (up, gw, client)
}

#[tokio::test]
async fn bearer_token_from_env_is_sent() {
    std::env::set_var("TOOLGATE_E2E_BEARER", "s3cret");
    let (up, ..) =
        seen_by_upstream("    auth: {type: bearer, token: {env: TOOLGATE_E2E_BEARER}}").await;
    assert_eq!(up.last().header("authorization"), Some("Bearer s3cret"));
}

#[tokio::test]
async fn api_key_header_from_file_is_sent() {
    let dir = std::env::temp_dir().join(format!("toolgate-e2e-key-{}", std::process::id()));
    std::fs::write(&dir, "k-123\n").unwrap();
    let (up, ..) = seen_by_upstream(&format!(
        "    auth: {{type: apiKey, in: header, name: X-Api-Key, value: {{file: {}}}}}",
        dir.display()
    ))
    .await;
    assert_eq!(up.last().header("x-api-key"), Some("k-123"));
    assert_eq!(up.last().header("authorization"), None);
}

#[tokio::test]
async fn api_key_query_is_sent() {
    let (up, ..) =
        seen_by_upstream("    auth: {type: apiKey, in: query, name: api_key, value: {value: q1}}")
            .await;
    assert_eq!(up.last().query.as_deref(), Some("api_key=q1"));
}

#[tokio::test]
async fn basic_auth_is_sent() {
    let (up, ..) = seen_by_upstream(
        "    auth: {type: basic, username: {value: alice}, password: {value: wonder}}",
    )
    .await;
    // base64("alice:wonder")
    assert_eq!(
        up.last().header("authorization"),
        Some("Basic YWxpY2U6d29uZGVy")
    );
}

#[tokio::test]
async fn oauth2_client_credentials_token_is_fetched_once_and_sent() {
    let (up, _gw, client) = seen_by_upstream(
        "    auth: {type: oauth2ClientCredentials, tokenUrl: TOKEN_URL, clientId: {value: cid}, clientSecret: {value: csec}, scopes: [pets.read]}",
    )
    .await;
    assert_eq!(up.last().header("authorization"), Some("Bearer tok-1"));
    let calls: Vec<_> = (0..5)
        .map(|_| call(&client, "pets__get_pet", json!({"id": "7"})))
        .collect();
    for r in futures::future::join_all(calls).await {
        assert!(!is_error(&r));
    }
    assert_eq!(up.tokens_issued(), 1, "token not cached");
    assert!(up
        .requests()
        .iter()
        .all(|r| r.header("authorization") == Some("Bearer tok-1")));
}

#[tokio::test]
async fn auth_required_false_sends_no_credentials() {
    let (up, _gw, client) =
        seen_by_upstream("    auth: {type: bearer, token: {value: s3cret}}").await;
    call(&client, "pets__public", json!({})).await;
    assert_eq!(up.last().path, "/public");
    assert_eq!(up.last().header("authorization"), None);
}

#[tokio::test]
async fn inbound_authorization_never_reaches_the_upstream() {
    let up = TestUpstream::start().await;
    let gw = start_gateway(&default_catalog(), config_for(&up.url, "")).await;
    let client = connect_as(
        &format!("{}/mcp", gw.url),
        ProtocolVersion::V_2025_11_25,
        Some("inbound-client-secret"),
    )
    .await;
    call(&client, "pets__get_pet", json!({"id": "7"})).await;
    let rec = up.last();
    assert_eq!(rec.header("authorization"), None);
    for (_, v) in rec.headers.iter() {
        assert!(!v.to_str().unwrap_or("").contains("inbound-client-secret"));
    }
}

#[tokio::test]
async fn oauth2_one_refresh_at_a_time_and_refresh_before_expiry() {
    let up = TestUpstream::start().await;
    let cfg = format!(
        "    auth: {{type: oauth2ClientCredentials, tokenUrl: {}/token, clientId: {{value: cid}}, clientSecret: {{value: csec}}, scopes: [short], clientAuth: post}}",
        up.url
    );
    let gw = start_gateway(&default_catalog(), config_for(&up.url, &cfg)).await;
    let client = connect(&format!("{}/mcp", gw.url)).await;
    let calls: Vec<_> = (0..10)
        .map(|_| call(&client, "pets__get_pet", json!({"id": "7"})))
        .collect();
    for r in futures::future::join_all(calls).await {
        assert!(!is_error(&r), "{}", text(&r));
    }
    assert_eq!(
        up.tokens_issued(),
        1,
        "concurrent callers refreshed more than once"
    );
    // The token lives 1 s and is refreshed 10% early.
    tokio::time::sleep(std::time::Duration::from_millis(950)).await;
    call(&client, "pets__get_pet", json!({"id": "7"})).await;
    assert_eq!(up.tokens_issued(), 2);
    assert_eq!(up.last().header("authorization"), Some("Bearer tok-2"));
}

/// A tool whose own parameters share the credential's names, and the raw
/// request tool: a caller's value must never stand in for the key.
fn key_catalog() -> catalog::Catalog {
    let q = |arg: &str, loc: &str| json!({"arg": arg, "name": arg, "in": loc, "style": "form", "explode": true});
    catalog_of(vec![upstream(
        "pets",
        vec![
            tool(
                "pets__search",
                "GET",
                "/search",
                json!({"type": "object", "properties": {
                    "q": {"type": "string"}, "api_key": {"type": "string"},
                    "API_KEY": {"type": "string"}, "X-Api-Key": {"type": "string"}}}),
                json!([q("q", "query"), q("api_key", "query"), q("API_KEY", "query"),
                       {"arg": "X-Api-Key", "name": "X-Api-Key", "in": "header", "style": "simple", "explode": false}]),
                json!({}),
            ),
            tool(
                "pets__api_request",
                "*",
                "/",
                json!({"type": "object", "properties": {"method": {"type": "string"}, "path": {"type": "string"},
                       "query": {"type": "object"}, "headers": {"type": "object"}}, "required": ["method", "path"]}),
                json!([]),
                json!({"plan": {"method": "GET", "path": "/", "raw": true}}),
            ),
        ],
    )])
}

async fn key_gateway(auth_yaml: &str) -> (TestUpstream, Gateway, Client) {
    let up = TestUpstream::start().await;
    let gw = start_gateway(&key_catalog(), config_for(&up.url, auth_yaml)).await;
    let client = connect(&format!("{}/mcp", gw.url)).await;
    (up, gw, client)
}

#[tokio::test]
async fn a_query_api_key_replaces_a_caller_parameter_of_the_same_name() {
    let (up, _gw, client) =
        key_gateway("    auth: {type: apiKey, in: query, name: api_key, value: {value: SECRET}}")
            .await;
    let r = call(
        &client,
        "pets__search",
        json!({"q": "a b", "api_key": "ATTACKER", "API_KEY": "ATTACKER2"}),
    )
    .await;
    assert!(!is_error(&r), "{}", text(&r));
    assert_eq!(up.last().query.as_deref(), Some("q=a%20b&api_key=SECRET"));
    let r = call(
        &client,
        "pets__api_request",
        json!({"method": "GET", "path": "/search", "query": {"api_key": "ATTACKER", "x": "1"}}),
    )
    .await;
    assert!(!is_error(&r), "{}", text(&r));
    assert_eq!(up.last().query.as_deref(), Some("x=1&api_key=SECRET"));
}

#[tokio::test]
async fn a_header_api_key_replaces_a_caller_header_of_the_same_name() {
    let (up, _gw, client) = key_gateway(
        "    auth: {type: apiKey, in: header, name: X-Api-Key, value: {value: SECRET}}",
    )
    .await;
    call(&client, "pets__search", json!({"X-Api-Key": "ATTACKER"})).await;
    let values: Vec<_> = up
        .last()
        .headers
        .get_all("x-api-key")
        .iter()
        .cloned()
        .collect();
    assert_eq!(values, vec!["SECRET"]);
    call(
        &client,
        "pets__api_request",
        json!({"method": "GET", "path": "/search", "headers": {"x-api-key": "ATTACKER"}}),
    )
    .await;
    let values: Vec<_> = up
        .last()
        .headers
        .get_all("x-api-key")
        .iter()
        .cloned()
        .collect();
    assert_eq!(values, vec!["SECRET"]);
}
