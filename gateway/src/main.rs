//! `toolgate`: parses the subcommand and calls into the library.

use clap::{Parser, Subcommand};

mod cli;

#[derive(Debug, Parser)]
#[command(name = "toolgate", version, about = "OpenAPI → MCP gateway")]
struct Cli {
    /// Log format: text or json.
    #[arg(long, global = true, default_value = "text", env = "TOOLGATE_LOG_FORMAT")]
    log_format: String,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Serve a catalog over MCP (Streamable HTTP).
    Serve(cli::serve::ServeArgs),
}

fn init_tracing(format: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr);
    if format == "json" {
        builder.json().init();
    } else {
        builder.init();
    }
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    init_tracing(&cli.log_format);
    gateway::upstream::install_crypto_provider();
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    match cli.command {
        Command::Serve(args) => rt.block_on(cli::serve::run(args)),
    }
}
