//! A world for operator tests: the in-memory API server with toolgate's
//! CRDs installed, the real operator talking to it over HTTP, and helpers
//! to read back what it published.

use std::future::Future;
use std::time::{Duration, Instant};

use catalog::publish::{Index, IndexEntry, PublishedUpstream};
use crds::{McpOverlay, McpToolset, McpUpstream};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams};
use kube::Client;
use serde_json::json;
use tokio_util::sync::CancellationToken;
use toolgate_tests::apiserver::{ApiServer, ApiServerHandle};

pub const PUBLISH_NS: &str = "toolgate-system";
pub const NS: &str = "team-a";

/// A small API: three operations, one with a path parameter.
pub const PETSTORE: &str = r##"
openapi: 3.0.3
info: {title: Pets, version: "1"}
paths:
  /pets:
    get:
      operationId: listPets
      responses:
        "200":
          description: ok
          content:
            application/json:
              schema: {type: array, items: {$ref: "#/components/schemas/Pet"}}
    post:
      operationId: createPet
      requestBody:
        required: true
        content:
          application/json:
            schema: {$ref: "#/components/schemas/Pet"}
      responses: {"201": {description: created}}
  /pets/{petId}:
    get:
      operationId: fetchPet
      parameters:
        - {name: petId, in: path, required: true, schema: {type: integer}}
      responses: {"200": {description: ok}}
components:
  schemas:
    Pet:
      type: object
      required: [name]
      properties:
        id: {type: integer}
        name: {type: string}
"##;

pub struct World {
    pub server: ApiServerHandle,
    pub client: Client,
}

pub struct Operator {
    /// Where its `/metrics` (and probes) listen.
    pub health: std::net::SocketAddr,
    stop: CancellationToken,
    task: tokio::task::JoinHandle<anyhow::Result<()>>,
}

impl Operator {
    /// Its `/metrics`, parsed.
    pub async fn metrics(&self) -> toolgate_tests::prometheus::Scrape {
        toolgate_tests::prometheus::scrape(&format!("http://{}/metrics", self.health)).await
    }

    /// Stops it as the kubelet does: asks (SIGTERM), and after a grace
    /// period kills it, so it never outlives this call.
    pub async fn stop(mut self) {
        self.stop.cancel();
        if tokio::time::timeout(Duration::from_secs(10), &mut self.task)
            .await
            .is_err()
        {
            self.task.abort();
            let _ = (&mut self.task).await;
        }
    }
}

impl World {
    pub async fn new() -> World {
        // RUST_LOG=operator=debug shows what the operator does.
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_test_writer()
            .try_init();
        operator::install_crypto_provider();
        let server = ApiServer::builder()
            .bookmark_interval(Duration::from_millis(500))
            .serve()
            .await
            .expect("API server starts");
        let client = server.client().expect("client");
        server
            .prepare(&crds::crds(), &[PUBLISH_NS, NS, "team-b"])
            .await
            .expect("CRDs and namespaces");
        World { server, client }
    }

    /// A world with the operator running and upstream `pets` published.
    pub async fn with_pets() -> (World, Operator) {
        let w = World::new().await;
        let op = w.operator("operator", false);
        w.apply_upstream(NS, "pets", inline(PETSTORE, "pets")).await;
        wait_ready(&w, NS, "pets", "True", "Published").await;
        (w, op)
    }

    /// Starts the operator as user `user` (so requests can be told apart).
    pub fn operator(&self, user: &str, leader_election: bool) -> Operator {
        self.operator_with(user, leader_election, |_| {})
    }

    /// An operator with `options` adjusted by `tune`.
    pub fn operator_with(
        &self,
        user: &str,
        leader_election: bool,
        tune: impl FnOnce(&mut operator::Options),
    ) -> Operator {
        let client = self.server.client_as(user).expect("client");
        let mut options = operator::Options {
            publish_namespace: PUBLISH_NS.into(),
            leader_election,
            identity: user.into(),
            ..Default::default()
        };
        tune(&mut options);
        // Bound once here and handed over, so the port is known and cannot
        // be taken by anyone else in between.
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind health port");
        let health = listener.local_addr().expect("health addr");
        listener.set_nonblocking(true).expect("nonblocking");
        let listener = tokio::net::TcpListener::from_std(listener).expect("tokio listener");
        let stop = CancellationToken::new();
        let task = tokio::spawn(operator::run_on(client, options, listener, stop.clone()));
        Operator { health, stop, task }
    }

    pub fn upstreams(&self, ns: &str) -> Api<McpUpstream> {
        Api::namespaced(self.client.clone(), ns)
    }

