//! `toolgate serve`: load a catalog (a file, hot-reloaded; a spec compiled
//! in-process; or, with `--kube`, what the operator publishes in the
//! cluster), serve it over MCP until SIGTERM.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context};
use gateway::config::GatewayFile;
use gateway::edge::shutdown::ShutdownTiming;
use gateway::identity::inbound::{Inbound, InboundRuntime};
use gateway::serving::kubernetes::{watch_published, KubeOptions};
use gateway::serving::reload::{watch_file, CatalogStore, WatchOptions};
use gateway::serving::snapshot::Overrides;
use gateway::{AppState, EdgeOptions};
use tokio_util::sync::CancellationToken;

#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// Address to listen on.
    #[arg(long, default_value = "0.0.0.0:8080")]
    pub listen: SocketAddr,
    /// Catalog file (from `toolgate compile` or the operator's ConfigMap);
    /// reloaded when it changes.
    #[arg(
        long,
        required_unless_present_any = ["spec", "kube", "config"],
        conflicts_with = "spec"
    )]
    pub catalog: Option<PathBuf>,
    /// Serve the catalog the operator publishes (ConfigMaps in
    /// --kube-namespace), hot-swapped as it changes. Uses the in-cluster
    /// service account, or KUBECONFIG / ~/.kube/config.
    #[arg(long, conflicts_with_all = ["catalog", "spec"])]
    pub kube: bool,
    /// Namespace the operator publishes into; default: the client's
    /// namespace (the pod's own in-cluster).
    #[arg(long, env = "POD_NAMESPACE", requires = "kube")]
    pub kube_namespace: Option<String>,
    /// This replica's name in its served report (an McpGatewayReplica the
    /// operator reads to count the replicas serving each upstream);
    /// default: the host name.
    #[arg(long, env = "POD_NAME", requires = "kube")]
    pub replica_id: Option<String>,
    /// UID of this replica's Pod (downward API `metadata.uid`), with
    /// --replica-id its name: the served report is then owned by the Pod,
    /// and Kubernetes deletes it with the Pod, even after a crash.
    #[arg(long, env = "POD_UID", requires = "kube")]
    pub pod_uid: Option<String>,
    /// Where `secretKey` credentials are read from, one file per key (the
    /// operator's `toolgate-credentials` Secret mounted as a volume).
    #[arg(long, default_value = gateway::secret::DEFAULT_CREDENTIALS_DIR)]
    pub credentials_dir: PathBuf,
    /// OpenAPI document to compile in-process instead of --catalog.
    #[arg(long, requires = "prefix")]
    pub spec: Option<PathBuf>,
    /// Tool prefix for --spec (and the upstream --base-url applies to).
    #[arg(long)]
    pub prefix: Option<String>,
    /// Upstream base URL for --prefix (the config file's baseUrl wins).
    #[arg(long, requires = "prefix")]
    pub base_url: Option<String>,
    /// Overlays applied to --spec, in order.
    #[arg(long, requires = "spec")]
    pub overlay: Vec<PathBuf>,
    /// Gateway config (YAML): inbound authentication (`inbound:`), listing
    /// modes and search mode (`listing:`), and base URLs, auth, limits per
    /// prefix (`upstreams:`, not with --kube, where the operator publishes
    /// them). Without --catalog or --spec, the upstreams' `openapi`
    /// documents are compiled and served, and reloaded when the config or
    /// any file it names changes.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Accepted Host header value (repeatable); `*` accepts any. Default:
    /// localhost, 127.0.0.1, ::1.
    #[arg(long = "allowed-host")]
    pub allowed_hosts: Vec<String>,
    /// Accepted Origin header value (repeatable), e.g. https://app.example.com:443.
    #[arg(long = "allowed-origin")]
    pub allowed_origins: Vec<String>,
    /// Seconds in-flight calls get to finish after SIGTERM (after the
    /// shutdown delay).
    #[arg(long, default_value_t = 10.0)]
    pub grace_period_seconds: f64,
    /// Seconds the gateway keeps serving after SIGTERM, with /readyz
    /// failing, before it stops accepting: the time load balancers need to
    /// stop sending it requests. Default: 5 with --kube, else 0. A second
    /// SIGTERM or Ctrl-C skips the wait.
    #[arg(long, env = "TOOLGATE_SHUTDOWN_DELAY_SECONDS")]
    pub shutdown_delay_seconds: Option<f64>,
    /// tools/list page size: most tools on one page.
    #[arg(long, env = "TOOLGATE_PAGE_SIZE", default_value_t = gateway::mcp::pages::DEFAULT_PAGE_SIZE)]
    pub page_size: usize,
    /// tools/list page budget: most JSON bytes of tools on one page (a
    /// single larger tool goes alone on its page). The JSON-RPC envelope
    /// adds about a hundred bytes.
    #[arg(long, env = "TOOLGATE_PAGE_BYTES", default_value_t = gateway::mcp::pages::DEFAULT_PAGE_BYTES)]
    pub page_bytes: usize,
    /// File holding the key (at least 32 bytes) that signs session ids.
    /// Give every replica the same key (a Secret) so any replica accepts
    /// any session; without it each process makes its own key and its
    /// sessions end with it. Followed as it appears or changes (no restart).
    #[arg(long, env = "TOOLGATE_SESSION_KEY_FILE")]
    pub session_key_file: Option<PathBuf>,
    /// Seconds session ids signed with the key the file replaced (or with
    /// this process's own key, before the file appeared) stay valid after
    /// the key changes; 0 ends them at once (after a leaked key).
    #[arg(long, env = "TOOLGATE_SESSION_KEY_GRACE_SECONDS", default_value_t = gateway::mcp::session::DEFAULT_KEY_GRACE.as_secs())]
    pub session_key_grace_seconds: u64,
    /// Largest MCP request body in bytes; a larger one is answered 413
    /// without being read.
    #[arg(long, env = "TOOLGATE_MAX_REQUEST_BODY_BYTES", default_value_t = gateway::edge::intake::DEFAULT_MAX_REQUEST_BODY_BYTES)]
    pub max_request_body_bytes: usize,
    /// Sessions (protocol versions with `initialize`) this replica holds at
    /// once; an `initialize` past it is answered 503.
    #[arg(long, env = "TOOLGATE_MAX_SESSIONS", default_value_t = gateway::mcp::session::DEFAULT_MAX_SESSIONS)]
    pub max_sessions: usize,
    /// Sessions one caller (its identity when authenticated, else its
    /// address) holds on this replica at once; past it the caller's least
    /// recently used idle session is closed for the new one, or the new one
    /// is answered 503 when all are busy. Default: a quarter of
    /// --max-sessions. Behind an ingress, anonymous clients all have its
    /// address and share one quota.
    #[arg(long, env = "TOOLGATE_MAX_SESSIONS_PER_CALLER")]
    pub max_sessions_per_caller: Option<usize>,
    /// Seconds a session may stay without any request before it is closed
    /// and its memory freed (its client is transparently restored if it
    /// comes back); 0 keeps sessions until DELETE.
    #[arg(long, env = "TOOLGATE_SESSION_IDLE_TIMEOUT_SECONDS", default_value_t = gateway::mcp::session::DEFAULT_SESSION_IDLE_TIMEOUT.as_secs())]
    pub session_idle_timeout_seconds: u64,
    /// Poll interval of the catalog file and the session key file, in
    /// milliseconds.
    #[arg(long, default_value_t = 250)]
    pub poll_interval_ms: u64,
    /// Bytes of upstream response bodies held at once, over all calls; a
    /// call waits (within its timeout) for its share. Default: half the
    /// container's memory limit (cgroup), else 256 MiB.
    #[arg(long, env = "TOOLGATE_MAX_RESPONSE_MEMORY_BYTES")]
    pub max_response_memory_bytes: Option<u64>,
    /// Address of the Prometheus metrics listener (`GET /metrics`, and
    /// `GET /status`), a port of its own so the MCP port (the one agents
    /// reach) never shows tool and upstream names; `off` disables it.
    /// Default: port 9090 on --listen's host (0.0.0.0:9090 with --kube).
    #[arg(long, env = "TOOLGATE_METRICS_ADDR", value_parser = metrics_addr)]
    pub metrics_addr: Option<MetricsAddr>,
    /// Per-tool series of the MCP operation histogram: `auto` while the
    /// catalog has at most --metrics-tool-label-limit tools, `on`, `off`.
    /// Default: `metrics.toolLabels` of --config, else auto.
    #[arg(long, env = "TOOLGATE_METRICS_TOOL_LABELS", value_enum)]
    pub metrics_tool_labels: Option<gateway::observe::metrics::ToolLabels>,
    /// Most tools a catalog may have for `auto` to label by tool. Default:
    /// `metrics.toolLabelLimit` of --config, else 1000.
    #[arg(long, env = "TOOLGATE_METRICS_TOOL_LABEL_LIMIT")]
    pub metrics_tool_label_limit: Option<usize>,
}

