//! `toolgate serve --kube`, the real binary, against the in-memory
//! Kubernetes API server: the catalog is published as the operator does
//! (chunk ConfigMaps, then the index) and a real MCP client watches it
//! change.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use catalog::publish::{encode, ChunkRef, Index, IndexEntry, PublishedUpstream, PUBLISHED_FORMAT};
use catalog::runtime::{AuthConfig, SecretRef, UpstreamConfig};
use crds::publish::{
    chunk_name, credentials_key, CHUNK_KEY, COMPONENT, COMPONENT_CHUNK, COMPONENT_INDEX, INDEX_KEY,
    INDEX_NAME, PART_OF, PREFIX_LABEL,
};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::ByteString;
use kube::api::{ObjectMeta, Patch, PatchParams, PostParams};
use kube::{Api, CustomResourceExt};
use serde_json::{json, Value};
use toolgate_tests::apiserver::{ApiServer, ApiServerHandle};

use crate::reload::{serve_with_env, tempdir, Served};
use crate::support::*;
use crate::upstream::TestUpstream;

/// The downward-API Pod UID the test gateway is given.
const POD_UID: &str = "6d1c3f9e-52a4-4c9b-9f0e-2f3c1a7b8e10";
const NS: &str = "toolgate-system";
/// Small chunks, so every upstream spans several ConfigMaps.
const CHUNK: usize = 700;

/// The fake cluster with the publish namespace, and the gateway's
/// kubeconfig and credentials directory.
struct Cluster {
    server: ApiServerHandle,
    api: Api<ConfigMap>,
    dir: std::path::PathBuf,
}

impl Cluster {
    async fn start(name: &str) -> Cluster {
        gateway::net::install_crypto_provider();
        // No bookmarks: a watch then resumes from the last object it saw,
        // which lets a test make it fall behind history.
        let server = ApiServer::builder()
            .bookmark_interval(Duration::from_secs(3600))
            .serve()
            .await
            .expect("fake API server starts");
        let client = server.client().expect("client for the fake API server");
        let ns = Namespace {
            metadata: ObjectMeta {
                name: Some(NS.into()),
                ..Default::default()
            },
            ..Default::default()
        };
        Api::<Namespace>::all(client.clone())
            .create(&PostParams::default(), &ns)
            .await
            .expect("namespace created");
        // The kind of the served report (only that CRD is needed).
        server
            .prepare(&[crds::McpGatewayReplica::crd()], &[])
            .await
            .expect("the McpGatewayReplica CRD");
        let dir = tempdir(&format!("kube-{name}"));
        // The gateway's requests are counted as user "gateway".
        std::fs::write(dir.join("kubeconfig"), server.kubeconfig_as("gateway")).unwrap();
        std::fs::create_dir_all(dir.join("credentials")).unwrap();
        Cluster {
            api: Api::namespaced(client, NS),
            server,
            dir,
        }
    }

    /// `toolgate serve --kube` pointed at this cluster.
    fn gateway(&self) -> Served {
        self.gateway_with(&[])
    }

    /// [`Cluster::gateway`] with extra environment variables.
    fn gateway_with(&self, extra_env: &[(&str, &str)]) -> Served {
        let kubeconfig = self.dir.join("kubeconfig");
        let creds = self.dir.join("credentials");
        serve_with_env(
            &[
                "--kube",
                "--kube-namespace",
                NS,
                "--credentials-dir",
                creds.to_str().unwrap(),
            ],
            &[
                &[
                    ("KUBECONFIG", kubeconfig.to_str().unwrap()),
                    ("POD_NAME", "gateway-0"),
                    ("POD_UID", POD_UID),
                ],
                extra_env,
            ]
            .concat(),
        )
    }

    async fn apply(&self, cm: ConfigMap) {
        let name = cm.metadata.name.clone().unwrap();
        self.api
            .patch(
                &name,
                &PatchParams::apply("test").force(),
                &Patch::Apply(&cm),
            )
            .await
            .unwrap_or_else(|e| panic!("apply ConfigMap {name}: {e}"));
    }