    pub fn overlays(&self, ns: &str) -> Api<McpOverlay> {
        Api::namespaced(self.client.clone(), ns)
    }

    /// Upstream `pets` in `ns`, its document (the pet store) in ConfigMap
    /// `pets-openapi` there, key `openapi.yaml`.
    pub async fn apply_pets_from_configmap(&self, ns: &str) -> McpUpstream {
        let cm = ConfigMap {
            metadata: kube::api::ObjectMeta {
                name: Some("pets-openapi".into()),
                ..Default::default()
            },
            data: Some(std::collections::BTreeMap::from([(
                "openapi.yaml".to_string(),
                PETSTORE.to_string(),
            )])),
            ..Default::default()
        };
        self.configmaps(ns)
            .create(&PostParams::default(), &cm)
            .await
            .expect("create ConfigMap pets-openapi");
        self.apply_upstream(
            ns,
            "pets",
            json!({
                "toolPrefix": "pets",
                "baseUrl": "http://pets:8080",
                "openapi": {"configMapRef": {"name": "pets-openapi", "key": "openapi.yaml"}},
            }),
        )
        .await
    }

    pub fn configmaps(&self, ns: &str) -> Api<ConfigMap> {
        Api::namespaced(self.client.clone(), ns)
    }

    pub async fn apply_upstream(
        &self,
        ns: &str,
        name: &str,
        spec: serde_json::Value,
    ) -> McpUpstream {
        let u: McpUpstream = serde_json::from_value(json!({
            "apiVersion": "toolgate.dev/v1alpha1",
            "kind": "McpUpstream",
            "metadata": {"name": name, "namespace": ns},
            "spec": spec,
        }))
        .expect("valid McpUpstream");
        self.upstreams(ns)
            .create(&PostParams::default(), &u)
            .await
            .expect("create McpUpstream")
    }

    pub async fn apply_overlay(&self, ns: &str, name: &str, spec: serde_json::Value) -> McpOverlay {
        let o: McpOverlay = serde_json::from_value(json!({
            "apiVersion": "toolgate.dev/v1alpha1",
            "kind": "McpOverlay",
            "metadata": {"name": name, "namespace": ns},
            "spec": spec,
        }))
        .expect("valid McpOverlay");
        self.overlays(ns)
            .create(&PostParams::default(), &o)
            .await
            .expect("create McpOverlay")
    }

    /// The published index (empty if none yet).
    pub async fn index(&self) -> Index {
        let cm = self
            .configmaps(PUBLISH_NS)
            .get_opt(crds::publish::INDEX_NAME)
            .await
            .expect("get index");
        let text = cm
            .and_then(|c| c.data)
            .and_then(|d| d.get(crds::publish::INDEX_KEY).cloned())
            .unwrap_or_default();
        Index::parse(&text).expect("index parses")
    }

    /// Reads an index entry's chunks back and decodes them, as the gateway does.
    pub async fn read_published(&self, entry: &IndexEntry) -> PublishedUpstream {
        let mut chunks = Vec::new();
        for c in &entry.chunks {
            let cm = self
                .configmaps(PUBLISH_NS)
                .get(&c.name)
                .await
                .expect("chunk exists");
            let bytes = cm
                .binary_data
                .and_then(|d| d.get(crds::publish::CHUNK_KEY).cloned())
                .expect("chunk has data");
            chunks.push(bytes.0);
        }
        let parts: Vec<&[u8]> = chunks.iter().map(Vec::as_slice).collect();
        catalog::publish::decode(entry, &parts).expect("published upstream decodes")
    }

    pub fn toolsets(&self, ns: &str) -> Api<McpToolset> {
        Api::namespaced(self.client.clone(), ns)
    }

    pub async fn apply_toolset(&self, ns: &str, name: &str, spec: serde_json::Value) -> McpToolset {
        let t: McpToolset = serde_json::from_value(json!({
            "apiVersion": "toolgate.dev/v1alpha1",
            "kind": "McpToolset",
            "metadata": {"name": name, "namespace": ns},
            "spec": spec,
        }))
        .expect("valid McpToolset");
        self.toolsets(ns)
            .create(&PostParams::default(), &t)
            .await
            .expect("create McpToolset")
    }

