//! What every reconcile shares: the client, the settings, caches and the
//! publisher.

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use crds::{McpOverlay, McpUpstream};
use kube::runtime::events::{Recorder, Reporter};
use kube::runtime::reflector::{ObjectRef, Store};
use tokio::sync::{mpsc, Semaphore};

use crate::publish::Publisher;
use crate::sources::UrlCache;

/// Operator settings (see `toolgate-operator run --help`).
#[derive(Debug, Clone)]
pub struct Options {
    /// Watch one namespace; `None` watches all.
    pub namespace: Option<String>,
    /// Where the catalog, the credentials Secret and the Lease live.
    pub publish_namespace: String,
    pub leader_election: bool,
    pub lease_name: String,
    pub identity: String,
    /// Cap on one upstream's compressed catalog.
    pub max_upstream_bytes: usize,
    /// Cap on an OpenAPI document fetched from `spec.openapi.url`.
    pub max_spec_bytes: usize,
    /// Time allowed for fetching one document, body included.
    pub spec_fetch_timeout: std::time::Duration,
    pub health_addr: SocketAddr,
    /// Compiles running at once (each is CPU-bound).
    pub compile_concurrency: usize,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            namespace: None,
            publish_namespace: "toolgate-system".into(),
            leader_election: true,
            lease_name: "toolgate-operator".into(),
            identity: "toolgate-operator".into(),
            max_upstream_bytes: catalog::publish::DEFAULT_MAX_UPSTREAM_BYTES,
            max_spec_bytes: crate::sources::DEFAULT_MAX_SPEC_BYTES,
            spec_fetch_timeout: crate::sources::DEFAULT_FETCH_TIMEOUT,
            health_addr: SocketAddr::from(([0, 0, 0, 0], 8081)),
            compile_concurrency: 2,
        }
    }
}

/// A compile result kept per upstream, keyed by the hash of every input.
///
/// Only a summary is kept, not the catalog: catalogs of large APIs take tens
/// of megabytes in memory, and the published copy is the durable one. The
/// rare reconcile that must publish from a cached result (a promoted prefix,
/// a changed Secret) compiles again.
#[derive(Clone)]
pub struct Compiled {
    pub input_hash: String,
    pub result: Result<Arc<Summary>, crate::upstream::Failure>,
}

/// What status needs to know about a compiled catalog.
#[derive(Debug, Clone)]
pub struct Summary {
    pub catalog_hash: String,
    pub prefix: String,
    pub tools: usize,
    pub operations: usize,
    pub rejected: usize,
    pub warnings: usize,
    /// `status` fields as `McpUpstreamStatus::record_catalog` fills them.
    pub recorded: crds::McpUpstreamStatus,
    /// `(overlay namespace/name, action index)` of targets that matched nothing.
    pub unmatched: Vec<(String, u32)>,
    /// Gzipped size, once encoded: a catalog over the cap is not compiled
    /// again just to find out again.
    pub encoded_size: OnceLock<usize>,
}

/// What the upstream controller learnt about one overlay on one upstream;
/// the overlay controller turns these into the overlay's status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OverlayOutcome {
    /// What applying it to this upstream did.
    pub result: Applied,
    /// `(action index, target)` of actions that matched nothing.
    pub unmatched: Vec<(u32, String)>,
}

/// Whether an overlay applied to an upstream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Applied {
    Yes,
    /// It failed for this upstream: the message says how.
    Failed(String),
    /// Not tried: the upstream has no document to apply it to.
    NotTried(String),
}

/// Counters served at `/metrics`.
#[derive(Debug, Default)]
pub struct Metrics {
    pub reconciles: AtomicU64,
    pub reconcile_errors: AtomicU64,
    pub compiles: AtomicU64,
    pub publishes: AtomicU64,
    pub status_writes: AtomicU64,
    leader: AtomicBool,
    /// Documents kept for conditional GETs: entries and body bytes.
    document_cache: (AtomicU64, AtomicU64),
}

