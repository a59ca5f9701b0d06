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
