//! The operator binary's own commands.

use std::process::{Command, Output};

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::ConfigMap;
use serde_json::json;
use toolgate_tests::apiserver::ApiServer;

#[test]
fn crds_prints_the_committed_crd_yaml() {
    let out = Command::new(env!("CARGO_BIN_EXE_toolgate-operator"))
        .arg("crds")
        .output()
        .expect("runs");
    assert!(out.status.success());
    let committed = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../crds/toolgate.dev.yaml"
    ))
    .expect("crds/toolgate.dev.yaml");
    assert!(
        String::from_utf8_lossy(&out.stdout) == committed,
        "crds/toolgate.dev.yaml is stale: regenerate it with `{}`",
        crds::CRD_REGENERATE_COMMAND
    );
}

/// Runs `toolgate-operator` with `args` against the cluster `kubeconfig`
/// names (blocking off the runtime, which serves that cluster).
async fn operator(kubeconfig: &std::path::Path, args: &[&str]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_toolgate-operator"));
    cmd.args(args)
        .env("KUBECONFIG", kubeconfig)
        .env("RUST_LOG", "warn");
    tokio::task::spawn_blocking(move || cmd.output().expect("runs"))
        .await
        .expect("the process")
}

async fn create<K>(client: &kube::Client, ns: &str, object: serde_json::Value)
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
        + Clone
        + std::fmt::Debug
        + serde::Serialize
        + serde::de::DeserializeOwned,
{
    let api: kube::Api<K> = kube::Api::namespaced(client.clone(), ns);
    let object: K = serde_json::from_value(object).expect("a valid object");
    api.create(&kube::api::PostParams::default(), &object)
        .await
        .expect("create");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uninstall_prints_what_it_did_and_a_failure_names_the_object() {
    let server = ApiServer::start().await.expect("API server");
    server
        .prepare(&crds::crds(), &["toolgate-system", "team-a"])
        .await
        .expect("CRDs and namespaces");
    let dir = tempfile::tempdir().expect("a temporary directory");
    let kubeconfig = dir.path().join("config");
    server.write_kubeconfig(&kubeconfig).expect("kubeconfig");
    let client = server.client().expect("client");
    create::<crds::McpUpstream>(
        &client,
        "team-a",
        json!({
            "apiVersion": "toolgate.dev/v1alpha1", "kind": "McpUpstream",
            "metadata": {"name": "pets", "finalizers": ["toolgate.dev/unpublish"]},
            "spec": {"toolPrefix": "pets", "baseUrl": "http://pets", "openapi": {"inline": "{}"}},
        }),
    )
    .await;
    create::<ConfigMap>(
        &client,
        "toolgate-system",
        json!({
            "metadata": {"name": "toolgate-catalog", "labels": {
                "app.kubernetes.io/part-of": "toolgate", "toolgate.dev/component": "catalog-index"}},
            "data": {"index.json": "{}"},
        }),
    )
    .await;

    let out = operator(
        &kubeconfig,
        &["uninstall", "--publish-namespace=toolgate-system"],
    )
    .await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for said in [
        "catalog ConfigMaps deleted: 1",
        "finalizer removed from 1 of 1 McpUpstreams",
    ] {
        assert!(stdout.contains(said), "{said:?} in {stdout}");
    }

    // A Lease someone holds (and would renew): it gives up, naming it.
    create::<Lease>(
        &client,
        "toolgate-system",
        json!({
            "metadata": {"name": "toolgate-operator"},
            "spec": {"holderIdentity": "elsewhere", "leaseDurationSeconds": 3600},
        }),
    )
    .await;
    let out = operator(
        &kubeconfig,
        &[
            "uninstall",
            "--publish-namespace=toolgate-system",
            "--wait-timeout=1s",
        ],
    )
    .await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("Lease toolgate-system/toolgate-operator") && stderr.contains("elsewhere"),
        "{stderr}"
    );
}

/// A child process killed when the test ends, passing or not.
struct Running(std::process::Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The binary, configured only by the standard OpenTelemetry variables,
/// exports a `reconcile` span per reconcile over OTLP/HTTP, with the
/// resource's identity and result, its stages as children, under the
/// operator's service name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_exports_a_reconcile_span_over_otlp() {
    use toolgate_tests::otlp::Receiver;

    let server = ApiServer::start().await.expect("API server");
    server
        .prepare(&crds::crds(), &["toolgate-system", "team-a"])
        .await
        .expect("prepare");
    let dir = tempfile::tempdir().expect("tempdir");
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(&kubeconfig, server.kubeconfig_as("operator")).expect("kubeconfig");
    let receiver = Receiver::start().await;

    let child = Command::new(env!("CARGO_BIN_EXE_toolgate-operator"))
        .args(["--leader-election=false", "--health-addr", "127.0.0.1:0"])
        .env("KUBECONFIG", &kubeconfig)
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.endpoint())
        // Export each batch soon after its spans end.
        .env("OTEL_BSP_SCHEDULE_DELAY", "50")
        .env_remove("OTEL_SERVICE_NAME")
        .env_remove("OTEL_RESOURCE_ATTRIBUTES")
        .env_remove("RUST_LOG")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("runs");
    let _running = Running(child);

    let client = server.client().expect("client");
    create::<crds::McpUpstream>(
        &client,
        "team-a",
        json!({
            "apiVersion": "toolgate.dev/v1alpha1",
            "kind": "McpUpstream",
            "metadata": {"name": "pets", "namespace": "team-a"},
            "spec": {
                "toolPrefix": "pets",
                "baseUrl": "http://pets:8080",
                "openapi": {"inline": "openapi: 3.0.3\ninfo: {title: Pets, version: '1'}\npaths:\n  /pets:\n    get:\n      operationId: listPets\n      responses: {'200': {description: ok}}\n"}
            }
        }),
    )
    .await;

    // The reconcile that compiled the upstream (an earlier one may only
    // have added the finalizer).
    let compile = receiver
        .wait_for("a compile step", |s| s.name == "compile")
        .await;
    let reconcile = receiver
        .wait_for("the reconcile the compile step is part of", |s| {
            compile.is_child_of(s)
        })
        .await;
    assert_eq!(reconcile.name, "reconcile McpUpstream");
    assert_eq!(reconcile.service, "toolgate-operator");
    assert_eq!(reconcile.str("toolgate.resource.kind"), Some("McpUpstream"));
    assert_eq!(reconcile.str("toolgate.resource.name"), Some("pets"));
    assert_eq!(reconcile.str("k8s.namespace.name"), Some("team-a"));
    assert_eq!(reconcile.str("toolgate.result"), Some("success"));
    // A reconcile continues no caller's trace: it is a root.
    assert_eq!(reconcile.parent_span_id, "");
    assert_eq!(compile.service, "toolgate-operator");
}

/// `docs/reference/cli-toolgate-operator.md` is what clap renders for
/// `toolgate-operator`.
#[test]
fn the_cli_reference_page_is_current() {
    const REGENERATE: &str =
        "TOOLGATE_BLESS=1 cargo test -p toolgate-operator --test cli the_cli_reference_page_is_current";
    let page = toolgate_tests::reference::cli_page(
        env!("CARGO_BIN_EXE_toolgate-operator"),
        "toolgate-operator",
        &["run", "crds", "uninstall"],
        REGENERATE,
    );
    toolgate_tests::reference::check_or_bless("cli-toolgate-operator.md", &page, REGENERATE);
}