impl Metrics {
    pub fn set_leader(&self, v: bool) {
        self.leader.store(v, Ordering::Relaxed);
    }
    pub fn leader(&self) -> bool {
        self.leader.load(Ordering::Relaxed)
    }
    pub fn set_document_cache(&self, entries: usize, bytes: usize) {
        self.document_cache
            .0
            .store(entries as u64, Ordering::Relaxed);
        self.document_cache.1.store(bytes as u64, Ordering::Relaxed);
    }
    pub fn document_cache(&self) -> (u64, u64) {
        (
            self.document_cache.0.load(Ordering::Relaxed),
            self.document_cache.1.load(Ordering::Relaxed),
        )
    }
    pub fn inc(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }
}

pub struct Context {
    pub client: kube::Client,
    pub options: Options,
    pub metrics: Arc<Metrics>,
    pub recorder: Recorder,
    pub publisher: Publisher,
    pub http: reqwest::Client,
    pub url_cache: UrlCache,
    pub compile_slots: Semaphore,
    /// Keyed by `namespace/name`.
    pub compiled: Mutex<HashMap<String, Compiled>>,
    /// `overlay namespace/name` → upstream name → outcome.
    pub overlay_outcomes: Mutex<HashMap<String, BTreeMap<String, OverlayOutcome>>>,
    /// Set once the controllers are built (after the context).
    pub upstreams: OnceLock<Store<McpUpstream>>,
    /// Turns true once `upstreams` holds its first complete list (wait on
    /// this, never on `Store::wait_until_ready`: see `upstream::run`).
    pub upstreams_listed: OnceLock<tokio::sync::watch::Receiver<bool>>,
    pub overlays: OnceLock<Store<McpOverlay>>,
    /// Asks the overlay controller to refresh an overlay's status.
    pub overlay_trigger: mpsc::UnboundedSender<ObjectRef<McpOverlay>>,
    pub overlay_trigger_rx: Mutex<Option<mpsc::UnboundedReceiver<ObjectRef<McpOverlay>>>>,
    /// Wakes upstreams whose served state changed.
    pub upstream_trigger: mpsc::UnboundedSender<ObjectRef<McpUpstream>>,
    pub upstream_trigger_rx: Mutex<Option<mpsc::UnboundedReceiver<ObjectRef<McpUpstream>>>>,
    /// What the gateway replicas serve.
    pub gateways: crate::served::Gateways,
}

impl Context {
    pub fn new(
        client: kube::Client,
        options: Options,
        metrics: Arc<Metrics>,
        gateways: crate::served::Gateways,
    ) -> Arc<Self> {
        let reporter = Reporter {
            controller: "toolgate-operator".into(),
            instance: Some(options.identity.clone()),
        };
        let (tx, rx) = mpsc::unbounded_channel();
        let (utx, urx) = mpsc::unbounded_channel();
        Arc::new(Context {
            recorder: Recorder::new(client.clone(), reporter),
            publisher: Publisher::new(client.clone(), &options.publish_namespace),
            http: reqwest::Client::builder()
                .user_agent(concat!("toolgate-operator/", env!("CARGO_PKG_VERSION")))
                .redirect(crate::sources::redirect_policy())
                .build()
                .unwrap_or_default(),
            url_cache: UrlCache::default(),
            compile_slots: Semaphore::new(options.compile_concurrency.max(1)),
            compiled: Mutex::default(),
            overlay_outcomes: Mutex::default(),
            upstreams: OnceLock::new(),
            upstreams_listed: OnceLock::new(),
            overlays: OnceLock::new(),
            overlay_trigger: tx,
            overlay_trigger_rx: Mutex::new(Some(rx)),
            upstream_trigger: utx,
            upstream_trigger_rx: Mutex::new(Some(urx)),
            gateways,
            metrics,
            options,
            client,
        })
    }
}

/// Locks a mutex, carrying on with the data if a panicking reconcile
/// poisoned it: every map here is a cache that stays consistent per entry.
pub fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
