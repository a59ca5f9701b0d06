//! `cargo bench -p toolgate-operator --bench reconcile`: the operator binary
//! against the in-memory API server, measuring
//!
//! 1. apply → published: the time from creating an McpUpstream to its entry
//!    appearing in the published index, over 100 applies (p50/p99);
//! 2. scale: 200 upstreams cycling through the spec corpus (served over
//!    loopback HTTP, as `spec.openapi.url`), created at once: time until
//!    all are Ready, and the operator's RSS (current and peak).
//!
//! `cargo test --benches` runs a small version of both, so CI keeps it working.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crds::McpUpstream;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams, PostParams};
use serde_json::json;
use toolgate_tests::apiserver::ApiServer;

const PUBLISH_NS: &str = "toolgate-system";
const NS: &str = "bench";

fn petstore() -> String {
    String::from_utf8(toolgate_corpus::read("oai-petstore-v3.yaml")).expect("a UTF-8 petstore")
}

struct OperatorProcess(Child);

impl Drop for OperatorProcess {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl OperatorProcess {
    /// (VmRSS, VmHWM) in KiB.
    fn rss(&self) -> (u64, u64) {
        let status =
            std::fs::read_to_string(format!("/proc/{}/status", self.0.id())).unwrap_or_default();
        let field = |name: &str| {
            status
                .lines()
                .find(|l| l.starts_with(name))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
                .unwrap_or(0)
        };
        (field("VmRSS:"), field("VmHWM:"))
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn upstream(name: &str, spec: serde_json::Value) -> McpUpstream {
    serde_json::from_value(json!({
        "apiVersion": "toolgate.dev/v1alpha1",
        "kind": "McpUpstream",
        "metadata": {"name": name, "namespace": NS},
        "spec": spec,
    }))
    .expect("valid McpUpstream")
}

async fn index_has(cms: &Api<ConfigMap>, prefix: &str) -> bool {
    let Ok(Some(cm)) = cms.get_opt(crds::publish::INDEX_NAME).await else {
        return false;
    };
    let text = cm
        .data
        .and_then(|d| d.get(crds::publish::INDEX_KEY).cloned())
        .unwrap_or_default();
    catalog::publish::Index::parse(&text)
        .map(|i| i.entry(prefix).is_some())
        .unwrap_or(false)
}

#[tokio::main]
async fn main() {
    let quick = !std::env::args().any(|a| a == "--bench");
    let (applies, scale) = if quick { (5, 5) } else { (100, 200) };
    let _ = rustls::crypto::ring::default_provider().install_default();

    let server = ApiServer::start().await.expect("API server");
    let client = server.client().expect("client");
    server
        .prepare(&crds::crds(), &[PUBLISH_NS, NS])
        .await
        .expect("CRDs and namespaces");
    let dir = tempfile::tempdir().expect("tempdir");
    let kubeconfig = dir.path().join("kubeconfig");
    server.write_kubeconfig(&kubeconfig).expect("kubeconfig");
    let op = OperatorProcess(
        Command::new(env!("CARGO_BIN_EXE_toolgate-operator"))
            .args([
                "run",
                "--leader-election=false",
                "--publish-namespace",
                PUBLISH_NS,
                "--health-addr",
                "127.0.0.1:0",
            ])
            .env("KUBECONFIG", &kubeconfig)
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .spawn()
            .expect("operator starts"),
    );

    let upstreams: Api<McpUpstream> = Api::namespaced(client.clone(), NS);
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), PUBLISH_NS);

    // 1. apply → published.
    let spec = petstore();
    let mut times = Vec::new();
    for i in 0..applies {
        let prefix = format!("lat{i}");
        let u = upstream(
            &format!("lat-{i}"),
            json!({"toolPrefix": prefix, "baseUrl": "http://pets:8080", "openapi": {"inline": spec}}),
        );
        let start = Instant::now();
        upstreams
            .create(&PostParams::default(), &u)
            .await
            .expect("create");
        while !index_has(&cms, &prefix).await {
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "{prefix} never published"
            );
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        times.push(start.elapsed());
    }
    times.sort();
    println!(
        "apply → published over {applies} applies: p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
        percentile(&times, 0.5).as_secs_f64() * 1e3,
        percentile(&times, 0.99).as_secs_f64() * 1e3,
        times.last().copied().unwrap_or_default().as_secs_f64() * 1e3,
    );
    let (rss, _) = op.rss();
    println!(
        "operator RSS after {applies} petstores: {:.1} MiB",
        rss as f64 / 1024.0
    );

    // 2. scale: the corpus, served over loopback HTTP.
    let files: Vec<String> = toolgate_corpus::documents()
        .iter()
        .filter_map(|p| p.file_name())
        .map(|f| f.to_string_lossy().into_owned())
        .collect();
    let app = axum::Router::new().fallback(serve_dir(toolgate_corpus::specs_dir()));
    let addr = toolgate_tests::serve_loopback(app).await;
    let start = Instant::now();
    for i in 0..scale {
        let file = &files[i % files.len()];
        let u = upstream(
            &format!("scale-{i}"),
            json!({
                "toolPrefix": format!("s{i}"),
                "baseUrl": "http://api:8080",
                "openapi": {"url": format!("http://{addr}/{file}")},
            }),
        );
        upstreams
            .create(&PostParams::default(), &u)
            .await
            .expect("create");
    }
    let mut peak_rss = 0;
    loop {
        let list = upstreams.list(&ListParams::default()).await.expect("list");
        let done = list
            .items
            .iter()
            .filter(|u| {
                u.metadata
                    .name
                    .as_deref()
                    .is_some_and(|n| n.starts_with("scale-"))
            })
            .filter(|u| {
                u.status
                    .as_ref()
                    .and_then(|s| s.conditions.iter().find(|c| c.type_ == "Ready"))
                    .is_some()
            })
            .count();
        peak_rss = peak_rss.max(op.rss().0);
        if done == scale {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(900),
            "only {done}/{scale} reconciled"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let elapsed = start.elapsed();
    let list = upstreams.list(&ListParams::default()).await.expect("list");
    let ready = list
        .items
        .iter()
        .filter(|u| {
            u.status
                .as_ref()
                .and_then(|s| s.conditions.iter().find(|c| c.type_ == "Ready"))
                .is_some_and(|c| c.status == "True")
        })
        .count();
    let tools: u32 = list
        .items
        .iter()
        .filter_map(|u| u.status.as_ref().and_then(|s| s.tool_count))
        .sum();
    let (rss, hwm) = op.rss();
    println!(
        "{scale} corpus upstreams reconciled in {:.1} s ({ready} of {} upstreams Ready, {tools} tools); operator RSS {:.1} MiB now, {:.1} MiB peak (VmHWM)",
        elapsed.as_secs_f64(),
        list.items.len(),
        rss as f64 / 1024.0,
        hwm.max(peak_rss) as f64 / 1024.0,
    );
}

/// Serves files of one directory (the corpus) by name.
fn serve_dir(dir: PathBuf) -> axum::routing::MethodRouter {
    axum::routing::get(move |uri: axum::http::Uri| {
        let dir = dir.clone();
        async move {
            let name = uri.path().trim_start_matches('/').to_string();
            if name.contains('/') || name.starts_with('.') {
                return Err(axum::http::StatusCode::NOT_FOUND);
            }
            std::fs::read(dir.join(name)).map_err(|_| axum::http::StatusCode::NOT_FOUND)
        }
    })
}