    /// Publishes `upstreams` the way the operator does: every chunk
    /// first, then the index. `corrupt` names prefixes whose chunks are
    /// written with other bytes than the index says.
    async fn publish(&self, upstreams: &[PublishedUpstream], corrupt: &[&str]) -> Index {
        let mut index = Index::default();
        for u in upstreams {
            let prefix = u.catalog.prefix.as_str();
            let enc = encode(u, CHUNK);
            let mut refs = Vec::new();
            for (bytes, sha) in enc.chunks.iter().zip(&enc.chunk_hashes) {
                let name = chunk_name(prefix, sha);
                let mut content = bytes.clone();
                if corrupt.contains(&prefix) {
                    content[0] ^= 0xff;
                }
                self.apply(chunk_cm(&name, prefix, content)).await;
                refs.push(ChunkRef {
                    name,
                    sha256: sha.clone(),
                    size: bytes.len(),
                });
            }
            index.upsert(IndexEntry {
                credentials: vec![],
                prefix: prefix.to_string(),
                source: u.source.clone(),
                hash: enc.hash.clone(),
                catalog_hash: u.catalog.hash.clone(),
                tool_count: u.catalog.tools.len(),
                chunks: refs,
            });
        }
        self.apply(index_cm(&index)).await;
        index
    }

    /// Rewrites `u`'s chunks with their correct bytes.
    async fn repair(&self, u: &PublishedUpstream) {
        let prefix = u.catalog.prefix.as_str();
        let enc = encode(u, CHUNK);
        for (bytes, sha) in enc.chunks.iter().zip(&enc.chunk_hashes) {
            self.apply(chunk_cm(&chunk_name(prefix, sha), prefix, bytes.clone()))
                .await;
        }
    }
}

fn labels(component: &str, prefix: Option<&str>) -> BTreeMap<String, String> {
    let mut l = BTreeMap::from([
        (PART_OF.0.to_string(), PART_OF.1.to_string()),
        (COMPONENT.to_string(), component.to_string()),
    ]);
    if let Some(p) = prefix {
        l.insert(PREFIX_LABEL.to_string(), p.to_string());
    }
    l
}

fn chunk_cm(name: &str, prefix: &str, bytes: Vec<u8>) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            namespace: Some(NS.into()),
            labels: Some(labels(COMPONENT_CHUNK, Some(prefix))),
            ..Default::default()
        },
        binary_data: Some(BTreeMap::from([(CHUNK_KEY.to_string(), ByteString(bytes))])),
        ..Default::default()
    }
}

fn index_cm(index: &Index) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(INDEX_NAME.into()),
            namespace: Some(NS.into()),
            labels: Some(labels(COMPONENT_INDEX, None)),
            ..Default::default()
        },
        data: Some(BTreeMap::from([(INDEX_KEY.to_string(), index.to_text())])),
        ..Default::default()
    }
}

/// An upstream as the operator would publish it from `default/<prefix>`.
fn published(prefix: &str, tools: Vec<Value>, runtime: UpstreamConfig) -> PublishedUpstream {
    PublishedUpstream {
        format: PUBLISHED_FORMAT.into(),
        source: format!("default/{prefix}"),
        runtime,
        catalog: upstream(prefix, tools),
    }
}

fn base(url: &str) -> UpstreamConfig {
    UpstreamConfig {
        base_url: Some(url.to_string()),
        ..Default::default()
    }
}

fn extra_tool(prefix: &str, n: usize) -> Value {
    tool(
        &format!("{prefix}__extra_{n}"),
        "GET",
        &format!("/extra/{n}"),
        json!({"type": "object", "properties": {}}),
        json!([]),
        json!({}),
    )
}

