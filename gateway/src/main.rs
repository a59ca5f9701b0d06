//! `toolgate`: the user CLI. Parses arguments and hands over to the library;
//! each subcommand lives in `cli/`.

mod cli;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "toolgate", version, about = "OpenAPI → MCP gateway")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Compile an OpenAPI document (plus overlays) into a tool catalog.
    Compile(cli::compile::CompileArgs),
    /// Compile and print a human summary: tools, warnings, rejections.
    Lint(cli::compile::LintArgs),
    /// Serve a catalog over MCP (Streamable HTTP) until SIGTERM.
    // Boxed: the largest variant by far (clippy::large_enum_variant).
    Serve(Box<cli::serve::ServeArgs>),
    /// Start the example pet store upstream and serve its tools over MCP.
    Demo(cli::demo::DemoArgs),
}

/// Structured logs on stderr; `RUST_LOG` filters, `TOOLGATE_LOG_FORMAT=json`
/// switches to JSON lines.
fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    if std::env::var("TOOLGATE_LOG_FORMAT").as_deref() == Ok("json") {
        builder.json().init();
    } else {
        builder.init();
    }
}

/// Runs an async subcommand on a fresh runtime, with logging and TLS set up.
fn run_async<F>(command: F) -> anyhow::Result<std::process::ExitCode>
where
    F: std::future::Future<Output = anyhow::Result<()>>,
{
    init_tracing();
    gateway::upstream::install_crypto_provider();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    rt.block_on(command)?;
    Ok(std::process::ExitCode::SUCCESS)
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Compile(args) => cli::compile::compile(args),
        Command::Lint(args) => cli::compile::lint(args),
        Command::Serve(args) => run_async(cli::serve::run(*args)),
        Command::Demo(args) => run_async(cli::demo::run(args)),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::from(2)
        }
    }
}
