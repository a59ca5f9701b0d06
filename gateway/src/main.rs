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
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Compile(args) => cli::compile::compile(args),
        Command::Lint(args) => cli::compile::lint(args),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::from(2)
        }
    }
}
