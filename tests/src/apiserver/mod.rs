//! An in-memory Kubernetes API server speaking the real REST protocol over
//! HTTP, so the real `kube` client, kube-runtime controllers and `kubectl`
//! can run against it in tests (no API server binary can be installed on
//! the machines this project runs on).
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use toolgate_tests::apiserver::ApiServer;
//! let server = ApiServer::start().await?;
//! let client = server.client()?; // a kube::Client for this server
//! server.cut_watches();          // every open watch ends now
//! server.compact();              // older resourceVersions now get 410 Gone
//! let writes = server.count(|r| r.verb == "patch" && r.field_manager == "toolgate");
//! // Replicas identify themselves by impersonation:
//! let replica = server.client_as("replica-a")?;
//! std::fs::write("/tmp/replica-b.kubeconfig", server.kubeconfig_as("replica-b"))?;
//! let by_a = server.count(|r| r.user == "replica-a" && r.verb != "get");
//! # let _ = (client, writes, replica, by_a); Ok(()) }
//! ```
//!
//! What is faithful and what is simplified is stated in each submodule:
//! [`discovery`] (discovery documents, CRD registration), `store`
//! (resourceVersions, paging, history), `write` (create/update/delete
//! rules, status subresource, generation, finalizers), `kinds` (Secrets,
//! namespaces and CRDs — `Terminating` while finalizers hold their
//! objects —, a Deployment's `scale`), `protobuf` and `openapi` (for kubectl), `patch` (merge,
//! JSON and strategic merge patch, server-side apply and field ownership),
//! `watch` (watch streams, bookmarks, 410 Gone), `validation` (CRD schema
//! pruning, defaulting, validation and CEL rules), `table` (kubectl's
//! Table output), `selector` and `status` (error bodies).
//! Not implemented at all: authentication and authorization (tests deny
//! chosen requests with [`ApiServerHandle::forbid`]), protobuf, OpenAPI
//! documents, aggregated discovery, kubelets and workload controllers,
//! garbage collection through ownerReferences, admission webhooks and CRD
//! conversion. The kinds an install creates (Deployments, RBAC objects,
//! Ingresses, PodDisruptionBudgets, NetworkPolicies, HPAs) and Pods are
//! stored as given: no defaults, no built-in schemas, nothing runs or
//! enforces them (tests that need a kubelet play it).

pub mod discovery;
mod http;
mod kinds;
mod openapi;
mod patch;
mod protobuf;
mod selector;
mod status;
mod store;
mod table;
mod validation;
mod watch;
mod write;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::Duration;

pub use status::ApiError;

use store::Store;

/// Errors starting the server or building a client for it.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("cannot build a kube client for {url}: {message}")]
    Client { url: String, message: String },
    #[error("cannot write kubeconfig {path}: {source}")]
    Kubeconfig {
        path: String,
        source: std::io::Error,
    },
}

/// One kind of request the server received, for assertions such as "only
/// the leader writes". Empty strings mean "not applicable".
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RequestKey {
    /// Kubernetes verb: get, list, watch, create, update, patch, delete,
    /// deletecollection.
    pub verb: String,
    pub group: String,
    /// Plural resource name, e.g. `configmaps`.
    pub resource: String,
    pub subresource: String,
    pub namespace: String,
    /// The object's name: from the path, or for a list or watch from a
    /// `metadata.name=` field selector (what the real server authorizes
    /// against an RBAC rule's `resourceNames`); empty for create and
    /// collections.
    pub name: String,
    /// `fieldManager` (or the user agent's product, as the real server
    /// defaults it) for create, update and patch.
    pub field_manager: String,
    pub user_agent: String,
    /// Who asked: the `Impersonate-User` header (clients from
    /// [`ApiServerHandle::client_as`] and kubeconfigs from
    /// [`ApiServerHandle::kubeconfig_as`] send it; client-go sends no
    /// credentials over plain HTTP, but does impersonate), else a bearer
    /// token or basic-auth user name; empty if anonymous.
    pub user: String,
}

#[derive(Debug, Clone)]
pub(crate) struct Options {
    pub listen: SocketAddr,
    pub bookmark_interval: Duration,
    pub history_limit: usize,
    pub history_bytes_limit: usize,
}

pub(crate) struct State {
    store: Mutex<Store>,
    pub cut: tokio::sync::watch::Sender<u64>,
    pub published: Arc<AtomicU64>,
    pub options: Options,
    requests: Mutex<BTreeMap<RequestKey, u64>>,
    delays: Mutex<Vec<Delay>>,
    forbidden: Mutex<Vec<Forbid>>,
    addr: OnceLock<String>,
}

