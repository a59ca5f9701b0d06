//! Access rules per upstream, as a real MCP client over HTTP sees them:
//! `tools/list` shows exactly the granted tools, `tools/call` refuses the
//! others exactly like an unknown tool, on `/mcp` and `/mcp/{prefix}`.
//!
//! Callers are anonymous here (the gateway in open mode). [`Caller`] is
//! the seam for identities: once inbound authentication lands, a test
//! passes its `Authorization` header and the same helpers apply.

use std::collections::BTreeSet;

use catalog::access::DefaultAccess;
use catalog::Catalog;
use gateway::config::GatewayConfig;
use gateway::serving::snapshot::Provenance;
use gateway::EdgeOptions;
use rmcp::model::{ErrorCode, ProtocolVersion, SubscriptionFilter};
use rmcp::service::ClientServiceExt;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::ServiceExt;
use serde_json::json;

use crate::support::*;
use crate::upstream::TestUpstream;

/// Who calls: the request headers that identify it. Empty: anonymous.
#[derive(Debug, Clone, Default)]
pub struct Caller {
    pub headers: Vec<(String, String)>,
}

impl Caller {
    pub fn anonymous() -> Self {
        Caller::default()
    }
}

/// An MCP client (2025-11-25, with a session) sending `caller`'s headers
/// on every request.
pub async fn connect_caller(url: &str, caller: &Caller) -> Client {
    connect_caller_as(url, caller, ProtocolVersion::V_2025_11_25).await
}

async fn connect_caller_as(url: &str, caller: &Caller, version: ProtocolVersion) -> Client {
    gateway::net::install_crypto_provider();
    let mut cfg = StreamableHttpClientTransportConfig::with_uri(url.to_string());
    for (k, v) in &caller.headers {
        cfg.custom_headers.insert(
            k.parse().expect("header name"),
            v.parse().expect("header value"),
        );
    }
    let transport = StreamableHttpClientTransport::from_config(cfg);
    let client = if version == ProtocolVersion::V_2026_07_28 {
        tokio::time::timeout(
            WAIT,
            Recorder::new(version).serve_with_lifecycle(
                transport,
                rmcp::service::ClientLifecycleMode::Discover {
                    preferred_versions: vec![ProtocolVersion::V_2026_07_28],
                },
            ),
        )
        .await
    } else {
        tokio::time::timeout(WAIT, Recorder::new(version).serve(transport)).await
    };
    client
        .expect("timed out connecting the MCP client")
        .expect("MCP client connects")
}

/// `pets`: two read-only GETs, a POST and a DELETE; `other`: one GET.
fn access_catalog() -> Catalog {
    let empty = json!({"type": "object", "properties": {}, "additionalProperties": false});
    let t = |name: &str, method: &str, path: &str, annotations: serde_json::Value| {
        tool(
            name,
            method,
            path,
            empty.clone(),
            json!([]),
            json!({ "annotations": annotations }),
        )
    };
    catalog_of(vec![
        upstream(
            "pets",
            vec![
                t(
                    "pets__get_pet",
                    "GET",
                    "/pets/7",
                    json!({"readOnlyHint": true}),
                ),
                t(
                    "pets__list_pets",
                    "GET",
                    "/pets/7",
                    json!({"readOnlyHint": true}),
                ),
                t("pets__create_pet", "POST", "/pets/7", json!({})),
                t(
                    "pets__delete_pet",
                    "DELETE",
                    "/empty",
                    json!({"readOnlyHint": false, "destructiveHint": true}),
                ),
            ],
        ),
        upstream(
            "other",
            vec![t(
                "other__ping",
                "GET",
                "/pets/7",
                json!({"readOnlyHint": true}),
            )],
        ),
    ])
}

