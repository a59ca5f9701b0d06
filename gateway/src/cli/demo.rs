//! `toolgate demo`: start the example pet store upstream in-process and serve
//! its embedded catalog exactly as `toolgate serve` would, printing how to
//! connect an MCP client. Needs no files, cluster or network access.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use anyhow::Context;
use gateway::demo;

use super::serve::{run_with, ServeArgs};

#[derive(Debug, clap::Args)]
pub struct DemoArgs {
    /// Address the MCP gateway listens on.
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,
    /// Address the example pet store upstream listens on.
    #[arg(long, default_value = "127.0.0.1:8081")]
    pub upstream_listen: SocketAddr,
    /// Accepted Host header value (repeatable); `*` accepts any. Default:
    /// localhost, 127.0.0.1, ::1.
    #[arg(long = "allowed-host")]
    pub allowed_hosts: Vec<String>,
}

/// How a client on this machine reaches `addr`: a wildcard bind is reached
/// on loopback.
fn reachable(addr: SocketAddr) -> SocketAddr {
    let ip = match addr.ip() {
        IpAddr::V4(v4) if v4.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V6(v6) if v6.is_unspecified() => IpAddr::V6(std::net::Ipv6Addr::LOCALHOST),
        ip => ip,
    };
    SocketAddr::new(ip, addr.port())
}

pub async fn run(args: DemoArgs) -> anyhow::Result<()> {
    let catalog = demo::petstore_catalog().context("compiling the embedded pet store")?;
    let tools: Vec<String> = catalog
        .upstreams
        .iter()
        .flat_map(|u| u.tools.iter().map(|t| t.name.clone()))
        .collect();

    let listener = tokio::net::TcpListener::bind(args.upstream_listen)
        .await
        .with_context(|| format!("cannot listen on {}", args.upstream_listen))?;
    let upstream = reachable(listener.local_addr()?);
    let base_url = format!("http://{upstream}{}", demo::API_BASE);
    tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, demo::petstore_app()).await {
            tracing::error!(error = %e, "demo upstream stopped");
        }
    });
    tracing::info!(%base_url, "demo pet store upstream listening");

    let serve = ServeArgs {
        listen: args.listen,
        catalog: None,
        kube: false,
        kube_namespace: None,
        replica_id: None,
        pod_uid: None,
        credentials_dir: gateway::secret::DEFAULT_CREDENTIALS_DIR.into(),
        spec: None,
        prefix: Some(demo::PREFIX.to_string()),
        base_url: Some(base_url.clone()),
        overlay: Vec::new(),
        config: None,
        allowed_hosts: args.allowed_hosts,
        allowed_origins: Vec::new(),
        grace_period_seconds: 5.0,
        shutdown_delay_seconds: None,
        page_size: gateway::mcp::pages::DEFAULT_PAGE_SIZE,
        page_bytes: gateway::mcp::pages::DEFAULT_PAGE_BYTES,
        poll_interval_ms: 250,
        session_key_file: None,
        session_key_grace_seconds: gateway::mcp::session::DEFAULT_KEY_GRACE.as_secs(),
        max_request_body_bytes: gateway::edge::intake::DEFAULT_MAX_REQUEST_BODY_BYTES,
        max_sessions: gateway::mcp::session::DEFAULT_MAX_SESSIONS,
        max_sessions_per_caller: None,
        session_idle_timeout_seconds: gateway::mcp::session::DEFAULT_SESSION_IDLE_TIMEOUT.as_secs(),
        max_response_memory_bytes: None,
        metrics_addr: Some(super::serve::MetricsAddr(None)),
        metrics_tool_labels: None,
        metrics_tool_label_limit: None,
    };
    run_with(serve, Some(catalog), |local| {
        let mcp = format!("http://{}/mcp", reachable(local));
        println!("toolgate demo: the example pet store, served over MCP");
        println!();
        println!("  upstream (REST):  {base_url}");
        println!("  MCP URL:          {mcp}");
        println!("  tools:            {}", tools.join(", "));
        println!();
        println!("Connect a client:");
        println!("  MCP Inspector:  npx @modelcontextprotocol/inspector");
        println!("                  then Transport Type \"Streamable HTTP\", URL {mcp}");
        println!("  Claude Code:    claude mcp add --transport http toolgate-demo {mcp}");
        println!("  Client config (mcp.json / claude_desktop_config.json style):");
        println!(
            "    {{\"mcpServers\": {{\"toolgate-demo\": {{\"type\": \"http\", \"url\": \"{mcp}\"}}}}}}"
        );
        println!();
        println!("Press Ctrl-C to stop.");
    })
    .await
}