/// Requests answered 403 Forbidden, as an authorizer denying them would.
type Forbid = Box<dyn Fn(&RequestKey) -> bool + Send + Sync>;

/// Latency injected into the responses to some requests.
struct Delay {
    filter: Box<dyn Fn(&RequestKey) -> bool + Send + Sync>,
    by: Duration,
}

impl State {
    pub(crate) fn lock(&self) -> MutexGuard<'_, Store> {
        // A panic while holding the lock must not wedge every later request.
        self.store.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Records a request; returns how long to hold its response back.
    fn count(&self, key: RequestKey) -> Option<Duration> {
        let delay = self
            .delays
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .filter(|d| (d.filter)(&key))
            .map(|d| d.by)
            .max();
        let mut r = self.requests.lock().unwrap_or_else(|p| p.into_inner());
        *r.entry(key).or_default() += 1;
        delay
    }

    fn forbids(&self, key: &RequestKey) -> bool {
        self.forbidden
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .any(|f| f(key))
    }

    fn addr(&self) -> &str {
        self.addr.get().map(String::as_str).unwrap_or("127.0.0.1:0")
    }
}

/// Builder for a server; [`ApiServer::start`] uses the defaults.
#[derive(Debug, Clone)]
pub struct ApiServer {
    options: Options,
}

impl Default for ApiServer {
    fn default() -> Self {
        ApiServer {
            options: Options {
                listen: SocketAddr::from(([127, 0, 0, 1], 0)),
                bookmark_interval: Duration::from_secs(1),
                history_limit: 100_000,
                history_bytes_limit: 256 << 20,
            },
        }
    }
}

impl ApiServer {
    /// Starts a server on 127.0.0.1 with an OS-chosen port.
    pub async fn start() -> Result<ApiServerHandle, StartError> {
        ApiServer::default().serve().await
    }

    pub fn builder() -> Self {
        Self::default()
    }

    pub fn listen(mut self, addr: SocketAddr) -> Self {
        self.options.listen = addr;
        self
    }

    /// How often watches with `allowWatchBookmarks` get a BOOKMARK.
    pub fn bookmark_interval(mut self, every: Duration) -> Self {
        self.options.bookmark_interval = every.max(Duration::from_millis(10));
        self
    }

    /// How many past changes watches can resume from before 410 Gone.
    pub fn history_limit(mut self, changes: usize) -> Self {
        self.options.history_limit = changes;
        self
    }

    /// Roughly how many bytes of past object versions history keeps
    /// (default 256 MiB); the oldest go first, as etcd compaction would.
    pub fn history_bytes_limit(mut self, bytes: usize) -> Self {
        self.options.history_bytes_limit = bytes;
        self
    }

    pub async fn serve(self) -> Result<ApiServerHandle, StartError> {
        let addr = self.options.listen;
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|source| StartError::Bind { addr, source })?;
        let local = listener
            .local_addr()
            .map_err(|source| StartError::Bind { addr, source })?;
        let store = Store::new(self.options.history_limit, self.options.history_bytes_limit);
        let (cut, _) = tokio::sync::watch::channel(0u64);
        let state = Arc::new(State {
            published: store.published(),
            store: Mutex::new(store),
            cut,
            options: self.options,
            requests: Mutex::new(BTreeMap::new()),
            delays: Mutex::default(),
            forbidden: Mutex::default(),
            addr: OnceLock::new(),
        });
        let _ = state.addr.set(local.to_string());
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let app = http::router(state.clone());
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(async move {
                    let _ = stop_rx.await;
                })
                .await;
        });
        Ok(ApiServerHandle {
            url: format!("http://{local}"),
            addr: local,
            state,
            stop: Some(stop_tx),
            task: Some(task),
        })
    }
}

