//! What every reconcile shares: the client, the settings, caches and the
//! publisher.

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, OnceLock};

use crds::{McpOverlay, McpUpstream};
use kube::runtime::events::{Recorder, Reporter};
use kube::runtime::reflector::{ObjectRef, Store};
use tokio::sync::mpsc;

use crate::compile::Compiler;
use crate::metrics::Metrics;
use crate::publish::Publisher;
use crate::served::Gateways;

use crate::sources::{SecretAccess, Sources};

/// Operator settings (see `toolgate-operator run --help`).
#[derive(Debug, Clone)]
pub struct Options {
    /// Watch one namespace; `None` watches all.
    pub namespace: Option<String>,
    /// Where Secrets that upstreams name may be read and are watched.
    pub secret_access: SecretAccess,
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
    /// Memory compiles are admitted against (`--compile-memory-bytes`);
    /// `None`: 60% of the container's limit ([`crate::compile`]).
    pub compile_memory_bytes: Option<u64>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            namespace: None,
            secret_access: SecretAccess::Cluster,
            publish_namespace: "toolgate-system".into(),
            leader_election: true,
            lease_name: "toolgate-operator".into(),
            identity: "toolgate-operator".into(),
            max_upstream_bytes: catalog::publish::DEFAULT_MAX_UPSTREAM_BYTES,
            max_spec_bytes: crate::sources::DEFAULT_MAX_SPEC_BYTES,
            spec_fetch_timeout: crate::sources::DEFAULT_FETCH_TIMEOUT,
            health_addr: SocketAddr::from(([0, 0, 0, 0], 8081)),
            compile_concurrency: 2,
            compile_memory_bytes: None,
        }
    }
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

/// A change to the McpUpstream cache, as the upstream controller's watch
/// sees it; the toolset controller wakes the toolsets it concerns.
#[derive(Debug, Clone)]
pub enum UpstreamChange {
    /// An upstream was created, changed (spec, labels or status) or deleted.
    Touched(ObjectRef<McpUpstream>),
    /// The cache was relisted: changes in between were not seen one by one.
    Relisted,
}

/// Whether an overlay applied to an upstream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Applied {
    Yes,
    /// It failed for this upstream: the message says how.
    Failed(String),
    /// Not tried: the upstream has no document to apply it to.
    NotTried(String),
    /// Not evaluated: another overlay of the upstream failed first, so
    /// nothing is known of this one there (the message names that one).
    NotEvaluated(String),
}

pub struct Context {
    pub client: kube::Client,
    pub options: Options,
    pub metrics: Arc<Metrics>,
    pub recorder: Recorder,
    pub publisher: Publisher,
    pub sources: Sources,
    pub compiler: Compiler,
    /// `overlay namespace/name` → upstream name → outcome.
    pub overlay_outcomes: Mutex<HashMap<String, BTreeMap<String, OverlayOutcome>>>,
    /// Set once the controllers are built (after the context).
    pub upstreams: OnceLock<Store<McpUpstream>>,
    /// Turns true once `upstreams` holds its first complete list (wait on
    /// this, never on `Store::wait_until_ready`: see `upstream::controller::run`).
    pub upstreams_listed: OnceLock<tokio::sync::watch::Receiver<bool>>,
    pub overlays: OnceLock<Store<McpOverlay>>,
    /// Asks the overlay controller to refresh an overlay's status.
    pub overlay_trigger: mpsc::UnboundedSender<ObjectRef<McpOverlay>>,
    pub overlay_trigger_rx: Mutex<Option<mpsc::UnboundedReceiver<ObjectRef<McpOverlay>>>>,
    /// Wakes upstreams whose served state changed.
    pub upstream_trigger: mpsc::UnboundedSender<ObjectRef<McpUpstream>>,
    pub upstream_trigger_rx: Mutex<Option<mpsc::UnboundedReceiver<ObjectRef<McpUpstream>>>>,
    /// What the gateway replicas serve.
    pub gateways: Gateways,
    /// Changes to the McpUpstream cache, for the toolset controller.
    pub upstream_changes: mpsc::UnboundedSender<UpstreamChange>,
    pub upstream_changes_rx: Mutex<Option<mpsc::UnboundedReceiver<UpstreamChange>>>,
}

impl Context {
    pub fn new(
        client: kube::Client,
        options: Options,
        metrics: Arc<Metrics>,
        gateways: Gateways,
    ) -> Arc<Self> {
        let reporter = Reporter {
            controller: "toolgate-operator".into(),
            instance: Some(options.identity.clone()),
        };
        let (tx, rx) = mpsc::unbounded_channel();
        let (utx, urx) = mpsc::unbounded_channel();
        let (ctx_changes, crx) = mpsc::unbounded_channel();
        Arc::new(Context {
            recorder: Recorder::new(client.clone(), reporter),
            publisher: Publisher::new(client.clone(), &options.publish_namespace),
            sources: Sources::new(
                client.clone(),
                options.secret_access.clone(),
                options.max_spec_bytes,
                options.spec_fetch_timeout,
                metrics.clone(),
            ),
            compiler: Compiler::new(
                options.compile_concurrency,
                options.compile_memory_bytes,
                metrics.clone(),
            ),
            overlay_outcomes: Mutex::default(),
            upstreams: OnceLock::new(),
            upstreams_listed: OnceLock::new(),
            overlays: OnceLock::new(),
            overlay_trigger: tx,
            overlay_trigger_rx: Mutex::new(Some(rx)),
            upstream_trigger: utx,
            upstream_trigger_rx: Mutex::new(Some(urx)),
            upstream_changes: ctx_changes,
            upstream_changes_rx: Mutex::new(Some(crx)),
            gateways,
            metrics,
            options,
            client,
        })
    }
}
