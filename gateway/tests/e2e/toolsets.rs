//! McpToolsets end to end: the in-memory Kubernetes API server, the real
//! operator, `toolgate serve --kube` (the real binary) and a real MCP
//! client on `/mcp/toolsets/{namespace}/{name}`, with the demo pet store
//! behind every upstream — driven only through the Kubernetes API.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use crds::{McpToolset, McpUpstream};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams};
use rmcp::model::ProtocolVersion;
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;
use toolgate_tests::apiserver::ApiServerHandle;

use crate::product::ControlPlane;
use crate::reload::Served;
use crate::support::*;

/// Generous: CI runs every test binary at once on two cores.
const WAIT: Duration = Duration::from_secs(60);

struct Cluster {
    /// Kept: dropping it stops the API server.
    _server: ApiServerHandle,
    client: kube::Client,
    operator: CancellationToken,
    gateway: Served,
    /// The demo pet store's API, on loopback.
    api_base: String,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.operator.cancel();
    }
}

impl Cluster {
    async fn start(name: &str) -> Cluster {
        let plane = ControlPlane::start(&["team-a", "team-b"], false).await;
        let gateway = plane.serve_gateway(&format!("toolsets-{name}"), &[]);
        let ControlPlane {
            server,
            client,
            operator,
            api_base,
            ..
        } = plane;
        Cluster {
            _server: server,
            client,
            operator,
            gateway,
            api_base,
        }
    }

    async fn apply<K>(&self, ns: &str, doc: Value)
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
            + Clone
            + serde::de::DeserializeOwned
            + serde::Serialize
            + std::fmt::Debug,
    {
        let name = doc["metadata"]["name"].as_str().expect("name").to_string();
        Api::<K>::namespaced(self.client.clone(), ns)
            .patch(
                &name,
                &PatchParams::apply("kubectl").force(),
                &Patch::Apply(&doc),
            )
            .await
            .unwrap_or_else(|e| panic!("apply {ns}/{name}: {e}"));
    }