/// The config for `up` with `rules` (YAML flow sequence) as the `pets`
/// upstream's access rules; `None`: no policy.
fn config(up: &TestUpstream, rules: Option<&str>) -> GatewayConfig {
    let access = match rules {
        Some(r) => format!("    access:\n      rules: {r}\n"),
        None => String::new(),
    };
    config_for(&up.url, access.trim_end())
}

async fn names(client: &Client) -> BTreeSet<String> {
    client
        .list_all_tools()
        .await
        .expect("tools/list")
        .iter()
        .map(|t| t.name.to_string())
        .collect()
}

fn set(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|s| s.to_string()).collect()
}

/// Calling `name` fails exactly as calling a tool that does not exist.
async fn refused_like_unknown(client: &Client, name: &str) {
    let err = |r: Result<rmcp::model::CallToolResult, rmcp::ServiceError>| match r {
        Err(rmcp::ServiceError::McpError(e)) => e,
        other => panic!("{name}: expected an MCP error, got {other:?}"),
    };
    let denied = err(try_call(client, name, json!({})).await);
    let unknown_name = format!("{name}_that_does_not_exist");
    let unknown = err(try_call(client, &unknown_name, json!({})).await);
    assert_eq!(denied.code, ErrorCode::INVALID_PARAMS, "{denied:?}");
    assert_eq!(denied.code, unknown.code);
    assert_eq!(
        denied.message.replace(name, "NAME"),
        unknown.message.replace(&unknown_name, "NAME"),
    );
    assert_eq!(denied.data, unknown.data);
}

#[tokio::test]
async fn a_rule_needing_a_scope_hides_and_refuses_its_tools_from_anonymous_callers() {
    let up = TestUpstream::start().await;
    let rules = r#"[{scopes: [pets.write], tools: ["create_*", "delete_*"]}, {tools: ["get_*", "list_?ets"]}]"#;
    let gw = start_gateway(&access_catalog(), config(&up, Some(rules))).await;
    let anon = Caller::anonymous();

    let all = connect_caller(&format!("{}/mcp", gw.url), &anon).await;
    assert_eq!(
        names(&all).await,
        set(&["pets__get_pet", "pets__list_pets", "other__ping"])
    );
    let scoped = connect_caller(&format!("{}/mcp/pets", gw.url), &anon).await;
    assert_eq!(
        names(&scoped).await,
        set(&["pets__get_pet", "pets__list_pets"])
    );
    let before = up.count();
    for client in [&all, &scoped] {
        refused_like_unknown(client, "pets__create_pet").await;
        refused_like_unknown(client, "pets__delete_pet").await;
        let r = call(client, "pets__get_pet", json!({})).await;
        assert!(!is_error(&r), "{}", text(&r));
    }
    // Only the two granted calls reached the upstream.
    assert_eq!(up.count(), before + 2);
}

#[tokio::test]
async fn a_read_only_rule_shows_get_tools_and_hides_and_refuses_a_delete() {
    let up = TestUpstream::start().await;
    let gw = start_gateway(&access_catalog(), config(&up, Some("[{readOnly: true}]"))).await;
    let anon = Caller::anonymous();
    for path in ["/mcp", "/mcp/pets"] {
        let client = connect_caller(&format!("{}{path}", gw.url), &anon).await;
        let seen = names(&client).await;
        assert!(
            seen.contains("pets__get_pet") && seen.contains("pets__list_pets"),
            "{seen:?}"
        );
        assert!(!seen.contains("pets__delete_pet"), "{seen:?}");
        assert!(!seen.contains("pets__create_pet"), "{seen:?}");
        refused_like_unknown(&client, "pets__delete_pet").await;
    }
    assert!(up.requests().iter().all(|r| r.method != "DELETE"));
}

