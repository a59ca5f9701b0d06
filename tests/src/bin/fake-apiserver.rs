//! `fake-apiserver --listen 127.0.0.1:0 --kubeconfig FILE`: runs the
//! in-memory Kubernetes API server until interrupted, printing its URL and
//! writing a kubeconfig for `kubectl --kubeconfig FILE`.

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Context;
use clap::Parser;
use toolgate_tests::apiserver::ApiServer;

#[derive(Parser)]
#[command(about = "In-memory Kubernetes API server for trying toolgate with kubectl")]
struct Args {
    /// Address to listen on; port 0 picks a free port.
    #[arg(long, default_value = "127.0.0.1:0")]
    listen: SocketAddr,
    /// Where to write a kubeconfig pointing at this server.
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let server = ApiServer::builder()
        .listen(args.listen)
        .serve()
        .await
        .context("starting the API server")?;
    if let Some(path) = &args.kubeconfig {
        server.write_kubeconfig(path)?;
        eprintln!("kubeconfig written to {}", path.display());
    }
    println!("{}", server.url());
    tokio::signal::ctrl_c()
        .await
        .context("waiting for Ctrl-C")?;
    server.shutdown().await;
    Ok(())
}
