//! toolgate's operator: McpUpstream, McpOverlay and McpToolset resources
//! in, a published catalog and honest status conditions out.
//!
//! One stage per module, data flowing one way:
//!
//! - [`sources`]: read what an upstream refers to — its OpenAPI document
//!   (inline, ConfigMap or URL with ETag), its overlays, its Secrets and
//!   Service — into plain bytes, or a failure naming the field.
//! - [`compile`]: the `catalog` crate behind a cache keyed by a hash of
//!   every input, so an unrelated change recompiles nothing.
//! - [`settings`]: McpUpstream → the gateway's settings and credentials.
//! - [`upstream`]: the McpUpstream controller. Decides prefix ownership
//!   cluster-wide, publishes, writes status.
//! - [`publish`]: the catalog ConfigMaps (index + content-addressed gzip
//!   chunks) and the credentials Secret in the operator's namespace.
//! - [`overlay`]: the McpOverlay controller, reporting what the upstream
//!   controller found for each overlay.
//! - [`toolset`]: the McpToolset controller: resolves each toolset's
//!   upstreams, publishes it beside the catalog, reports its size.
//! - [`leader`]: a `coordination.k8s.io` Lease; only the holder runs the
//!   controllers, so two replicas never both write.
//! - [`status`]: conditions with stable transition times, so an unchanged
//!   outcome never writes.
//! - [`uninstall`]: not part of a running operator — the `uninstall`
//!   subcommand that stops it, unpublishes and releases the McpUpstreams.
//!
//! [`Failure`] (the resource's fault, a condition) and [`Error`] (a retried
//! reconcile) are shared by all; [`context`], [`metrics`] and [`sync`] hold
//! what the controllers share, and [`observe`] wraps each reconcile in its
//! span and metrics. No module imports one that imports it back
//! (`tests/modules.rs` checks).

pub mod compile;
pub mod context;
pub mod error;
pub mod http;
pub mod leader;
pub mod metrics;
pub mod observe;
pub mod overlay;
pub mod publish;
pub mod served;
pub mod settings;
pub mod sources;
pub mod status;
pub mod sync;
pub mod toolset;
pub mod uninstall;
pub mod upstream;

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use tokio_util::sync::CancellationToken;

pub use context::{Context, Options};
pub use error::{Error, Failure};

/// Installs rustls' ring provider once: the operator's kube client and its
/// URL fetcher share one TLS stack.
pub use host::install_crypto_provider;

/// Runs the operator until `shutdown` fires: the health server at once, the
/// controllers while this replica holds the lease (or always, without
/// leader election).
pub async fn run(
    client: kube::Client,
    options: Options,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::bind(options.health_addr)
        .await
        .with_context(|| format!("health server: binding {}", options.health_addr))?;
    run_on(client, options, listener, shutdown).await
}

/// [`run`] with the health server on an already bound listener
/// (`options.health_addr` is ignored): tests bind port 0 once and read the
/// port, instead of binding, dropping and hoping to bind it again.
pub async fn run_on(
    client: kube::Client,
    options: Options,
    listener: tokio::net::TcpListener,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let metrics = Arc::new(metrics::Metrics::default());
    let health = http::serve(listener, metrics.clone(), shutdown.clone())
        .await
        .context("health server")?;
    tracing::info!(addr = %health, "health and metrics listening");

    if options.leader_election {
        let elector = leader::Elector::new(
            client.clone(),
            &options.publish_namespace,
            &options.lease_name,
            &options.identity,
        );
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return Ok(()),
                _ = elector.acquire() => {}
            }
            tracing::info!(identity = %options.identity, "leading");
            metrics.set_leader(true);
            let lost = CancellationToken::new();
            let stop = lost.clone();
            let run_ctl = controllers(
                client.clone(),
                options.clone(),
                metrics.clone(),
                lost.clone(),
            );
            tokio::pin!(run_ctl);
            let keep = elector.keep(lost.clone());
            tokio::select! {
                r = &mut run_ctl => { r?; }
                _ = keep => {
                    tracing::warn!("lost the lease; stopping the controllers");
                }
                _ = shutdown.cancelled() => {
                    stop.cancel();
                    // In-flight reconciles finish first (the controllers
                    // shut down gracefully on `stop`), so a released Lease
                    // means this replica writes no more: `uninstall` relies
                    // on it. Bounded by the renew deadline, so no other
                    // replica can have taken the Lease meanwhile.
                    if tokio::time::timeout(leader::RENEW_DEADLINE, &mut run_ctl)
                        .await
                        .is_err()
                    {
                        tracing::warn!("in-flight reconciles did not finish in time");
                    }
                    elector.release().await;
                    return Ok(());
                }
            }
            stop.cancel();
            metrics.set_leader(false);
            // Let in-flight writes finish before competing again.
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    } else {
        metrics.set_leader(true);
        controllers(client, options, metrics, shutdown).await
    }
}

async fn controllers(
    client: kube::Client,
    options: Options,
    metrics: Arc<metrics::Metrics>,
    stop: CancellationToken,
) -> anyhow::Result<()> {
    let gateways =
        served::Gateways::start(client.clone(), &options.publish_namespace, stop.clone()).await;
    let ctx = Context::new(client, options, metrics, gateways);
    // Gateways are not ready before they read an index: give them an
    // empty one as soon as there is a leader, not only once an upstream
    // publishes (`helm install --wait` would hang otherwise).
    if let Err(e) = ctx.publisher.ensure_index().await {
        tracing::warn!(error = %e, "creating the empty index");
    }
    let (upstreams, toolsets) = tokio::join!(
        upstream::run(ctx.clone(), stop.clone()),
        toolset::run(ctx, stop)
    );
    upstreams.and(toolsets)
}