/// A running server. Dropping it stops the server.
pub struct ApiServerHandle {
    url: String,
    addr: SocketAddr,
    state: Arc<State>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl ApiServerHandle {
    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> &str {
        &self.url
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Creates CRDs and namespaces through the API, as a cluster admin does
    /// before installing an operator.
    pub async fn prepare(
        &self,
        crds: &[k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition],
        namespaces: &[&str],
    ) -> Result<(), kube::Error> {
        use kube::api::{Api, PostParams};
        let client = self
            .client()
            .map_err(|e| kube::Error::Service(Box::new(std::io::Error::other(e.to_string()))))?;
        let crd_api = Api::all(client.clone());
        for crd in crds {
            crd_api.create(&PostParams::default(), crd).await?;
        }
        let ns_api: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client);
        for name in namespaces {
            let ns = k8s_openapi::api::core::v1::Namespace {
                metadata: kube::api::ObjectMeta {
                    name: Some(name.to_string()),
                    ..Default::default()
                },
                ..Default::default()
            };
            ns_api.create(&PostParams::default(), &ns).await?;
        }
        Ok(())
    }

    /// A `kube::Client` talking to this server, default namespace `default`.
    pub fn client(&self) -> Result<kube::Client, StartError> {
        kube::Client::try_from(self.config()?).map_err(|e| self.client_error(e.to_string()))
    }

    fn client_error(&self, message: String) -> StartError {
        StartError::Client {
            url: self.url.clone(),
            message,
        }
    }

    /// Client config pointing at this server.
    fn config(&self) -> Result<kube::Config, StartError> {
        let uri = self
            .url
            .parse()
            .map_err(|e: axum::http::uri::InvalidUri| self.client_error(e.to_string()))?;
        Ok(kube::Config::new(uri))
    }

    /// A client that identifies as `user` (by impersonation), so tests can
    /// tell replicas apart in [`Self::requests`].
    pub fn client_as(&self, user: &str) -> Result<kube::Client, StartError> {
        let mut config = self.config()?;
        let value = axum::http::HeaderValue::from_str(&format!("Bearer {user}"))
            .map_err(|e| self.client_error(e.to_string()))?;
        config
            .headers
            .push((axum::http::header::AUTHORIZATION, value));
        kube::Client::try_from(config).map_err(|e| self.client_error(e.to_string()))
    }

    /// A kubeconfig for kubectl and other clients (context `toolgate-fake`).
    pub fn kubeconfig(&self) -> String {
        self.kubeconfig_with_user("{}")
    }

    /// A kubeconfig whose requests are counted as `user`'s.
    pub fn kubeconfig_as(&self, user: &str) -> String {
        self.kubeconfig_with_user(&format!("{{as: {}}}", serde_json::Value::from(user)))
    }

    fn kubeconfig_with_user(&self, user: &str) -> String {
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: toolgate-fake\n  cluster:\n    server: {url}\ncontexts:\n- name: toolgate-fake\n  context:\n    cluster: toolgate-fake\n    user: toolgate-fake\n    namespace: default\ncurrent-context: toolgate-fake\nusers:\n- name: toolgate-fake\n  user: {user}\npreferences: {{}}\n",
            url = self.url
        )
    }

    pub fn write_kubeconfig(&self, path: &Path) -> Result<(), StartError> {
        std::fs::write(path, self.kubeconfig()).map_err(|source| StartError::Kubeconfig {
            path: path.display().to_string(),
            source,
        })
    }

    /// Ends every open watch stream, as an API server restart or a
    /// load-balancer timeout would. Clients must re-watch.
    pub fn cut_watches(&self) {
        self.state.cut.send_modify(|n| *n += 1);
    }

    /// Forgets all history: a watch or `continue` from any earlier
    /// resourceVersion now gets 410 Gone. Returns the current version.
    pub fn compact(&self) -> u64 {
        self.state.lock().compact()
    }

    /// The current (latest) resourceVersion.
    pub fn resource_version(&self) -> u64 {
        self.state.lock().rv()
    }

    /// Requests received so far, by kind of request.
    pub fn requests(&self) -> BTreeMap<RequestKey, u64> {
        self.state
            .requests
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// How many requests matched `filter`.
    pub fn count(&self, filter: impl Fn(&RequestKey) -> bool) -> u64 {
        self.requests()
            .iter()
            .filter(|(k, _)| filter(k))
            .map(|(_, n)| n)
            .sum()
    }

    /// Holds back the response to every request matching `filter` by
    /// `by`, as a slow or distant API server would (the response reflects
    /// the state when the request arrived). Lets tests force orderings that
    /// otherwise happen only under load.
    pub fn delay(
        &self,
        filter: impl Fn(&RequestKey) -> bool + Send + Sync + 'static,
        by: Duration,
    ) {
        self.state
            .delays
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(Delay {
                filter: Box::new(filter),
                by,
            });
    }

    /// Answers every later request matching `filter` with 403 Forbidden
    /// (the real server's body and wording), as RBAC denying it would. The
    /// request is still counted in [`Self::requests`]. There is no
    /// authorizer otherwise: every request is allowed.
    pub fn forbid(&self, filter: impl Fn(&RequestKey) -> bool + Send + Sync + 'static) {
        self.state
            .forbidden
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(Box::new(filter));
    }

    pub fn reset_requests(&self) {
        self.state
            .requests
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
    }

    /// Stops serving and waits for the server task to end.
    pub async fn shutdown(mut self) {
        self.stop_now();
        if let Some(t) = self.task.take() {
            let _ = t.await;
        }
    }

    fn stop_now(&mut self) {
        self.cut_watches();
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
    }
}

impl Drop for ApiServerHandle {
    fn drop(&mut self) {
        self.stop_now();
    }
}