#[tokio::test]
async fn default_deny_hides_upstreams_without_a_policy() {
    let up = TestUpstream::start().await;
    let edge = EdgeOptions {
        default_access: DefaultAccess::Deny,
        ..EdgeOptions::default()
    };
    let gw = start_gateway_with(
        &access_catalog(),
        config(&up, Some(r#"[{tools: ["get_pet"]}]"#)),
        edge,
    )
    .await;
    let anon = Caller::anonymous();
    let all = connect_caller(&format!("{}/mcp", gw.url), &anon).await;
    assert_eq!(names(&all).await, set(&["pets__get_pet"]));
    refused_like_unknown(&all, "other__ping").await;
    // `/mcp/other` answers like an unknown prefix (404): `leaks.rs`.
    let hidden = reqwest::get(format!("{}/mcp/other", gw.url)).await.unwrap();
    assert_eq!(hidden.status(), 404);
}

#[tokio::test]
async fn pages_hold_only_granted_tools_and_cursors_follow_them() {
    let up = TestUpstream::start().await;
    let mut tools = Vec::new();
    for i in 0..7 {
        let (method, ro) = if i % 2 == 0 {
            ("GET", true)
        } else {
            ("DELETE", false)
        };
        tools.push(tool(
            &format!("pets__t{i}"),
            method,
            "/pets/7",
            json!({"type": "object"}),
            json!([]),
            json!({"annotations": {"readOnlyHint": ro}}),
        ));
    }
    let cat = catalog_of(vec![
        upstream("pets", tools),
        upstream("other", other_tools()),
    ]);
    let edge = EdgeOptions {
        page_size: 2,
        ..EdgeOptions::default()
    };
    let gw = start_gateway_with(&cat, config(&up, Some("[{readOnly: true}]")), edge).await;
    let client = connect_caller(&format!("{}/mcp/pets", gw.url), &Caller::anonymous()).await;
    let mut seen = Vec::new();
    let mut cursor = None;
    loop {
        let mut p = rmcp::model::PaginatedRequestParams::default();
        p.cursor = cursor;
        let page = client.list_tools(Some(p)).await.expect("page");
        assert!(page.tools.len() <= 2);
        seen.extend(page.tools.iter().map(|t| t.name.to_string()));
        match page.next_cursor {
            Some(c) => cursor = Some(c),
            None => break,
        }
    }
    assert_eq!(seen, ["pets__t0", "pets__t2", "pets__t4", "pets__t6"]);
}

#[tokio::test]
async fn a_rule_that_does_not_compile_keeps_the_previous_version_served() {
    let up = TestUpstream::start().await;
    let good = config(&up, Some("[{readOnly: true}]"));
    let gw = start_gateway(&access_catalog(), good).await;
    let client = connect_caller(&format!("{}/mcp/pets", gw.url), &Caller::anonymous()).await;
    let before = names(&client).await;
    assert_eq!(before, set(&["pets__get_pet", "pets__list_pets"]));

    // As Kubernetes mode installs: the catalog together with its config.
    let mut bad = config(&up, None);
    bad.upstreams.get_mut("pets").expect("pets").access = Some(
        serde_json::from_value(json!({"rules": [{}, {"when": "claims.groups.exists(g, "}]}))
            .expect("policy"),
    );
    let e = gw
        .store
        .install_with_config(access_catalog(), bad, Provenance::default())
        .expect_err("a bad rule fails the build");
    assert_eq!(e.upstream, "pets");
    assert_eq!(e.field, "upstreams.pets.access.rules[1].when");
    assert!(e.message.starts_with("invalid CEL"), "{}", e.message);
    assert_eq!(names(&client).await, before);
    refused_like_unknown(&client, "pets__delete_pet").await;

    // And from a `--config` file, the gateway refuses to start, naming it.
    let stderr = serve_refusing_rule(&up, "access-bad-config", "subject ==");
    assert!(
        stderr.contains("upstreams.pets.access.rules[0].when: invalid CEL"),
        "{stderr}"
    );
}

/// `toolgate serve` with a `--config` whose pets upstream has the one
/// rule `when`: must refuse to start; returns its stderr.
fn serve_refusing_rule(up: &TestUpstream, name: &str, when: &str) -> String {
    let dir = crate::reload::tempdir(name);
    let (catalog, _) = write_slow_catalog_files(&dir, &up.url);
    let config = dir.join("rules.yaml");
    std::fs::write(
        &config,
        format!("upstreams:\n  pets:\n    access:\n      rules:\n        - when: '{when}'\n"),
    )
    .expect("write config");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_toolgate"))
        .args(["serve", "--listen", "127.0.0.1:0", "--catalog"])
        .arg(&catalog)
        .arg("--config")
        .arg(&config)
        .output()
        .expect("toolgate runs");
    assert!(
        !out.status.success(),
        "the gateway started with when: {when}"
    );
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The attack of issue 26: rules inside every syntactic bound whose
/// evaluation built gigabytes (the 3.7 KiB one aborted the gateway on the
/// first listing) or burned seconds of CPU per listing (2 KiB).
fn amplifying_rules() -> Vec<String> {
    let zeros = vec!["0"; 900].join(",");
    let small = vec!["0"; 500].join(",");
    vec![
        format!("[{zeros}].map(x, [{zeros}]).map(y, y+y+y+y+y+y+y+y).size() > 0"),
        format!("[{small}].map(x, [{small}]).map(y, y+y+y+y).exists(z, z.size() > 0)"),
    ]
}

#[tokio::test]
async fn a_rule_that_would_build_gigabytes_is_refused_by_its_cost_where_it_is_loaded() {
    let up = TestUpstream::start().await;
    let gw = start_gateway(&access_catalog(), config(&up, Some("[{readOnly: true}]"))).await;
    let client = connect_caller(&format!("{}/mcp", gw.url), &Caller::anonymous()).await;
    let before = names(&client).await;
    assert!(!before.is_empty());

    for rule in amplifying_rules() {
        assert!(rule.len() < 4096, "inside the size bound: {}", rule.len());
        let mut bad = config(&up, None);
        bad.upstreams.get_mut("pets").expect("pets").access =
            Some(serde_json::from_value(json!({"rules": [{"when": rule}]})).expect("policy"));
        let e = gw
            .store
            .install_with_config(access_catalog(), bad, Provenance::default())
            .expect_err("an over-budget rule fails the build");
        assert_eq!(e.field, "upstreams.pets.access.rules[0].when");
        assert!(e.message.contains("over the limit"), "{}", e.message);
        // Nothing was evaluated, nothing changed: the gateway still lists
        // the previous version for every caller.
        assert_eq!(names(&client).await, before);
    }

    // From a `--config` file the gateway refuses to start, naming it.
    let stderr = serve_refusing_rule(&up, "access-costly-config", &amplifying_rules()[0]);
    assert!(
        stderr.contains("upstreams.pets.access.rules[0].when: the expression may"),
        "{stderr}"
    );
}

#[tokio::test]
async fn a_policy_change_that_alters_visibility_sends_list_changed() {
    let up = TestUpstream::start().await;
    let gw = start_gateway(&access_catalog(), config(&up, Some("[{readOnly: true}]"))).await;
    let anon = Caller::anonymous();
    let client = connect_caller_as(
        &format!("{}/mcp/pets", gw.url),
        &anon,
        ProtocolVersion::V_2026_07_28,
    )
    .await;
    let mut sub = tokio::time::timeout(
        WAIT,
        client.listen(SubscriptionFilter::builder().tools_list_changed().build()),
    )
    .await
    .expect("timed out opening subscriptions/listen")
    .expect("listen accepted");
    assert_eq!(
        names(&client).await,
        set(&["pets__get_pet", "pets__list_pets"])
    );

    // Same catalog, a policy that grants the DELETE too.
    let d = gw
        .store
        .install_with_config(
            access_catalog(),
            config(&up, Some(r#"[{readOnly: true}, {tools: ["delete_*"]}]"#)),
            Provenance::default(),
        )
        .expect("installs");
    assert_eq!(d.access, ["pets"]);
    assert!(d.affects(Some("pets")) && d.affects(None));
    assert!(!d.affects(Some("other")));
    let n = tokio::time::timeout(WAIT, sub.next())
        .await
        .expect("timed out waiting for list_changed")
        .expect("subscription open")
        .expect("a notification");
    assert!(
        matches!(
            n,
            rmcp::model::ServerNotification::ToolListChangedNotification(_)
        ),
        "{n:?}"
    );
    assert_eq!(
        names(&client).await,
        set(&["pets__get_pet", "pets__list_pets", "pets__delete_pet"])
    );
    let r = call(&client, "pets__delete_pet", json!({})).await;
    assert!(!is_error(&r), "{}", text(&r));

    // The same policy again changes nothing.
    let d = gw
        .store
        .install_with_config(
            access_catalog(),
            config(&up, Some(r#"[{readOnly: true}, {tools: ["delete_*"]}]"#)),
            Provenance::default(),
        )
        .expect("installs");
    assert!(d.is_empty(), "{d:?}");
}

// ---- with identities: tokens from the test identity provider ----------

/// A gateway trusting `idp`, serving [`access_catalog`] with `rules` on
/// `pets`.
async fn gateway_with_idp(
    idp: &toolgate_tests::idp::Idp,
    up: &TestUpstream,
    rules: &str,
    default_access: &str,
) -> Gateway {
    start_gateway_trusting(
        idp,
        &access_catalog(),
        config(up, Some(rules)),
        default_access,
    )
    .await
}

fn bearer(token: String) -> Caller {
    Caller {
        headers: vec![("authorization".into(), format!("Bearer {token}"))],
    }
}

#[tokio::test]
async fn callers_see_and_call_what_their_scopes_and_groups_grant_on_both_endpoints() {
    let (idp, up) = (
        toolgate_tests::idp::Idp::start().await,
        TestUpstream::start().await,
    );
    let rules = r#"[{scopes: [pets.read], readOnly: true}, {scopes: [pets.write], tools: ["create_*"]}, {when: '"sre" in claims.groups'}]"#;
    let gw = gateway_with_idp(&idp, &up, rules, "deny").await;
    let token = |scope: &str, groups: &[&str]| {
        idp.token()
            .aud("toolgate")
            .scope(scope)
            .groups(groups)
            .mint()
    };
    let reader = bearer(token("pets.read", &["dev"]));
    let writer = bearer(token("pets.read pets.write", &[]));
    let nobody = bearer(token("other.read", &["dev"]));
    let sre = bearer(token("", &["sre"]));

    for path in ["/mcp", "/mcp/pets"] {
        let url = format!("{}{path}", gw.url);
        let r = connect_caller(&url, &reader).await;
        assert_eq!(
            names(&r).await,
            set(&["pets__get_pet", "pets__list_pets"]),
            "{path}: pets.read sees the read-only tools; `other` has no policy and the default is deny"
        );
        refused_like_unknown(&r, "pets__create_pet").await;
        refused_like_unknown(&r, "pets__delete_pet").await;
        let ok = call(&r, "pets__get_pet", json!({})).await;
        assert!(!is_error(&ok), "{}", text(&ok));

        let w = connect_caller(&url, &writer).await;
        assert_eq!(
            names(&w).await,
            set(&["pets__get_pet", "pets__list_pets", "pets__create_pet"])
        );
        refused_like_unknown(&w, "pets__delete_pet").await;

        if path == "/mcp" {
            let n = connect_caller(&url, &nobody).await;
            assert_eq!(names(&n).await, set(&[]), "{path}: no scope, no group");
            refused_like_unknown(&n, "pets__get_pet").await;
        } else {
            // A prefix that grants the caller nothing looks unknown.
            let mut req = reqwest::Client::new()
                .post(&url)
                .header("content-type", "application/json")
                .header("accept", "application/json, text/event-stream");
            for (k, v) in &nobody.headers {
                req = req.header(k.as_str(), v.as_str());
            }
            let init = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;
            let r = req.body(init).send().await.expect("POST");
            assert_eq!(r.status(), 404, "{path}: hidden must look unknown");
        }

        let s = connect_caller(&url, &sre).await;
        assert_eq!(
            names(&s).await,
            set(&[
                "pets__get_pet",
                "pets__list_pets",
                "pets__create_pet",
                "pets__delete_pet"
            ]),
            "{path}: the CEL rule on groups grants everything"
        );
        let del = call(&s, "pets__delete_pet", json!({})).await;
        assert!(!is_error(&del), "{}", text(&del));
    }
    // Only granted calls reached the upstream: two reads, two deletes.
    let methods: Vec<String> = up.requests().iter().map(|r| r.method.clone()).collect();
    assert_eq!(methods.len(), 4, "{methods:?}");
    assert_eq!(methods.iter().filter(|m| *m == "DELETE").count(), 2);

    // `other` has no policy: the default decides.
    let open_default = gateway_with_idp(&idp, &up, "[]", "allow").await;
    let r = connect_caller(&format!("{}/mcp", open_default.url), &nobody).await;
    assert_eq!(
        names(&r).await,
        set(&["other__ping"]),
        "rules: [] is nobody"
    );
}

/// A rule that is cheap for everyday claims but costly for large ones
/// (here ~330K steps at 5 KiB of groups, over what a decision may cost on
/// an async worker) is decided off the workers and remembered: the
/// listing, the prefix endpoint and the call all still decide exactly.
#[tokio::test]
async fn costly_decisions_for_large_claims_are_still_exact() {
    let (idp, up) = (
        toolgate_tests::idp::Idp::start().await,
        TestUpstream::start().await,
    );
    let rules = r#"[{when: 'claims.groups.exists(g, g.startsWith("team-"))'}]"#;
    let gw = gateway_with_idp(&idp, &up, rules, "allow").await;
    // About 5 KiB of groups: within the token size cap, and past the
    // 4 KiB tier where this rule's cost crosses the inline budget.
    let padding: Vec<String> = (0..100).map(|i| format!("{i:0>44}-dev")).collect();
    let token = |extra: &str| {
        let mut groups: Vec<&str> = padding.iter().map(String::as_str).collect();
        groups.push(extra);
        idp.token().aud("toolgate").groups(&groups).mint()
    };
    let member = bearer(token("team-sre"));
    let outsider = bearer(token("ops"));
    let everything = set(&[
        "pets__get_pet",
        "pets__list_pets",
        "pets__create_pet",
        "pets__delete_pet",
        "other__ping",
    ]);

    let url = format!("{}/mcp", gw.url);
    let m = connect_caller(&url, &member).await;
    let o = connect_caller(&url, &outsider).await;
    for round in ["decided", "remembered"] {
        assert_eq!(names(&m).await, everything, "{round}");
        assert_eq!(names(&o).await, set(&["other__ping"]), "{round}");
    }
    let ok = call(&m, "pets__get_pet", json!({})).await;
    assert!(!is_error(&ok), "{}", text(&ok));
    refused_like_unknown(&o, "pets__get_pet").await;

    let scoped = format!("{}/mcp/pets", gw.url);
    let m = connect_caller(&scoped, &member).await;
    assert_eq!(names(&m).await.len(), 4);
    let init = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;
    let mut req = reqwest::Client::new()
        .post(&scoped)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream");
    for (k, v) in &outsider.headers {
        req = req.header(k.as_str(), v.as_str());
    }
    let r = req.body(init).send().await.expect("POST");
    assert_eq!(r.status(), 404, "hidden must look unknown");
    // Only the member's call reached the upstream.
    assert_eq!(up.requests().len(), 1);
}