/// `--metrics-addr`: where to serve the metrics, if anywhere.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MetricsAddr(pub Option<SocketAddr>);

fn metrics_addr(text: &str) -> Result<MetricsAddr, String> {
    gateway::observe::metrics::parse_addr(text).map(MetricsAddr)
}

/// Where metrics are served when --metrics-addr is not given: in a pod,
/// every interface (the scrape comes from outside); elsewhere the host
/// the gateway serves on, so a gateway kept to loopback does not publish
/// its tool and upstream names on every interface.
fn default_metrics_addr(kube: bool, listen: SocketAddr) -> SocketAddr {
    let port = gateway::observe::metrics::DEFAULT_METRICS_ADDR
        .parse::<SocketAddr>()
        .map_or(9090, |a| a.port());
    if kube {
        SocketAddr::from(([0, 0, 0, 0], port))
    } else {
        SocketAddr::new(listen.ip(), port)
    }
}

pub async fn run(args: ServeArgs) -> anyhow::Result<()> {
    run_with(args, None, |_| {}).await
}

/// [`run`], optionally with a catalog built by the caller (instead of
/// `--spec`/`--catalog`), calling `on_listening` once the socket is bound.
/// `toolgate demo` serves through here so both commands share one path.
pub async fn run_with(
    args: ServeArgs,
    catalog: Option<catalog::Catalog>,
    on_listening: impl FnOnce(SocketAddr),
) -> anyhow::Result<()> {
    if args.max_sessions == 0 {
        bail!("--max-sessions must be at least 1");
    }
    if args.max_sessions_per_caller == Some(0) {
        bail!("--max-sessions-per-caller must be at least 1");
    }
    if args.page_size == 0 {
        bail!("--page-size must be at least 1");
    }
    if args.page_bytes == 0 {
        bail!("--page-bytes must be at least 1");
    }
    if args.max_request_body_bytes == 0 {
        bail!("--max-request-body-bytes must be at least 1");
    }
    let timing = ShutdownTiming {
        drain_delay: seconds(
            "--shutdown-delay-seconds",
            args.shutdown_delay_seconds.unwrap_or(if args.kube {
                DEFAULT_KUBE_SHUTDOWN_DELAY
            } else {
                0.0
            }),
        )?,
        grace: seconds("--grace-period-seconds", args.grace_period_seconds)?,
    };
    let (budget, source) = match args.max_response_memory_bytes {
        Some(0) => bail!("--max-response-memory-bytes must be at least 1"),
        Some(n) => (n, "--max-response-memory-bytes"),
        None => gateway::call::upstream::default_response_memory_bytes(),
    };
    gateway::call::upstream::ResponseBudget::configure(budget);
    tracing::info!(
        bytes = gateway::call::upstream::ResponseBudget::get().total(),
        source,
        "response memory budget"
    );
    let file = match &args.config {
        Some(p) => gateway::config::load_file(p)?,
        None => GatewayFile::default(),
    };
    if args.kube && file.upstreams.is_some() {
        bail!(
            "--config with --kube: `upstreams` is not allowed (the operator publishes upstream \
             settings); only `inbound`, `listing` and `metrics` are read"
        );
    }
    if file.has_sources() && (args.catalog.is_some() || args.spec.is_some()) {
        tracing::warn!(
            "the tools come from --catalog or --spec: the `openapi` documents of --config are \
             not compiled (its upstream settings apply)"
        );
    } else if !(args.kube
        || catalog.is_some()
        || args.catalog.is_some()
        || args.spec.is_some()
        || file.has_sources())
    {
        bail!(
            "nothing to serve: give --catalog or --spec, or say in --config where each \
             upstream's OpenAPI document is (`upstreams.<prefix>.openapi: {{file: ...}}`)"
        );
    }
    let config = file.gateway_config();
    let mut overrides = Overrides::default();
    if let (Some(prefix), Some(url)) = (&args.prefix, &args.base_url) {
        overrides.base_urls = HashMap::from([(prefix.clone(), url.clone())]);
    }
    gateway::secret::set_credentials_dir(args.credentials_dir.clone());
    let defaults = gateway::observe::metrics::ToolLabelSettings::default();
    let tool_labels = gateway::observe::metrics::ToolLabelSettings {
        mode: (args.metrics_tool_labels)
            .or(file.metrics.tool_labels)
            .unwrap_or(defaults.mode),
        limit: (args.metrics_tool_label_limit)
            .or(file.metrics.tool_label_limit)
            .unwrap_or(defaults.limit),
    };
    let metrics = std::sync::Arc::new(gateway::observe::metrics::Metrics::new(tool_labels));
    let store = CatalogStore::with_metrics(config, overrides, metrics.clone());
    let cancel = CancellationToken::new();
    let mut reporter = None;
    // The catalog file and the session key file are polled alike.
    let poll = WatchOptions {
        interval: Duration::from_millis(args.poll_interval_ms.max(10)),
        ..WatchOptions::default()
    };

    if args.kube {
        gateway::net::install_crypto_provider();
        let client = kube::Client::try_default()
            .await
            .context("--kube: no Kubernetes client configuration (in-cluster service account, KUBECONFIG or ~/.kube/config)")?;
        let namespace = args
            .kube_namespace
            .clone()
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| client.default_namespace().to_string());
        // Not ready until the first index is read; the watch retries on
        // its own if the API server is not reachable yet.
        tokio::spawn(watch_published(
            client.clone(),
            store.clone(),
            KubeOptions::new(namespace.clone()),
            cancel.child_token(),
        ));
        reporter = Some(tokio::spawn(gateway::serving::kubernetes::report_served(
            client,
            store.clone(),
            namespace,
            replica_id(args.replica_id.clone()),
            args.pod_uid.clone().filter(|u| !u.is_empty()),
            cancel.child_token(),
        )));
    } else if let Some(catalog) = &catalog {
        store
            .install(catalog)
            .context("serving the built-in catalog")?;
    } else if let Some(spec) = &args.spec {
        let prefix = args.prefix.as_deref().unwrap_or_default();
        let catalog = compile_spec(spec, prefix, &args.overlay)?;
        store
            .install(&catalog)
            .with_context(|| format!("serving {}", spec.display()))?;
    } else if let Some(path) = &args.catalog {
        // A bad catalog at start-up is not fatal: /readyz says not ready
        // and the watcher loads the file once it becomes valid.
        if let Err(e) = store.install_file(path) {
            tracing::error!(error = %e, "catalog not loaded; not ready until the file becomes valid");
        }
        tokio::spawn(watch_file(
            store.clone(),
            path.clone(),
            poll,
            cancel.child_token(),
        ));
    } else if let Some(path) = &args.config {
        // Checked above: its upstreams say where their documents are.
        let mut sources = gateway::serving::local::Sources::new(path.clone(), false);
        sources.start_counted(&store).await?;
        tokio::spawn(gateway::serving::local::watch(
            sources,
            store.clone(),
            poll,
            cancel.child_token(),
        ));
    }

    let allowed_hosts = if args.allowed_hosts.iter().any(|h| h == "*") {
        Vec::new()
    } else if args.allowed_hosts.is_empty() {
        EdgeOptions::default().allowed_hosts
    } else {
        args.allowed_hosts.clone()
    };
    let session_key = match &args.session_key_file {
        Some(path) => {
            let (key, follow) = gateway::mcp::session::follow_key_file(
                path.clone(),
                Duration::from_secs(args.session_key_grace_seconds),
                poll,
                cancel.child_token(),
            )?;
            tokio::spawn(follow);
            key
        }
        None => {
            tracing::info!("no --session-key-file: sessions are valid on this process only");
            gateway::mcp::session::SessionKey::random()
        }
    };
    let inbound = Inbound::from_config(
        &file.inbound,
        InboundRuntime {
            cancel: cancel.child_token(),
            watch: poll,
        },
    )
    .await
    .context("--config")?;
    if inbound.enabled() {
        tracing::info!(?inbound, "inbound authentication on");
    } else {
        tracing::warn!(
            "no inbound authentication configured (`inbound:` in --config): the MCP endpoints \
             are open to anyone who can reach them"
        );
    }
    let edge = EdgeOptions {
        inbound,
        default_access: file.inbound.default_access,
        listing: file.listing.clone(),
        session_key,
        allowed_hosts,
        allowed_origins: args.allowed_origins.clone(),
        page_size: args.page_size,
        page_bytes: args.page_bytes,
        cancel: cancel.clone(),
        max_request_body_bytes: args.max_request_body_bytes,
        sessions: gateway::mcp::endpoint::SessionSettings {
            limit: gateway::mcp::session::SessionLimit::new(args.max_sessions).with_per_caller(
                args.max_sessions_per_caller.unwrap_or_else(|| {
                    gateway::mcp::session::default_per_caller(args.max_sessions)
                }),
            ),
            idle_timeout: (args.session_idle_timeout_seconds > 0)
                .then(|| Duration::from_secs(args.session_idle_timeout_seconds)),
        },
        ..EdgeOptions::default()
    };
    let state = AppState::new(store.clone(), &edge);
    let listener = gateway::edge::shutdown::bind(args.listen)
        .with_context(|| format!("cannot listen on {}", args.listen))?;
    let local = listener.local_addr()?;
    let asked = args.metrics_addr.is_some();
    let metrics_addr = args
        .metrics_addr
        .map_or(Some(default_metrics_addr(args.kube, args.listen)), |m| m.0);
    if let Some(addr) = metrics_addr {
        // NB: not fatal: a taken metrics port must not stop the gateway
        // serving its clients; the scrape target going down is the alarm.
        match gateway::edge::shutdown::bind(addr).and_then(|l| Ok((l.local_addr()?, l))) {
            Ok((bound, metrics_listener)) => {
                tracing::info!(metrics = %bound, "metrics served on http://{bound}/metrics");
                let stop = cancel.child_token();
                let router = gateway::observe::metrics::router(metrics)
                    .merge(gateway::edge::health::status_router(state.clone()));
                tokio::spawn(async move {
                    let served = axum::serve(metrics_listener, router)
                        .with_graceful_shutdown(async move { stop.cancelled().await })
                        .await;
                    if let Err(e) = served {
                        tracing::error!(error = %e, "the metrics listener failed");
                    }
                });
            }
            // A second local gateway meets the first one's default port:
            // worth a line, not an error, as nobody asked for that port.
            Err(e) if !asked => tracing::warn!(
                error = %e,
                "cannot listen on {addr} for metrics (the default); they are not served: \
                 choose a port with --metrics-addr, or `off`"
            ),
            Err(e) => {
                tracing::error!(error = %e, "--metrics-addr: cannot listen on {addr}; metrics are not served")
            }
        }
    }
    // Before the "serving" line: a SIGTERM from then on is a shutdown
    // signal, not the default (an exit without draining).
    let signals = gateway::edge::shutdown::shutdown_signals();
    let snap = store.load();
    tracing::info!(
        listen = %local,
        tools = snap.tool_count(),
        ready = snap.loaded,
        "toolgate serving MCP at http://{local}/mcp"
    );
    on_listening(local);
    let stop = cancel.clone();
    gateway::edge::shutdown::serve(listener, state, cancel, signals, timing).await?;
    stop.cancel();
    if let Some(reporter) = reporter {
        // Withdraw the served report so the operator stops counting us.
        let _ = tokio::time::timeout(Duration::from_secs(2), reporter).await;
    }
    tracing::info!("stopped");
    Ok(())
}

/// `--shutdown-delay-seconds` with `--kube`: the endpoints of a
/// terminating pod reach kube-proxy and the ingress controllers within a
/// second or two of the SIGTERM, and within the readiness probe's period
/// times its failure threshold where they go by readiness alone.
const DEFAULT_KUBE_SHUTDOWN_DELAY: f64 = 5.0;

fn seconds(flag: &str, value: f64) -> anyhow::Result<Duration> {
    Duration::try_from_secs_f64(value)
        .map_err(|_| anyhow::anyhow!("{flag} must be a non-negative number of seconds"))
}

fn replica_id(given: Option<String>) -> String {
    host::replica_id(given, "gateway")
}

fn compile_spec(
    spec: &std::path::Path,
    prefix: &str,
    overlays: &[PathBuf],
) -> anyhow::Result<catalog::Catalog> {
    let source = super::compile::SourceArgs {
        spec: Some(spec.to_path_buf()),
        prefix: Some(prefix.to_string()),
        overlays: overlays.to_vec(),
        config: None,
        strict: false,
    };
    let upstream = super::compile::compile_source(&source)?;
    Ok(catalog::Catalog::new(vec![upstream]))
}
