//! The whole product on loopback: the in-memory Kubernetes API server, the
//! real operator, two `toolgate serve --kube` replicas (real processes),
//! the demo pet store as the upstream, and real MCP clients — driven only
//! through the Kubernetes API, as `kubectl apply` users do.

use std::time::{Duration, Instant};

use crds::{McpOverlay, McpUpstream};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use rmcp::model::ProtocolVersion;
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;
use toolgate_tests::apiserver::{ApiServer, ApiServerHandle};

use crate::reload::{serve_with_env, tempdir, Served};
use crate::support::*;

pub(crate) const SYSTEM: &str = "toolgate-system";
const WAIT: Duration = Duration::from_secs(60);

fn examples(file: &str) -> Vec<Value> {
    let path = format!("{}/../deploy/examples/{file}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).expect("example file");
    yaml_serde::Deserializer::from_str(&text)
        .map(|d| serde::Deserialize::deserialize(d).expect("example YAML"))
        .filter(|v: &Value| !v.is_null())
        .collect()
}

struct Product {
    server: ApiServerHandle,
    client: kube::Client,
    operator: CancellationToken,
    gateways: Vec<Served>,
    dir: std::path::PathBuf,
    api_base: String,
}

/// The control plane of an end-to-end cluster: the in-memory API server
/// with the CRDs and `namespaces`, the demo pet store on loopback as every
/// upstream's API, and the real operator as its own API user.
pub(crate) struct ControlPlane {
    pub server: ApiServerHandle,
    pub client: kube::Client,
    /// Cancels the operator.
    pub operator: CancellationToken,
    /// The demo pet store's API base URL.
    pub api_base: String,
    /// The operator's `/metrics` URL.
    pub operator_metrics: String,
}

impl ControlPlane {
    pub async fn start(namespaces: &[&str], leader_election: bool) -> ControlPlane {
        gateway::net::install_crypto_provider();
        let server = ApiServer::builder()
            .bookmark_interval(Duration::from_millis(500))
            .serve()
            .await
            .expect("API server");
        let client = server.client().expect("client");
        let namespaces: Vec<&str> = std::iter::once(SYSTEM)
            .chain(namespaces.iter().copied())
            .collect();
        server
            .prepare(&crds::crds(), &namespaces)
            .await
            .expect("CRDs and namespaces");
        let addr = toolgate_tests::serve_loopback(gateway::demo::petstore_app()).await;
        // The operator's health port, bound here so that tests know where
        // its /metrics is.
        let health = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("the operator's health port");
        let operator_metrics = format!(
            "http://{}/metrics",
            health.local_addr().expect("a bound address")
        );
        let operator = CancellationToken::new();
        let options = operator::Options {
            publish_namespace: SYSTEM.into(),
            leader_election,
            identity: "operator-0".into(),
            ..Default::default()
        };
        tokio::spawn(operator::run_on(
            server.client_as("operator").expect("client"),
            options,
            health,
            operator.clone(),
        ));
        ControlPlane {
            server,
            client,
            operator,
            api_base: format!("http://{addr}/api"),
            operator_metrics,
        }
    }
}

impl ControlPlane {
    /// `toolgate serve --kube` as replica `gateway-0` of this control
    /// plane (its own API user, credentials directory and temporary
    /// directory `name`), with `extra` arguments.
    pub fn serve_gateway(&self, name: &str, extra: &[&str]) -> Served {
        let dir = tempdir(name);
        let creds = dir.join("credentials");
        std::fs::create_dir_all(&creds).expect("dir");
        let kubeconfig = dir.join("kubeconfig");
        std::fs::write(&kubeconfig, self.server.kubeconfig_as("gateway")).expect("kubeconfig");
        let mut args = vec![
            "--kube",
            "--kube-namespace",
            SYSTEM,
            "--credentials-dir",
            creds.to_str().expect("utf-8 path"),
        ];
        args.extend_from_slice(extra);
        serve_with_env(
            &args,
            &[
                ("KUBECONFIG", kubeconfig.to_str().expect("utf-8 path")),
                ("POD_NAME", "gateway-0"),
            ],
        )
    }
}

impl Product {
    async fn start(name: &str, replicas: usize) -> Product {
        let ControlPlane {
            server,
            client,
            operator,
            api_base,
            ..
        } = ControlPlane::start(&[], true).await;

        let dir = tempdir(&format!("product-{name}"));
        std::fs::create_dir_all(dir.join("credentials")).expect("dir");
        // The session key every replica shares (the chart's Secret).
        std::fs::write(dir.join("session-key"), "k".repeat(48)).expect("key");
        let mut p = Product {
            server,
            client,
            operator,
            gateways: Vec::new(),
            dir,
            api_base,
        };
        for i in 0..replicas {
            let g = p.gateway(i);
            p.gateways.push(g);
        }
        p
    }

    /// Starts gateway replica `i` (its own API user and served report).
    fn gateway(&self, i: usize) -> Served {
        let kubeconfig = self.dir.join(format!("kubeconfig-{i}"));
        std::fs::write(
            &kubeconfig,
            self.server.kubeconfig_as(&format!("gateway-{i}")),
        )
        .expect("kubeconfig");
        let creds = self.dir.join("credentials");
        serve_with_env(
            &[
                "--kube",
                "--kube-namespace",
                SYSTEM,
                "--credentials-dir",
                creds.to_str().expect("utf-8 path"),
                "--session-key-file",
                self.dir.join("session-key").to_str().expect("utf-8 path"),
                "--grace-period-seconds",
                "5",
                // The proxy drops a replica before its SIGTERM (rollout.rs
                // covers the drain).
                "--shutdown-delay-seconds",
                "0",
            ],
            &[
                ("KUBECONFIG", kubeconfig.to_str().expect("utf-8 path")),
                ("POD_NAME", &format!("gateway-{i}")),
            ],
        )
    }

    /// `kubectl apply` of the examples, with the upstream pointed at the
    /// loopback demo instead of its in-cluster Service.
    async fn apply_examples(&self) {
        for doc in examples("petstore-upstream.yaml")
            .into_iter()
            .chain(examples("petstore-mcpoverlay.yaml"))
        {
            let mut doc = doc;
            if doc["kind"] == "McpUpstream" {
                let spec = doc["spec"].as_object_mut().expect("spec");
                spec.remove("serviceRef");
                spec.insert("baseUrl".into(), json!(self.api_base));
            }
            self.apply(doc).await;
        }
    }

    async fn apply(&self, doc: Value) {
        let kind = doc["kind"].as_str().expect("kind").to_string();
        let name = doc["metadata"]["name"].as_str().expect("name").to_string();
        let ns = doc["metadata"]["namespace"]
            .as_str()
            .unwrap_or("default")
            .to_string();
        let pp = PatchParams::apply("kubectl").force();
        match kind.as_str() {
            "ConfigMap" => Api::<ConfigMap>::namespaced(self.client.clone(), &ns)
                .patch(&name, &pp, &Patch::Apply(&doc))
                .await
                .map(drop),
            "McpUpstream" => Api::<McpUpstream>::namespaced(self.client.clone(), &ns)
                .patch(&name, &pp, &Patch::Apply(&doc))
                .await
                .map(drop),
            "McpOverlay" => Api::<McpOverlay>::namespaced(self.client.clone(), &ns)
                .patch(&name, &pp, &Patch::Apply(&doc))
                .await
                .map(drop),
            other => panic!("unexpected kind {other}"),
        }
        .unwrap_or_else(|e| panic!("apply {kind} {ns}/{name}: {e}"));
    }

    fn upstreams(&self, ns: &str) -> Api<McpUpstream> {
        Api::namespaced(self.client.clone(), ns)
    }

    async fn ready(&self, ns: &str, name: &str) -> Option<(String, String, String)> {
        let u = self.upstreams(ns).get_opt(name).await.ok()??;
        let current = u.status.as_ref()?.observed_generation == u.metadata.generation;
        let c = u
            .status?
            .conditions
            .into_iter()
            .find(|c| c.type_ == "Ready")?;
        current.then_some((c.status, c.reason, c.message))
    }

    async fn wait_ready(&self, ns: &str, name: &str, status: &str, reason: &str) -> String {
        let start = Instant::now();
        loop {
            if let Some((s, r, m)) = self.ready(ns, name).await {
                if s == status && r == reason {
                    return m;
                }
            }
            assert!(
                start.elapsed() < WAIT,
                "{ns}/{name} never became Ready={status}/{reason}: {:?}",
                self.ready(ns, name).await
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

impl Drop for Product {
    fn drop(&mut self) {
        self.operator.cancel();
    }
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

async fn names(c: &Client) -> Vec<String> {
    c.list_all_tools()
        .await
        .expect("tools/list")
        .into_iter()
        .map(|t| t.name.to_string())
        .collect()
}

async fn eventually_names(c: &Client, what: &str, f: impl Fn(&[String]) -> bool) -> Vec<String> {
    let start = Instant::now();
    loop {
        let n = names(c).await;
        if f(&n) {
            return n;
        }
        assert!(start.elapsed() < WAIT, "{what}: tools are {n:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn apply_to_call_through_the_whole_product() {
    let p = Product::start("main", 2).await;
    let clients: Vec<(Client, Recorder)> = {
        let mut v = Vec::new();
        for g in &p.gateways {
            let rec = Recorder::new(ProtocolVersion::V_2025_06_18);
            let c = connect_recording(&format!("{}/mcp", g.url), rec.clone()).await;
            v.push((c, rec));
        }
        v
    };

    // kubectl apply -f deploy/examples/ → Ready once both replicas serve it.
    p.apply_examples().await;
    let msg = p
        .wait_ready("default", "petstore", "True", "Published")
        .await;
    let u = p
        .upstreams("default")
        .get("petstore")
        .await
        .expect("upstream");
    assert_eq!(
        u.status.as_ref().and_then(|s| s.served_replicas),
        Some(2),
        "{msg}"
    );
    for (c, _) in &clients {
        let n = eventually_names(c, "pets tools listed", |n| {
            n.contains(&"pets__find_pets".to_string())
        })
        .await;
        assert!(!n.contains(&"pets__delete_pet".to_string()), "{n:?}");
        let r = call(c, "pets__find_pets", json!({"kind": "cat"})).await;
        assert!(!is_error(&r), "{}", text(&r));
        assert!(text(&r).contains("cat"), "{}", text(&r));
    }

    // An overlay edit reaches every connected client as list_changed.
    let before: Vec<usize> = clients.iter().map(|(_, r)| r.changes()).collect();
    let mut overlay = examples("petstore-mcpoverlay.yaml").remove(0);
    let inline = overlay["spec"]["inline"]
        .as_str()
        .expect("inline")
        .replace("find_pets", "search_pets");
    overlay["spec"]["inline"] = json!(inline);
    p.apply(overlay).await;
    for ((c, rec), n) in clients.iter().zip(before) {
        rec.wait_changes(n + 1).await;
        eventually_names(c, "renamed tool", |n| {
            n.contains(&"pets__search_pets".to_string())
        })
        .await;
    }

    // A second upstream claiming the prefix: PrefixConflict, its tools never appear.
    let mut rival = examples("petstore-upstream.yaml")
        .into_iter()
        .find(|d| d["kind"] == "McpUpstream")
        .expect("upstream example");
    rival["metadata"]["name"] = json!("rival");
    let spec = rival["spec"].as_object_mut().expect("spec");
    spec.remove("serviceRef");
    spec.insert("baseUrl".into(), json!(p.api_base));
    spec.insert("openapi".into(), json!({"inline": "openapi: 3.0.3\ninfo: {title: r, version: '1'}\npaths:\n  /rival:\n    get:\n      operationId: rivalOnly\n      responses: {'200': {description: ok}}\n"}));
    p.apply(rival).await;
    let msg = p
        .wait_ready("default", "rival", "False", "PrefixConflict")
        .await;
    assert!(msg.contains("default/petstore"), "{msg}");
    for (c, _) in &clients {
        assert!(!names(c).await.contains(&"pets__rival_only".to_string()));
    }
    p.upstreams("default")
        .delete("rival", &DeleteParams::default())
        .await
        .expect("delete");

    // A bad spec: the condition says so, the old tools keep serving.
    let cms: Api<ConfigMap> = Api::namespaced(p.client.clone(), "default");
    cms.patch(
        "petstore-openapi",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"openapi.yaml": "openapi: 3.0.3\npaths: [not, a, map\n"}})),
    )
    .await
    .expect("break the spec");
    let msg = p
        .wait_ready("default", "petstore", "False", "SpecInvalid")
        .await;
    assert!(msg.contains("ConfigMap default/petstore-openapi"), "{msg}");
    assert!(msg.contains("still serving the last good catalog"), "{msg}");
    for (c, _) in &clients {
        let r = call(c, "pets__search_pets", json!({})).await;
        assert!(!is_error(&r), "{}", text(&r));
    }
}

/// The demo spec as upstream number `i` of the latency run.
fn numbered(i: usize, api_base: &str) -> Value {
    let spec = std::fs::read_to_string(format!(
        "{}/../deploy/examples/openapi/petstore.yaml",
        env!("CARGO_MANIFEST_DIR")
    ))
    .expect("petstore spec");
    json!({
        "apiVersion": "toolgate.dev/v1alpha1",
        "kind": "McpUpstream",
        "metadata": {"name": format!("lat-{i}"), "namespace": "default"},
        "spec": {"toolPrefix": format!("lat{i}"), "baseUrl": api_base, "openapi": {"inline": spec}},
    })
}

/// apply → listed: from creating an McpUpstream to its tools in a connected
/// client's tools/list (after list_changed). Prints p50/p99;
/// docs/measurements.md reports the numbers of `cargo test --release -p gateway --test e2e
/// apply_to_listed -- --ignored --nocapture`.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "measurement: run with --release -- --ignored --nocapture"]
async fn apply_to_listed_latency() {
    let rounds: usize = std::env::var("ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(50);
    let p = Product::start("latency", 2).await;
    let rec = Recorder::new(ProtocolVersion::V_2025_06_18);
    let c = connect_recording(&format!("{}/mcp", p.gateways[0].url), rec.clone()).await;
    let mut times = Vec::new();
    for i in 0..rounds {
        let n = rec.changes();
        let start = Instant::now();
        p.apply(numbered(i, &p.api_base)).await;
        let want = format!("lat{i}__list_pets");
        loop {
            rec.wait_changes(n + 1).await;
            if names(&c).await.contains(&want) {
                break;
            }
            assert!(start.elapsed() < WAIT, "{want} never listed");
        }
        times.push(start.elapsed());
    }
    times.sort();
    let pct = |q: f64| times[((times.len() - 1) as f64 * q).round() as usize].as_secs_f64() * 1e3;
    println!(
        "apply → listed over {rounds} applies: p50 {:.0} ms, p99 {:.0} ms, max {:.0} ms",
        pct(0.5),
        pct(0.99),
        pct(1.0)
    );
}

/// Two `--kube` replicas behind a round-robin proxy (as a Service or an
/// ingress does): a rolling restart of one, mid-load, fails no call of
/// stateless clients, and a session continues on the other replica.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kube_replicas_survive_a_rolling_restart_mid_load() {
    use crate::proxy::Proxy;
    use crate::replicas::{is_call, progress, Load};
    use std::sync::Arc;

    let mut p = Product::start("rolling", 2).await;
    let proxy = Proxy::start().await;
    for (i, g) in p.gateways.iter().enumerate() {
        proxy.add(&format!("gateway-{i}"), &g.url);
    }
    p.apply_examples().await;
    p.wait_ready("default", "petstore", "True", "Published")
        .await;
    let mcp = format!("{}/mcp", proxy.url);

    let load = Load::calling(vec![
        ("pets__find_pets".to_string(), json!({"kind": "dog"})),
        ("pets__fetch_pet".to_string(), json!({"petId": 1})),
    ]);
    let mut tasks = Vec::new();
    for _ in 0..3 {
        tasks.push(load.spawn(Arc::new(connect_stateless(&mcp).await)));
    }
    let session = connect_recording(&mcp, Recorder::new(ProtocolVersion::V_2025_11_25)).await;
    progress(&load, 20).await;

    // Kubernetes' order: out of the Endpoints, SIGTERM, exit, new pod, back in.
    proxy.remove("gateway-0");
    tokio::time::sleep(Duration::from_millis(100)).await;
    p.gateways.remove(0).terminate().await;
    progress(&load, 20).await;
    // The session keeps working while its replica is gone.
    let r = call(&session, "pets__fetch_pet", json!({"petId": 1})).await;
    assert!(!is_error(&r), "{}", text(&r));

    // Back in the Endpoints once its readiness probe passes.
    let new = p.gateway(0);
    let start = Instant::now();
    while reqwest::get(format!("{}/readyz", new.url))
        .await
        .map(|r| r.status() != 200)
        .unwrap_or(true)
    {
        assert!(start.elapsed() < WAIT, "the new replica never became ready");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    proxy.add("gateway-0", &new.url);
    p.gateways.insert(0, new);
    let before = proxy.count("gateway-0", is_call);
    progress(&load, 40).await;
    load.finish(tasks).await;
    assert!(
        proxy.count("gateway-0", is_call) > before,
        "the new replica took calls"
    );
    let r = call(&session, "pets__find_pets", json!({})).await;
    assert!(!is_error(&r), "{}", text(&r));

    // The operator counts the new replica once it serves the catalog.
    let start = Instant::now();
    loop {
        let u = p.upstreams("default").get("petstore").await.expect("get");
        if u.status.as_ref().and_then(|s| s.served_replicas) == Some(2) {
            break;
        }
        assert!(
            start.elapsed() < WAIT,
            "served replicas: {:?}",
            u.status.and_then(|s| s.served_replicas)
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