    /// The demo pet store's document in ConfigMap `petstore-openapi` of
    /// `ns`, served as upstream `name` with prefix `prefix`.
    async fn pet_store(&self, ns: &str, name: &str, prefix: &str, labels: Value) {
        let document = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../deploy/examples/openapi/petstore.yaml"
        ))
        .expect("the demo document");
        self.apply::<ConfigMap>(
            ns,
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                   "metadata": {"name": "petstore-openapi", "namespace": ns},
                   "data": {"openapi.yaml": document}}),
        )
        .await;
        self.apply::<McpUpstream>(
            ns,
            json!({"apiVersion": "toolgate.dev/v1alpha1", "kind": "McpUpstream",
                   "metadata": {"name": name, "namespace": ns, "labels": labels},
                   "spec": {"toolPrefix": prefix, "baseUrl": self.api_base,
                            "openapi": {"configMapRef": {"name": "petstore-openapi", "key": "openapi.yaml"}}}}),
        )
        .await;
    }

    /// Waits until the Ready condition of `K` `ns/name` has `reason`, for
    /// its current generation.
    async fn wait_reason<K>(&self, ns: &str, name: &str, reason: &str)
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
            + Clone
            + serde::de::DeserializeOwned
            + serde::Serialize
            + std::fmt::Debug,
    {
        let api: Api<K> = Api::namespaced(self.client.clone(), ns);
        let start = Instant::now();
        loop {
            let obj = api.get_opt(name).await.ok().flatten();
            let v = serde_json::to_value(&obj).unwrap_or_default();
            let current = v["status"]["observedGeneration"] == v["metadata"]["generation"];
            let ready = v["status"]["conditions"]
                .as_array()
                .and_then(|cs| cs.iter().find(|c| c["type"] == "Ready"))
                .cloned()
                .unwrap_or_default();
            if current && ready["reason"] == reason {
                return;
            }
            assert!(
                start.elapsed() < WAIT,
                "{ns}/{name} never reached Ready reason {reason}: {ready}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Waits until the gateway's `/status` satisfies `f`.
    async fn wait_status(&self, what: &str, f: impl Fn(&Value) -> bool) -> Value {
        let start = Instant::now();
        loop {
            let status: Value = match reqwest::get(format!("{}/status", self.gateway.url)).await {
                Ok(r) => r.json().await.unwrap_or_default(),
                Err(_) => Value::Null,
            };
            if f(&status) {
                return status;
            }
            assert!(start.elapsed() < WAIT, "{what}: /status is {status}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

async fn names(c: &Client) -> BTreeSet<String> {
    c.list_all_tools()
        .await
        .expect("tools/list")
        .into_iter()
        .map(|t| t.name.to_string())
        .collect()
}

/// Waits for the `n`th list_changed (longer than `Recorder::wait_changes`:
/// this goes through the operator first).
async fn wait_changes(rec: &Recorder, n: usize) {
    tokio::time::timeout(WAIT, async {
        loop {
            let notified = rec.notify.notified();
            if rec.changes() >= n {
                return;
            }
            notified.await;
        }
    })
    .await
    .expect("timed out waiting for tools/list_changed");
}

impl Cluster {
    /// A cluster serving three pet stores, all published: `pets` in
    /// team-a (to select by name), `shop` in team-b labelled
    /// `toolset: {toolset}` (to select by label in another namespace), and
    /// `other` in team-a (one a toolset leaves out).
    async fn with_three_upstreams(toolset: &str) -> Cluster {
        let c = Cluster::start(toolset).await;
        c.pet_store("team-a", "pets", "pets", json!({})).await;
        c.pet_store("team-b", "shop", "shop", json!({"toolset": toolset}))
            .await;
        c.pet_store("team-a", "other", "other", json!({})).await;
        for (ns, name) in [("team-a", "pets"), ("team-b", "shop"), ("team-a", "other")] {
            c.wait_reason::<McpUpstream>(ns, name, "Published").await;
        }
        c
    }
}

fn toolset_status(s: &Value, name: &str) -> Option<Value> {
    s["toolsets"]
        .as_array()?
        .iter()
        .find(|t| t["namespace"] == "team-a" && t["name"] == name)
        .cloned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_toolset_endpoint_serves_its_upstreams_read_only_tools_and_follows_edits() {
    let c = Cluster::with_three_upstreams("readers").await;
    c.apply::<McpToolset>(
        "team-a",
        json!({"apiVersion": "toolgate.dev/v1alpha1", "kind": "McpToolset",
               "metadata": {"name": "readers", "namespace": "team-a"},
               "spec": {"upstreams": [
                            {"name": "pets"},
                            {"selector": {"matchLabels": {"toolset": "readers"}}, "namespaces": ["team-b"]}],
                        "tools": {"readOnly": true}}}),
    )
    .await;
    c.wait_reason::<McpToolset>("team-a", "readers", "Resolved")
        .await;

    // What the toolset should serve, from the whole catalog on `/mcp`.
    let root = connect(&format!("{}/mcp", c.gateway.url)).await;
    let all = root.list_all_tools().await.expect("tools/list");
    let expected: BTreeSet<String> = all
        .iter()
        .filter(|t| t.name.starts_with("pets__") || t.name.starts_with("shop__"))
        .filter(|t| t.annotations.as_ref().and_then(|a| a.read_only_hint) == Some(true))
        .map(|t| t.name.to_string())
        .collect();
    assert!(expected.contains("pets__list_pets") && expected.contains("shop__list_pets"));
    let status = c
        .wait_status("the toolset served", |s| {
            toolset_status(s, "readers").is_some_and(|t| t["tools"] == expected.len())
        })
        .await;
    assert_eq!(
        toolset_status(&status, "readers").expect("listed")["mode"],
        "all"
    );
    // The operator's count is the gateway's.
    let t: McpToolset = Api::namespaced(c.client.clone(), "team-a")
        .get("readers")
        .await
        .expect("toolset");
    assert_eq!(
        t.status.and_then(|s| s.tool_count),
        Some(expected.len() as u32)
    );

    let rec = Recorder::new(ProtocolVersion::V_2025_11_25);
    let url = format!("{}/mcp/toolsets/team-a/readers", c.gateway.url);
    let client = connect_recording(&url, rec.clone()).await;
    assert_eq!(names(&client).await, expected);

    // A call reaches the pet store.
    let r = call(&client, "pets__list_pets", json!({})).await;
    assert!(!is_error(&r), "{}", text(&r));
    assert!(text(&r).contains("\"name\""), "{}", text(&r));
    // A write tool of a selected upstream, and a tool of an upstream it
    // does not select, are unknown here, though `/mcp` serves both.
    for outside in ["pets__create_pet", "other__list_pets"] {
        let e = try_call(&client, outside, json!({"name": "x"}))
            .await
            .expect_err("refused");
        assert!(e.to_string().contains("unknown tool"), "{outside}: {e}");
    }
    let r = call(&root, "other__list_pets", json!({})).await;
    assert!(!is_error(&r), "{}", text(&r));

    // Editing the toolset reaches the session as list_changed.
    c.apply::<McpToolset>(
        "team-a",
        json!({"apiVersion": "toolgate.dev/v1alpha1", "kind": "McpToolset",
               "metadata": {"name": "readers", "namespace": "team-a"},
               "spec": {"upstreams": [
                            {"name": "pets"},
                            {"selector": {"matchLabels": {"toolset": "readers"}}, "namespaces": ["team-b"]}],
                        "tools": {"readOnly": true, "include": ["list_*"]}}}),
    )
    .await;
    wait_changes(&rec, 1).await;
    assert_eq!(
        names(&client).await,
        BTreeSet::from(["pets__list_pets".to_string(), "shop__list_pets".to_string()])
    );

    // An unknown toolset is a 404, after the same checks as `/mcp`.
    let r = reqwest::Client::new()
        .post(format!("{}/mcp/toolsets/team-a/nope", c.gateway.url))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#)
        .send()
        .await
        .expect("answered");
    assert_eq!(r.status(), 404);
    let r = reqwest::Client::new()
        .post(format!("{}/mcp/toolsets/team-a/nope", c.gateway.url))
        .header("host", "evil.example")
        .send()
        .await
        .expect("answered");
    assert_eq!(r.status(), 403, "the Host check comes first");
}

/// The names `search_tools` returns for `query`, best first.
async fn found(client: &Client, query: &str) -> Vec<String> {
    let r = call(client, "search_tools", json!({"query": query, "limit": 50})).await;
    assert!(!is_error(&r), "{}", text(&r));
    let v = r.structured_content.expect("search results are structured");
    v["tools"]
        .as_array()
        .expect("a tools array")
        .iter()
        .map(|t| t["name"].as_str().expect("a name").to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_search_mode_toolset_finds_and_calls_only_its_own_tools() {
    let c = Cluster::with_three_upstreams("finders").await;
    let spec = |include: &str| {
        json!({"apiVersion": "toolgate.dev/v1alpha1", "kind": "McpToolset",
               "metadata": {"name": "finders", "namespace": "team-a"},
               "spec": {"upstreams": [
                            {"name": "pets"},
                            {"selector": {"matchLabels": {"toolset": "finders"}}, "namespaces": ["team-b"]}],
                        "tools": {"readOnly": true, "include": [include]},
                        "mode": "search",
                        "pinned": ["pets__list_pets"]}})
    };
    c.apply::<McpToolset>("team-a", spec("*")).await;
    c.wait_reason::<McpToolset>("team-a", "finders", "Resolved")
        .await;
    c.wait_status("the toolset served", |s| {
        toolset_status(s, "finders").is_some_and(|t| t["mode"] == "search")
    })
    .await;

    let rec = Recorder::new(ProtocolVersion::V_2025_11_25);
    let url = format!("{}/mcp/toolsets/team-a/finders", c.gateway.url);
    let client = connect_recording(&url, rec.clone()).await;
    // The meta-tools and the pinned tool, not the catalog.
    assert_eq!(
        names(&client).await,
        set(&[
            "search_tools",
            "describe_tool",
            "call_tool",
            "pets__list_pets"
        ])
    );

    // Search finds the toolset's read-only tools of both upstreams, and
    // nothing it leaves out, though `/mcp` serves those.
    let hits = found(&client, "list pets").await;
    assert!(hits.contains(&"shop__list_pets".to_string()), "{hits:?}");
    assert!(hits.contains(&"pets__list_pets".to_string()), "{hits:?}");
    for h in found(&client, "create a pet").await.iter().chain(&hits) {
        assert!(
            h.starts_with("pets__") || h.starts_with("shop__"),
            "{h} is not in the toolset"
        );
        assert!(!h.contains("create"), "{h} is not read-only");
    }
    // A found tool is called through the meta-tool and reaches the store.
    let r = call(
        &client,
        "call_tool",
        json!({"name": "shop__list_pets", "arguments": {}}),
    )
    .await;
    assert!(!is_error(&r), "{}", text(&r));
    assert!(text(&r).contains("\"name\""), "{}", text(&r));
    // Outside the toolset: unknown, through the meta-tool and directly.
    for outside in ["pets__create_pet", "other__list_pets"] {
        let e = try_call(
            &client,
            "call_tool",
            json!({"name": outside, "arguments": {"name": "x"}}),
        )
        .await
        .expect_err("refused");
        assert!(e.to_string().contains("unknown tool"), "{outside}: {e}");
        let e = try_call(&client, outside, json!({"name": "x"}))
            .await
            .expect_err("refused");
        assert!(e.to_string().contains("unknown tool"), "{outside}: {e}");
    }

    // Editing the toolset reaches the session as list_changed, and search
    // follows the edit.
    c.apply::<McpToolset>("team-a", spec("fetch_*")).await;
    wait_changes(&rec, 1).await;
    let hits = found(&client, "list pets").await;
    assert!(!hits.iter().any(|h| h.ends_with("__list_pets")), "{hits:?}");
    // The pinned tool left the toolset, so it left the listing too.
    assert_eq!(
        names(&client).await,
        set(&["search_tools", "describe_tool", "call_tool"])
    );
}

async fn connect_recording(url: &str, rec: Recorder) -> Client {
    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
    use rmcp::transport::StreamableHttpClientTransport;
    use rmcp::ServiceExt;
    let transport = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(url.to_string()),
    );
    tokio::time::timeout(WAIT, rec.serve(transport))
        .await
        .expect("timed out connecting the MCP client")
        .expect("MCP client connects")
}

// ---- in process: what a reload tells a toolset's sessions -------------

fn small_catalog(pong: bool) -> catalog::Catalog {
    let empty = json!({"type": "object", "properties": {}, "additionalProperties": false});
    let t = |name: &str, method: &str, read_only: bool| {
        tool(
            name,
            method,
            "/pets/7",
            empty.clone(),
            json!([]),
            json!({"annotations": {"readOnlyHint": read_only}}),
        )
    };
    let mut other = vec![t("other__ping", "GET", true)];
    if pong {
        other.push(t("other__pong", "GET", true));
    }
    catalog_of(vec![
        upstream(
            "pets",
            vec![
                t("pets__get_pet", "GET", true),
                t("pets__list_pets", "GET", true),
                t("pets__create_pet", "POST", false),
            ],
        ),
        upstream("other", other),
    ])
}

fn toolset(name: &str, upstreams: &[&str], read_only: bool) -> catalog::toolset::Toolset {
    use catalog::toolset::{ToolFilter, Toolset, ToolsetName};
    Toolset {
        upstreams: upstreams.iter().map(|p| p.to_string()).collect(),
        tools: ToolFilter {
            read_only,
            ..ToolFilter::default()
        },
        ..Toolset::new(ToolsetName::new("team-a", name))
    }
}

fn set(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|s| s.to_string()).collect()
}

#[tokio::test]
async fn only_a_toolsets_own_changes_reach_its_sessions_and_access_rules_still_apply() {
    let up = crate::upstream::TestUpstream::start().await;
    let config = |pets_rules: Option<&str>| {
        let access = pets_rules
            .map(|r| format!("    access:\n      rules: {r}"))
            .unwrap_or_default();
        config_for(&up.url, &access)
    };
    let gw = start_gateway(&small_catalog(false), config(None)).await;
    let install = |pong: bool, rules: Option<&str>, toolsets: Vec<catalog::toolset::Toolset>| {
        gw.store
            .install_published(
                small_catalog(pong),
                config(rules),
                toolsets,
                gateway::serving::snapshot::Provenance::default(),
            )
            .expect("installs")
    };
    let readers = toolset("readers", &["pets"], true);
    let others = toolset("others", &["other"], false);
    let d = install(false, None, vec![readers.clone(), others.clone()]);
    assert_eq!(d.toolsets.len(), 2, "both toolsets are new: {d:?}");
    let status: Value = reqwest::get(format!("{}/status", gw.url))
        .await
        .expect("status")
        .json()
        .await
        .expect("JSON");
    assert_eq!(
        status["toolsets"],
        json!([{"namespace": "team-a", "name": "others", "mode": "all", "tools": 1},
               {"namespace": "team-a", "name": "readers", "mode": "all", "tools": 2}])
    );

    let (r_rec, o_rec) = (
        Recorder::new(ProtocolVersion::V_2025_11_25),
        Recorder::new(ProtocolVersion::V_2025_11_25),
    );
    let base = format!("{}/mcp/toolsets/team-a", gw.url);
    let r = connect_recording(&format!("{base}/readers"), r_rec.clone()).await;
    let o = connect_recording(&format!("{base}/others"), o_rec.clone()).await;
    assert_eq!(names(&r).await, set(&["pets__get_pet", "pets__list_pets"]));
    assert_eq!(names(&o).await, set(&["other__ping"]));

    // A tool added to `other` concerns `others` only.
    let d = install(true, None, vec![readers.clone(), others.clone()]);
    assert_eq!(
        d.toolsets
            .iter()
            .map(|t| t.name.as_str())
            .collect::<Vec<_>>(),
        ["others"]
    );
    wait_changes(&o_rec, 1).await;
    assert_eq!(names(&o).await, set(&["other__ping", "other__pong"]));

    // An access policy on `pets` applies inside the toolset too: its
    // sessions are told, and a tool it does not grant is unknown.
    let d = install(
        true,
        Some("[{tools: [get_*]}]"),
        vec![readers.clone(), others.clone()],
    );
    assert_eq!(
        d.toolsets
            .iter()
            .map(|t| t.name.as_str())
            .collect::<Vec<_>>(),
        ["readers"]
    );
    wait_changes(&r_rec, 1).await;
    assert_eq!(names(&r).await, set(&["pets__get_pet"]));
    let e = try_call(&r, "pets__list_pets", json!({}))
        .await
        .expect_err("not granted");
    assert!(e.to_string().contains("unknown tool"), "{e}");
    let ok = call(&r, "pets__get_pet", json!({})).await;
    assert!(!is_error(&ok), "{}", text(&ok));
    // Notifications arrive in order on a session: had the `other` change
    // been sent to `readers`, it would have come before this one.
    assert_eq!(r_rec.changes(), 1);

    // A toolset that is no longer published: its sessions are told, and
    // its endpoint is gone (404), as a removed upstream's `/mcp/{prefix}`.
    install(true, Some("[{tools: [get_*]}]"), vec![others.clone()]);
    wait_changes(&r_rec, 2).await;
    let e = r.list_all_tools().await.expect_err("the endpoint is gone");
    assert!(e.to_string().contains("404"), "{e}");
    assert_eq!(names(&o).await, set(&["other__ping", "other__pong"]));
    assert_eq!(o_rec.changes(), 1, "others is unchanged");
    let res = reqwest::Client::new()
        .post(format!("{base}/readers"))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#)
        .send()
        .await
        .expect("answered");
    assert_eq!(res.status(), 404);

    // A new mode is a new endpoint: open sessions are told, and end (their
    // ids are signed for the old one; MCP clients start a new session on
    // the 404); a new session gets the new mode.
    let url = format!("{base}/others");
    let sid = raw_session(&url).await;
    assert_eq!(raw_list(&url, &sid).await, 200);
    let mut searching = others.clone();
    searching.mode = catalog::listing::ListMode::Search;
    let d = install(true, Some("[{tools: [get_*]}]"), vec![searching]);
    assert_eq!(d.toolsets.len(), 1, "{d:?}");
    wait_changes(&o_rec, 2).await;
    assert_eq!(raw_list(&url, &sid).await, 404);
    let fresh = connect(&url).await;
    fresh.list_all_tools().await.expect("a new session lists");
    // `/status` on the MCP port is only for callers from whom no tool is
    // hidden; the `pets` policy hides some from this anonymous one.
    let status = reqwest::get(format!("{}/status", gw.url))
        .await
        .expect("status");
    assert_eq!(status.status(), 404);
}

fn mcp_post(url: &str, session: Option<&str>, body: &'static str) -> reqwest::RequestBuilder {
    let r = reqwest::Client::new()
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2025-06-18")
        .body(body);
    match session {
        Some(s) => r.header("mcp-session-id", s),
        None => r,
    }
}

/// A session opened by hand: its id.
async fn raw_session(url: &str) -> String {
    let r = mcp_post(url, None, r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#)
        .send()
        .await
        .expect("initialize answered");
    assert_eq!(r.status(), 200);
    let sid = r
        .headers()
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .expect("a session id")
        .to_string();
    let r = mcp_post(
        url,
        Some(&sid),
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
    )
    .send()
    .await
    .expect("initialized answered");
    assert_eq!(r.status(), 202);
    sid
}

/// The HTTP status of a `tools/list` on session `sid`.
async fn raw_list(url: &str, sid: &str) -> u16 {
    mcp_post(
        url,
        Some(sid),
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#,
    )
    .send()
    .await
    .expect("tools/list answered")
    .status()
    .as_u16()
}