    /// Reads a toolset's published chunks back and decodes them, as the
    /// gateway does.
    pub async fn read_published_toolset(
        &self,
        entry: &catalog::publish::ToolsetEntry,
    ) -> catalog::toolset::Toolset {
        let mut chunks = Vec::new();
        for c in &entry.chunks {
            let cm = self
                .configmaps(PUBLISH_NS)
                .get(&c.name)
                .await
                .expect("chunk exists");
            chunks.push(
                cm.binary_data
                    .and_then(|d| d.get(crds::publish::CHUNK_KEY).cloned())
                    .expect("chunk has data")
                    .0,
            );
        }
        let parts: Vec<&[u8]> = chunks.iter().map(Vec::as_slice).collect();
        catalog::publish::decode_toolset(entry, &parts).expect("published toolset decodes")
    }

    pub async fn upstream(&self, ns: &str, name: &str) -> McpUpstream {
        self.upstreams(ns).get(name).await.expect("get McpUpstream")
    }
}

/// The condition `type_` of an upstream as (status, reason, message).
pub fn cond(u: &McpUpstream, type_: &str) -> Option<(String, String, String)> {
    u.status.as_ref().and_then(|s| {
        s.conditions
            .iter()
            .find(|c| c.type_ == type_)
            .map(|c| (c.status.clone(), c.reason.clone(), c.message.clone()))
    })
}

pub fn overlay_cond(o: &McpOverlay, type_: &str) -> Option<(String, String, String)> {
    o.status.as_ref().and_then(|s| {
        s.conditions
            .iter()
            .find(|c| c.type_ == type_)
            .map(|c| (c.status.clone(), c.reason.clone(), c.message.clone()))
    })
}

/// Polls `f` until it returns `Some`, or panics after `timeout` with `what`.
pub async fn eventually<T, F, Fut>(what: &str, timeout: Duration, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let start = Instant::now();
    loop {
        if let Some(v) = f().await {
            return v;
        }
        if start.elapsed() > timeout {
            panic!("timed out after {timeout:?} waiting for: {what}");
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// Generous: CI runs every test binary at once on two cores.
pub const WAIT: Duration = Duration::from_secs(60);

/// Waits until the upstream's Ready condition has `status` and `reason`.
pub async fn wait_ready(
    w: &World,
    ns: &str,
    name: &str,
    status: &str,
    reason: &str,
) -> McpUpstream {
    eventually(
        &format!("{ns}/{name} Ready={status} reason={reason}"),
        WAIT,
        || async {
            let u = w.upstreams(ns).get_opt(name).await.ok().flatten()?;
            let (s, r, _) = cond(&u, "Ready")?;
            let current = u.status.as_ref()?.observed_generation == u.metadata.generation;
            (current && s == status && r == reason).then_some(u)
        },
    )
    .await
}

/// Waits until the toolset's Ready condition has `status` and `reason`
/// for its current generation.
pub async fn wait_toolset(
    w: &World,
    ns: &str,
    name: &str,
    status: &str,
    reason: &str,
) -> McpToolset {
    eventually(
        &format!("toolset {ns}/{name} Ready={status} reason={reason}"),
        WAIT,
        || async {
            let t = w.toolsets(ns).get_opt(name).await.ok().flatten()?;
            let st = t.status.as_ref()?;
            let c = st.conditions.iter().find(|c| c.type_ == "Ready")?;
            let current = st.observed_generation == t.metadata.generation;
            (current && c.status == status && c.reason == reason).then_some(t)
        },
    )
    .await
}

/// The toolset's Ready message.
pub fn toolset_message(t: &McpToolset) -> String {
    t.status
        .as_ref()
        .and_then(|s| s.conditions.iter().find(|c| c.type_ == "Ready"))
        .map(|c| c.message.clone())
        .unwrap_or_default()
}

/// Writes (create, update, patch, delete) `user` has sent, events aside.
pub fn writes_by(w: &World, user: &str) -> u64 {
    w.server.count(|r| {
        r.user == user
            && matches!(r.verb.as_str(), "create" | "update" | "patch" | "delete")
            && r.resource != "events"
            && r.resource != "leases"
    })
}

/// Waits until `user` has written nothing for `quiet`.
pub async fn settle(w: &World, user: &str, quiet: Duration) {
    let mut last = writes_by(w, user);
    let mut since = Instant::now();
    let start = Instant::now();
    while since.elapsed() < quiet {
        assert!(start.elapsed() < WAIT, "{user} kept writing for {WAIT:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
        let now = writes_by(w, user);
        if now != last {
            last = now;
            since = Instant::now();
        }
    }
}

/// An upstream spec with the document inline.
pub fn inline(spec: &str, prefix: &str) -> serde_json::Value {
    json!({
        "toolPrefix": prefix,
        "baseUrl": "http://pets.team-a.svc:8080",
        "openapi": {"inline": spec},
    })
}
