//! `toolgate`: the user CLI. Parses arguments and hands over to the library;
//! each subcommand lives in `cli/`.

mod cli;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "toolgate", version, about = "OpenAPI → MCP gateway")]
struct Cli {
    #[command(subcommand)]
    command: Command,
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

/// Runs an async subcommand on a fresh runtime, with logging and TLS set up.
fn run_async<F>(
    log_format: telemetry::LogFormat,
    command: F,
) -> anyhow::Result<std::process::ExitCode>
where
    F: std::future::Future<Output = anyhow::Result<()>>,
{
    // Before the span exporter builds its HTTP client.
    gateway::net::install_crypto_provider();
    // Declared before the runtime, so dropped after it: the last spans
    // are exported once every task has ended.
    let _telemetry = telemetry::init(telemetry::Settings {
        service_name: "toolgate-gateway",
        log_format,
        // rmcp logs every stateless request's life at info (the client's
        // info, stream end, serve finished) and opens a span for it: a log
        // flood at production rates, and span events exported with every
        // traced call (measured: ADR 0025). `RUST_LOG=info` brings them back.
        default_filter: "info,rmcp=warn",
    })?;
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
        Command::Serve(args) => run_async(cli.log_format, cli::serve::run(*args)),
        Command::Demo(args) => run_async(cli.log_format, cli::demo::run(args)),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::from(2)
        }
    }
}