async fn get_json(url: &str) -> (u16, Value) {
    let r = reqwest::get(url).await.expect("GET answered");
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

/// Polls `check` until it returns `Some`, or panics naming `what`.
async fn eventually<T, F, Fut>(what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        if let Some(v) = check().await {
            return v;
        }
        if tokio::time::Instant::now() > deadline {
            panic!("timed out waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn tool_names(client: &Client) -> Vec<String> {
    let mut names: Vec<String> = client
        .list_all_tools()
        .await
        .expect("tools/list answered")
        .iter()
        .map(|t| t.name.to_string())
        .collect();
    names.sort();
    names
}

/// Waits until `/status` reports `hash` as the served catalog.
async fn wait_served(url: &str, hash: &str) -> Value {
    eventually(&format!("/status to report catalogHash {hash}"), || async {
        let (_, s) = get_json(&format!("{url}/status")).await;
        (s["catalogHash"] == hash).then_some(s)
    })
    .await
}

fn write_secret(dir: &Path, key: &str, value: &str) {
    std::fs::write(dir.join("credentials").join(key), value).unwrap();
}

#[tokio::test]
async fn kube_mode_loads_hot_swaps_and_survives_watch_cuts() {
    let cluster = Cluster::start("swap").await;
    let up = TestUpstream::start().await;
    let key = credentials_key("default", "pets-auth", "token");
    write_secret(&cluster.dir, &key, "s3cret\n");
    let gw = cluster.gateway();

    // Nothing published yet: alive, not ready.
    let (code, _) = get_json(&format!("{}/readyz", gw.url)).await;
    assert_eq!(code, 503);
    // An empty index is a catalog: ready, with no tools.
    let empty = cluster.publish(&[], &[]).await;
    let status = wait_served(&gw.url, &empty.hash()).await;
    assert_eq!(status["tools"], 0);
    let (code, _) = get_json(&format!("{}/readyz", gw.url)).await;
    assert_eq!(code, 200);

    let pets_runtime = UpstreamConfig {
        auth: AuthConfig::Bearer {
            token: SecretRef {
                secret_key: Some(key.clone()),
                ..Default::default()
            },
        },
        ..base(&up.url)
    };
    let pets = published("pets", pets_tools(), pets_runtime);
    let other = published(
        "other",
        other_tools(),
        base(&format!("{}/other-base", up.url)),
    );
    let v1 = cluster.publish(&[pets.clone(), other.clone()], &[]).await;

    let status = wait_served(&gw.url, &v1.hash()).await;
    let (code, _) = get_json(&format!("{}/readyz", gw.url)).await;
    assert_eq!(code, 200);
    let tools = pets_tools().len() + other_tools().len();
    assert_eq!(status["tools"], tools);
    assert_eq!(status["ready"], true);
    assert!(
        status["loadedAt"].as_str().unwrap().ends_with('Z'),
        "{status}"
    );
    let ups = status["upstreams"].as_array().unwrap();
    assert_eq!(ups.len(), 2);
    let other_entry = v1.entry("other").unwrap();
    assert!(
        ups.contains(&json!({"prefix": "other", "source": "default/other",
            "hash": other_entry.hash, "tools": 1, "responseViolations": 0})),
        "{status}"
    );

    let client = connect(&format!("{}/mcp", gw.url)).await;
    let names = tool_names(&client).await;
    assert_eq!(names.len(), tools);
    assert!(names.contains(&"pets__get_pet".to_string()));

    // A call goes through with the credential from the credentials dir.
    let r = call(&client, "pets__get_pet", json!({"id": "7"})).await;
    assert!(!is_error(&r), "{}", text(&r));
    assert_eq!(up.last().header("authorization"), Some("Bearer s3cret"));

    // A new index version swaps tools under the open session.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut other_tools2 = other_tools();
    other_tools2.push(extra_tool("other", 2));
    let other2 = published(
        "other",
        other_tools2,
        base(&format!("{}/other-base", up.url)),
    );
    let v2 = cluster.publish(&[pets.clone(), other2.clone()], &[]).await;
    wait_served(&gw.url, &v2.hash()).await;
    client.service().wait_changes(1).await;
    assert!(tool_names(&client)
        .await
        .contains(&"other__extra_2".to_string()));
    let r = call(&client, "other__extra_2", json!({})).await;
    assert!(!is_error(&r), "{}", text(&r));
    assert_eq!(up.last().path, "/other-base/extra/2");

    // Watches cut and history compacted (the next watch gets 410 Gone):
    // later changes still arrive, after a relist.
    // A write the gateway does not watch moves the cluster past the last
    // version it saw; after compaction its re-watch gets 410 Gone.
    let lists = gateway_lists(&cluster.server);
    let mut unrelated = chunk_cm("unrelated", "x", vec![1]);
    unrelated.metadata.labels = None;
    cluster.apply(unrelated).await;
    cluster.server.compact();
    cluster.server.cut_watches();
    let v3 = cluster.publish(std::slice::from_ref(&pets), &[]).await;
    wait_served(&gw.url, &v3.hash()).await;
    assert!(
        gateway_lists(&cluster.server) > lists,
        "no relist after 410 Gone"
    );
    let names = tool_names(&client).await;
    assert!(!names.iter().any(|n| n.starts_with("other__")), "{names:?}");
    assert_eq!(names.len(), pets_tools().len());
    let r = call(&client, "pets__get_pet", json!({"id": "7"})).await;
    assert!(!is_error(&r), "{}", text(&r));

    cluster.server.cut_watches();
    let v4 = cluster.publish(&[pets, other2], &[]).await;
    wait_served(&gw.url, &v4.hash()).await;
    assert!(tool_names(&client)
        .await
        .contains(&"other__extra_2".to_string()));

    // It reports what it serves in its own McpGatewayReplica, for the
    // operator.
    let reports: Api<crds::McpGatewayReplica> =
        Api::namespaced(cluster.server.client().expect("client"), NS);
    let report = reports.list(&Default::default()).await.expect("reports");
    assert_eq!(report.items.len(), 1);
    let report = &report.items[0];
    assert_eq!(report.metadata.name.as_deref(), Some("gateway-0"));
    assert!(!report.spec.catalog_hash.is_empty());
    assert_eq!(
        report.spec.ttl_seconds,
        gateway::serving::kubernetes::REPORT_TTL_SECONDS
    );
    // Owned by its Pod, so a crashed replica's report goes with the Pod.
    let owners = report.metadata.owner_references.clone().unwrap_or_default();
    assert_eq!(owners.len(), 1, "{owners:?}");
    assert_eq!(
        (
            owners[0].kind.as_str(),
            owners[0].name.as_str(),
            owners[0].uid.as_str()
        ),
        ("Pod", "gateway-0", POD_UID)
    );
}

/// Every kind of call `toolgate serve --kube` makes, recorded for the RBAC
/// check (`toolgate_tests::rbac`; tests/tests/apiserver/deploy.rs compares
/// the chart's rules with it): it follows the catalog through two versions,
/// reports each, and removes its report when stopped.
#[tokio::test]
async fn the_gateways_calls_are_the_recorded_ones() {
    use toolgate_tests::rbac::{calls_of, check_or_record, Recording};
    let cluster = Cluster::start("rbac").await;
    let up = TestUpstream::start().await;
    let gw = cluster.gateway();
    let reports: Api<crds::McpGatewayReplica> =
        Api::namespaced(cluster.server.client().expect("client"), NS);
    let reported = |hash: String| {
        let reports = reports.clone();
        async move {
            let deadline = std::time::Instant::now() + WAIT;
            loop {
                let r = reports.get_opt("gateway-0").await.expect("get report");
                if r.is_some_and(|r| r.spec.catalog_hash == hash) {
                    return;
                }
                assert!(std::time::Instant::now() < deadline, "no report of {hash}");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    };
    let v1 = cluster
        .publish(&[published("pets", pets_tools(), base(&up.url))], &[])
        .await;
    wait_served(&gw.url, &v1.hash()).await;
    reported(v1.hash()).await;
    let v2 = cluster
        .publish(
            &[
                published("pets", pets_tools(), base(&up.url)),
                published("other", other_tools(), base(&up.url)),
            ],
            &[],
        )
        .await;
    wait_served(&gw.url, &v2.hash()).await;
    reported(v2.hash()).await;
    gw.terminate().await;
    assert!(
        reports
            .get_opt("gateway-0")
            .await
            .expect("get report")
            .is_none(),
        "the report outlived the replica"
    );

    let fresh = Recording {
        service_account: "toolgate-gateway".into(),
        values: json!({}),
        calls: calls_of(&cluster.server, "gateway", &[]),
    };
    check_or_record(
        "gateway.yaml",
        "The Kubernetes API calls `toolgate serve --kube` makes, as RBAC sees them.\n\
         Recorded by gateway/tests/e2e/kube.rs:\n  kube::the_gateways_calls_are_the_recorded_ones\n\
         Checked against the chart's and deploy/default's RBAC by\n\
         tests/tests/apiserver/deploy.rs. Refresh:\n  \
         TOOLGATE_RECORD_RBAC=1 cargo test -p gateway --test e2e the_gateways_calls_are_the_recorded_ones",
        &fresh,
        "cargo test -p gateway --test e2e the_gateways_calls_are_the_recorded_ones",
    );
}

fn gateway_lists(server: &ApiServerHandle) -> u64 {
    server.count(|k| k.user == "gateway" && k.verb == "list" && k.resource == "configmaps")
}

#[tokio::test]
async fn a_chunk_with_a_wrong_hash_keeps_the_previous_version_of_that_upstream() {
    let cluster = Cluster::start("corrupt").await;
    let up = TestUpstream::start().await;
    let gw = cluster.gateway_with(&[("TOOLGATE_METRICS_ADDR", "127.0.0.1:0")]);
    let metrics = crate::metrics::served_metrics_url(&gw).await;
    let pets = published("pets", pets_tools(), base(&up.url));
    let other = published("other", other_tools(), base(&up.url));
    let v1 = cluster.publish(&[pets, other], &[]).await;
    wait_served(&gw.url, &v1.hash()).await;
    let client = connect(&format!("{}/mcp", gw.url)).await;

    // v2 changes both upstreams; other's chunks do not match the index.
    let mut pets_tools2 = pets_tools();
    pets_tools2.push(extra_tool("pets", 2));
    let mut other_tools2 = other_tools();
    other_tools2.push(extra_tool("other", 2));
    let pets2 = published("pets", pets_tools2, base(&up.url));
    let other2 = published("other", other_tools2, base(&up.url));
    let v2 = cluster
        .publish(&[pets2.clone(), other2.clone()], &["other"])
        .await;
    let expected = Index {
        format: PUBLISHED_FORMAT.into(),
        upstreams: vec![
            v1.entry("other").unwrap().clone(),
            v2.entry("pets").unwrap().clone(),
        ],
        ..Index::default()
    };
    let status = wait_served(&gw.url, &expected.hash()).await;
    assert_ne!(status["catalogHash"], v2.hash());
    // A load that kept an upstream's previous version failed; the hash
    // shown is the one served.
    let reloads = |s: &crate::metrics::Scraped, result| {
        s.value("toolgate_catalog_reloads_total", &[("result", result)])
    };
    // Counted when the load ends, just after the swap /status shows.
    let s =
        crate::metrics::scrape_until(&metrics, "a failed load", |s| reloads(s, "failure") >= 1.0)
            .await;
    assert_eq!(
        s.label_values("toolgate_catalog_info", "hash"),
        vec![expected.hash()]
    );
    let names = tool_names(&client).await;
    assert!(names.contains(&"pets__extra_2".to_string()), "{names:?}");
    assert!(names.contains(&"other__ping".to_string()), "{names:?}");
    assert!(!names.contains(&"other__extra_2".to_string()), "{names:?}");
    let r = call(&client, "other__ping", json!({})).await;
    assert!(!is_error(&r), "{}", text(&r));

    // The right bytes arrive: v2 loads whole, without a new index.
    let successes = reloads(&s, "success");
    cluster.repair(&other2).await;
    wait_served(&gw.url, &v2.hash()).await;
    let s = crate::metrics::scrape_until(&metrics, "a successful load", |s| {
        reloads(s, "success") > successes
    })
    .await;
    assert_eq!(
        s.label_values("toolgate_catalog_info", "hash"),
        vec![v2.hash()]
    );
    assert!(tool_names(&client)
        .await
        .contains(&"other__extra_2".to_string()));

    // A new upstream whose chunks are bad is left out until they are
    // right; the rest keep serving.
    let third = published("third", vec![extra_tool("third", 1)], base(&up.url));
    let v3 = cluster
        .publish(&[pets2, other2, third.clone()], &["third"])
        .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (_, status) = get_json(&format!("{}/status", gw.url)).await;
    assert_eq!(status["catalogHash"], v2.hash(), "{status}");
    assert!(!tool_names(&client)
        .await
        .iter()
        .any(|n| n.starts_with("third__")));
    cluster.repair(&third).await;
    wait_served(&gw.url, &v3.hash()).await;
    assert!(tool_names(&client)
        .await
        .contains(&"third__extra_1".to_string()));
}

#[tokio::test]
async fn an_upstream_waits_for_its_credentials_file_without_holding_up_the_others() {
    let cluster = Cluster::start("creds").await;
    let up = TestUpstream::start().await;
    let gw = cluster.gateway();
    let key = credentials_key("default", "late", "token");
    let late = published(
        "late",
        vec![extra_tool("late", 1)],
        UpstreamConfig {
            auth: AuthConfig::Bearer {
                token: SecretRef {
                    secret_key: Some(key.clone()),
                    ..Default::default()
                },
            },
            ..base(&up.url)
        },
    );
    let other = published("other", other_tools(), base(&up.url));
    let index = cluster.publish(&[late, other], &[]).await;

    // The Secret volume has not caught up: `other` serves, `late` waits.
    let only_other = Index {
        format: PUBLISHED_FORMAT.into(),
        upstreams: vec![index.entry("other").unwrap().clone()],
        ..Index::default()
    };
    wait_served(&gw.url, &only_other.hash()).await;
    let (code, _) = get_json(&format!("{}/readyz", gw.url)).await;
    assert_eq!(code, 200);

    // The kubelet writes the file; no ConfigMap changes, yet it loads.
    write_secret(&cluster.dir, &key, "late-token");
    wait_served(&gw.url, &index.hash()).await;
    let client = connect(&format!("{}/mcp", gw.url)).await;
    let r = call(&client, "late__extra_1", json!({})).await;
    assert!(!is_error(&r), "{}", text(&r));
    assert_eq!(up.last().header("authorization"), Some("Bearer late-token"));
}

/// A tool name produced by two upstreams (possible only with settings the
/// operator refuses, e.g. prefix `othe` with separator `r__`) stays with
/// the upstream already serving it; the newcomer is left out, whatever the
/// catalog order (`othe` loads before `other`).
#[tokio::test]
async fn a_later_upstream_never_takes_over_a_served_tool_name() {
    let cluster = Cluster::start("hijack").await;
    let up = TestUpstream::start().await;
    let gw = cluster.gateway();
    let victim = published("other", other_tools(), base(&up.url));
    let v1 = cluster.publish(std::slice::from_ref(&victim), &[]).await;
    wait_served(&gw.url, &v1.hash()).await;
    let client = connect(&format!("{}/mcp", gw.url)).await;

    // Nothing listens on port 9: a call routed there fails.
    let attacker = published("othe", other_tools(), base("http://127.0.0.1:9"));
    // `third`, published with it, shows when this index has been read.
    let third = published("third", vec![extra_tool("third", 1)], base(&up.url));
    let v2 = cluster.publish(&[attacker, victim, third], &[]).await;
    let mut expected = Index {
        format: PUBLISHED_FORMAT.into(),
        ..Index::default()
    };
    for prefix in ["other", "third"] {
        expected.upsert(v2.entry(prefix).unwrap().clone());
    }
    let status = wait_served(&gw.url, &expected.hash()).await;
    assert_eq!(status["tools"], 2, "{status}");
    let r = call(&client, "other__ping", json!({})).await;
    assert!(!is_error(&r), "{}", text(&r));
}

/// The intake limits are `serve` settings, so `--kube` takes them too
/// (here from the environment, as a Deployment sets them).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kube_mode_takes_the_session_cap_and_body_limit() {
    let c = Cluster::start("limits").await;
    let gw = c.gateway_with(&[
        ("TOOLGATE_MAX_SESSIONS", "1"),
        ("TOOLGATE_MAX_REQUEST_BODY_BYTES", "2048"),
    ]);
    let http = reqwest::Client::new();
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"}}});
    let post = |body: String| {
        http.post(format!("{}/mcp", gw.url))
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(body)
            .send()
    };
    assert_eq!(post(init.to_string()).await.unwrap().status(), 200);
    let refused = post(init.to_string()).await.unwrap();
    assert_eq!(refused.status(), 503);
    assert!(refused.text().await.unwrap().contains("limit 1"));
    let mut big = init.clone();
    big["params"]["clientInfo"]["name"] = json!("n".repeat(4096));
    assert_eq!(post(big.to_string()).await.unwrap().status(), 413);
}
