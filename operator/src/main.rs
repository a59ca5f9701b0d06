//! `toolgate-operator`: reconciles McpUpstream, McpOverlay and McpToolset
//! resources into the catalog the toolgate gateway serves.

use std::net::SocketAddr;

use clap::{Parser, Subcommand};
use tokio_util::sync::CancellationToken;

#[derive(Debug, Parser)]
#[command(name = "toolgate-operator", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    run: RunArgs,
    /// Log lines on stderr: text, or JSON with the span fields and trace
    /// ids.
    #[arg(
        long,
        global = true,
        env = "TOOLGATE_LOG_FORMAT",
        value_enum,
        default_value_t,
        ignore_case = true
    )]
    log_format: telemetry::LogFormat,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the operator (the default).
    Run(RunArgs),
    /// Print the CustomResourceDefinitions (YAML) and exit.
    Crds,
    /// Before removing the operator: stop it, delete what it published and
    /// remove its finalizer from every McpUpstream, so deleting them, their
    /// namespaces or the CRDs cannot hang. Idempotent. (The chart's
    /// pre-delete hook runs it.)
    Uninstall(UninstallArgs),
}

#[derive(Debug, Clone, clap::Args)]
struct UninstallArgs {
    /// The operator's --namespace: release McpUpstreams in this namespace
    /// only (default: all).
    #[arg(long, env = "WATCH_NAMESPACE")]
    namespace: Option<String>,
    /// The operator's --publish-namespace: where its Deployment, Lease and
    /// published objects are.
    #[arg(long, env = "POD_NAMESPACE", default_value = "toolgate-system")]
    publish_namespace: String,
    /// The operator's --lease-name.
    #[arg(long, default_value = "toolgate-operator")]
    lease_name: String,
    /// Scale this Deployment (in the publish namespace) to 0 and wait until
    /// its pods are gone. Without it the operator must be stopped already.
    #[arg(long)]
    operator_deployment: Option<String>,
    /// How long to wait for the operator to stop (e.g. 2m).
    #[arg(long, default_value = "2m", value_parser = parse_duration)]
    wait_timeout: std::time::Duration,
}

#[derive(Debug, Clone, clap::Args)]
struct RunArgs {
    /// Watch McpUpstreams, McpOverlays and McpToolsets in this namespace
    /// only (default: all).
    #[arg(long, env = "WATCH_NAMESPACE")]
    namespace: Option<String>,
    /// Read and watch the Secrets that upstreams name only in these
    /// namespaces (comma-separated; empty: none), each of which grants the
    /// operator access with a RoleBinding; an upstream elsewhere that names
    /// a Secret fails with SecretAccessDenied. Default: every namespace.
    #[arg(long, value_name = "NAMESPACE,...")]
    secret_namespaces: Option<String>,
    /// Namespace the catalog ConfigMaps, the credentials Secret and the Lease live in.
    #[arg(long, env = "POD_NAMESPACE", default_value = "toolgate-system")]
    publish_namespace: String,
    /// Elect a leader with a Lease so several replicas can run; only the
    /// leader writes.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    leader_election: bool,
    /// Name of the Lease.
    #[arg(long, default_value = "toolgate-operator")]
    lease_name: String,
    /// This replica's identity in the Lease (default: the pod name, else the host name).
    #[arg(long, env = "POD_NAME")]
    identity: Option<String>,
    /// Largest published catalog of one upstream, in bytes of uncompressed
    /// JSON (what each gateway replica holds); larger ones fail with
    /// CatalogTooLarge.
    #[arg(long, default_value_t = catalog::publish::DEFAULT_MAX_UPSTREAM_BYTES)]
    max_upstream_bytes: usize,
    /// Largest OpenAPI document read from `spec.openapi.url`; larger ones
    /// fail with SpecTooLarge.
    #[arg(long, default_value_t = operator::sources::DEFAULT_MAX_SPEC_BYTES)]
    max_spec_bytes: usize,
    /// Time allowed for fetching one OpenAPI document, body included
    /// (e.g. 30s, 2m).
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    spec_fetch_timeout: std::time::Duration,
    /// Address of /healthz, /readyz and /metrics.
    #[arg(long, default_value = "0.0.0.0:8081")]
    health_addr: SocketAddr,
    /// Catalog compiles running at once.
    #[arg(long, default_value_t = 2)]
    compile_concurrency: usize,
    /// Memory catalog compiles are admitted against, in bytes: each
    /// reserves an estimate of its peak (from its document's size, at
    /// most 256 MiB) and waits while running compiles hold the rest. By
    /// default 60% of the container's memory limit, else 320 MiB.
    #[arg(long, env = "TOOLGATE_COMPILE_MEMORY_BYTES")]
    compile_memory_bytes: Option<u64>,
}

fn parse_duration(s: &str) -> Result<std::time::Duration, String> {
    crds::parse_duration(s).ok_or_else(|| format!("{s:?} is not a duration like 30s or 2m"))
}

fn identity(given: Option<String>) -> String {
    host::replica_id(given, "toolgate-operator")
}

/// Logs and traces ([`telemetry`]); the guard exports the last spans
/// when dropped at exit.
fn init_tracing(log_format: telemetry::LogFormat) -> anyhow::Result<telemetry::Guard> {
    operator::install_crypto_provider();
    telemetry::init(telemetry::Settings {
        service_name: "toolgate-operator",
        log_format,
        default_filter: "info,kube=warn",
    })
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let args = match cli.command {
        Some(Command::Crds) => {
            print!("{}", crds::crd_yaml());
            return Ok(());
        }
        Some(Command::Uninstall(args)) => return uninstall(args, cli.log_format).await,
        Some(Command::Run(args)) => args,
        None => cli.run,
    };
    let _telemetry = init_tracing(cli.log_format)?;
    let client = kube::Client::try_default().await?;
    let options = operator::Options {
        namespace: args.namespace,
        secret_access: operator::sources::SecretAccess::from_list(
            args.secret_namespaces.as_deref(),
        ),
        publish_namespace: args.publish_namespace,
        leader_election: args.leader_election,
        lease_name: args.lease_name,
        identity: identity(args.identity),
        max_upstream_bytes: args.max_upstream_bytes,
        max_spec_bytes: args.max_spec_bytes,
        spec_fetch_timeout: args.spec_fetch_timeout,
        health_addr: args.health_addr,
        compile_concurrency: args.compile_concurrency,
        compile_memory_bytes: args.compile_memory_bytes,
    };
    let shutdown = CancellationToken::new();
    let on_signal = shutdown.clone();
    tokio::spawn(async move {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .expect("SIGTERM handler");
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
        on_signal.cancel();
    });
    operator::run(client, options, shutdown).await
}

async fn uninstall(args: UninstallArgs, log_format: telemetry::LogFormat) -> anyhow::Result<()> {
    let _telemetry = init_tracing(log_format)?;
    let client = kube::Client::try_default().await?;
    let options = operator::uninstall::Options {
        namespace: args.namespace,
        publish_namespace: args.publish_namespace,
        lease_name: args.lease_name,
        operator_deployment: args.operator_deployment,
        wait_timeout: args.wait_timeout,
    };
    let report = operator::uninstall::run(client, &options).await?;
    println!("uninstall: {report}");
    Ok(())
}
