//! Test support for toolgate's cross-crate end-to-end tests.
//!
//! [`apiserver`] is an in-memory Kubernetes API server that the real
//! operator, `kube` client and `kubectl` run against over HTTP. [`tools`]
//! finds the external programs some tests drive, failing under CI when one
//! is missing. [`rbac`] records the API calls each binary makes, which the
//! deploy tests check the install's RBAC against; [`uninstall`] lists the
//! API calls of the operator's `uninstall` subcommand, which two suites
//! check. [`idp`] is a test identity provider (OIDC discovery, JWKS, token
//! exchange, introspection) for the gateway's inbound authentication.
//! [`prometheus`] scrapes and parses a `/metrics` endpoint. [`otlp`]
//! receives the spans a binary exports over OTLP/HTTP. [`monitoring`] reads
//! the metric names the chart's dashboard and alerts query and those a
//! `/metrics` scrape offers.

pub mod apiserver;
pub mod idp;
pub mod monitoring;
pub mod otlp;
pub mod prometheus;
pub mod rbac;
pub mod reference;
pub mod tools;
pub mod uninstall;

/// Serves `app` on a free loopback port in the background (a test upstream,
/// a spec server); returns its address.
pub async fn serve_loopback(app: axum::Router) -> std::net::SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a loopback port");
    let addr = listener.local_addr().expect("its address");
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    addr
}
