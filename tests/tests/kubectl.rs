//! The in-memory API server driven by the real `kubectl` (a subprocess),
//! the way a person tries toolgate by hand. Without kubectl these fail
//! under CI and print a skip elsewhere (`toolgate_tests::tools`).

use std::path::{Path, PathBuf};
use std::process::Command;

use kube::api::{Api, Patch, PatchParams};
use kube::core::{ApiResource, DynamicObject, GroupVersionKind};
use serde_json::json;
use toolgate_tests::apiserver::{ApiServer, ApiServerHandle};
use toolgate_tests::tools;

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures");

struct Kubectl {
    kubectl: PathBuf,
    dir: tempfile::TempDir,
}

struct Out {
    ok: bool,
    stdout: String,
    stderr: String,
}

impl Kubectl {
    fn new(server: &ApiServerHandle, kubectl: PathBuf) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        server
            .write_kubeconfig(&dir.path().join("config"))
            .expect("kubeconfig");
        Kubectl { kubectl, dir }
    }

    fn config(&self) -> PathBuf {
        self.dir.path().join("config")
    }

    async fn run(&self, args: &[&str]) -> Out {
        let mut cmd = Command::new(&self.kubectl);
        cmd.arg("--kubeconfig").arg(self.config());
        cmd.arg("--cache-dir").arg(self.dir.path().join("cache"));
        cmd.args(args);
        let shown = format!("kubectl {}", args.join(" "));
        let out = tokio::task::spawn_blocking(move || cmd.output())
            .await
            .expect("join")
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", self.kubectl.display()));
        let o = Out {
            ok: out.status.success(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        };
        eprintln!("$ {shown}\n{}{}", o.stdout, o.stderr);
        o
    }

    async fn ok(&self, args: &[&str]) -> String {
        let o = self.run(args).await;
        assert!(o.ok, "kubectl {args:?} failed:\n{}{}", o.stdout, o.stderr);
        o.stdout
    }
}

fn fixture(name: &str) -> String {
    Path::new(FIXTURES).join(name).display().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_applies_a_crd_and_its_resource_server_side_then_gets_and_describes_it() {
    let Some(kubectl) = tools::kubectl() else {
        return;
    };
    let server = ApiServer::start().await.unwrap();
    let k = Kubectl::new(&server, kubectl);
    let crd = fixture("gadget-crd.yaml");
    let cr = fixture("gadget.yaml");
    // As against a real cluster: kubectl resolves every kind before
    // applying, so the new kind's resource fails the first time.
    let first = k
        .run(&["apply", "--server-side", "-f", &crd, "-f", &cr])
        .await;
    assert!(!first.ok);
    assert!(
        first.stdout.contains(
            "customresourcedefinition.apiextensions.k8s.io/gadgets.example.toolgate.dev serverside-applied"
        ),
        "{}",
        first.stdout
    );
    assert!(
        first.stderr.contains("ensure CRDs are installed first"),
        "{}",
        first.stderr
    );
    let out = k
        .ok(&["apply", "--server-side", "-f", &crd, "-f", &cr])
        .await;
    assert!(
        out.contains("gadget.example.toolgate.dev/petstore serverside-applied"),
        "{out}"
    );

    let table = k.ok(&["get", "gadgets"]).await;
    let header: Vec<&str> = table
        .lines()
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    assert_eq!(header, vec!["NAME", "PREFIX", "READY", "AGE"], "{table}");
    assert!(
        table
            .lines()
            .nth(1)
            .unwrap_or_default()
            .starts_with("petstore"),
        "{table}"
    );
    assert!(table.contains("pets"), "{table}");
    for alias in ["gdg", "gadget.example.toolgate.dev", "mcp"] {
        let out = k.ok(&["get", alias, "-o", "name"]).await;
        assert_eq!(
            out.trim(),
            "gadget.example.toolgate.dev/petstore",
            "kubectl get {alias}"
        );
    }

    let gvk = GroupVersionKind::gvk("example.toolgate.dev", "v1", "Gadget");
    let ar = ApiResource::from_gvk_with_plural(&gvk, "gadgets");
    let api: Api<DynamicObject> = Api::namespaced_with(server.client().unwrap(), "default", &ar);
    api.patch_status(
        "petstore",
        &PatchParams::apply("toolgate-operator"),
        &Patch::Apply(json!({"apiVersion": "example.toolgate.dev/v1", "kind": "Gadget",
            "status": {"conditions": [{"type": "Ready", "status": "True", "reason": "Published", "message": "12 tools published"}]}})),
    )
    .await
    .unwrap();
    let table = k.ok(&["get", "gadget", "petstore"]).await;
    let row: Vec<&str> = table
        .lines()
        .nth(1)
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    assert_eq!(&row[..3], &["petstore", "pets", "True"], "{table}");

    let gadget = api.get("petstore").await.unwrap();
    let recorder = kube::runtime::events::Recorder::new(
        server.client().unwrap(),
        kube::runtime::events::Reporter {
            controller: "toolgate-operator".into(),
            instance: None,
        },
    );
    let event = kube::runtime::events::Event {
        type_: kube::runtime::events::EventType::Normal,
        reason: "Published".into(),
        note: Some("catalog published with 12 tools".into()),
        action: "Publish".into(),
        secondary: None,
    };
    recorder
        .publish(&event, &kube::Resource::object_ref(&gadget, &ar))
        .await
        .unwrap();
    let described = k.ok(&["describe", "gadget", "petstore"]).await;
    for want in [
        "Name:",
        "petstore",
        "Namespace:",
        "default",
        "Tool Prefix:",
        "pets",
        "12 tools published",
        "catalog published with 12 tools",
    ] {
        assert!(
            described.contains(want),
            "describe lacks {want:?}:\n{described}"
        );
    }
    let yaml = k.ok(&["get", "gadget", "petstore", "-o", "yaml"]).await;
    assert!(
        yaml.contains("baseUrl: http://petstore.default.svc"),
        "{yaml}"
    );

    // A second apply of the same files changes nothing.
    let before = server.resource_version();
    k.ok(&["apply", "--server-side", "-f", &cr]).await;
    assert_eq!(
        server.resource_version(),
        before,
        "re-applying identical config is a no-op"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_apply_is_rejected_by_a_cel_rule_with_its_message() {
    let Some(kubectl) = tools::kubectl() else {
        return;
    };
    let server = ApiServer::start().await.unwrap();
    let k = Kubectl::new(&server, kubectl);
    k.ok(&["apply", "--server-side", "-f", &fixture("gadget-crd.yaml")])
        .await;
    let bad = k.dir.path().join("bad.yaml");
    std::fs::write(
        &bad,
        "apiVersion: example.toolgate.dev/v1\nkind: Gadget\nmetadata:\n  name: both\nspec:\n  toolPrefix: p\n  baseUrl: http://x\n  serviceRef:\n    name: svc\n",
    )
    .unwrap();
    let out = k
        .run(&["apply", "--server-side", "-f", &bad.display().to_string()])
        .await;
    assert!(!out.ok);
    assert!(
        out.stderr
            .contains("spec: Invalid value: \"object\": exactly one of baseUrl or serviceRef"),
        "{}",
        out.stderr
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_manages_built_in_kinds() {
    let Some(kubectl) = tools::kubectl() else {
        return;
    };
    let server = ApiServer::start().await.unwrap();
    let k = Kubectl::new(&server, kubectl);
    let ns = k.ok(&["get", "namespaces"]).await;
    assert!(
        ns.lines().next().unwrap_or_default().starts_with("NAME"),
        "{ns}"
    );
    assert!(ns.contains("default") && ns.contains("Active"), "{ns}");
    k.ok(&["create", "namespace", "team"]).await;
    k.ok(&[
        "-n",
        "team",
        "create",
        "configmap",
        "spec",
        "--from-literal=openapi.json={}",
    ])
    .await;
    k.ok(&[
        "-n",
        "team",
        "label",
        "configmap",
        "spec",
        "toolgate.dev/spec=true",
    ])
    .await;
    let out = k
        .ok(&[
            "-n",
            "team",
            "get",
            "cm",
            "-l",
            "toolgate.dev/spec",
            "-o",
            "name",
        ])
        .await;
    assert_eq!(out.trim(), "configmap/spec");
    let cm = k
        .ok(&[
            "-n",
            "team",
            "get",
            "configmap",
            "spec",
            "-o",
            "jsonpath={.data.openapi\\.json}",
        ])
        .await;
    assert_eq!(cm, "{}");
    k.ok(&[
        "-n",
        "team",
        "create",
        "secret",
        "generic",
        "token",
        "--from-literal=token=s3cret",
    ])
    .await;
    let data = k
        .ok(&[
            "-n",
            "team",
            "get",
            "secret",
            "token",
            "-o",
            "jsonpath={.data.token}",
        ])
        .await;
    assert_eq!(data, "czNjcmV0");
    let described = k.ok(&["describe", "namespace", "team"]).await;
    assert!(described.contains("team"), "{described}");
    k.ok(&["-n", "team", "delete", "configmap", "spec"]).await;
    let out = k.run(&["-n", "team", "get", "configmap", "spec"]).await;
    assert!(
        !out.ok && out.stderr.contains("configmaps \"spec\" not found"),
        "{}",
        out.stderr
    );
    let all = k.ok(&["api-resources", "-o", "name"]).await;
    for r in [
        "configmaps",
        "leases.coordination.k8s.io",
        "customresourcedefinitions.apiextensions.k8s.io",
    ] {
        assert!(
            all.lines().any(|l| l == r),
            "api-resources lacks {r}:\n{all}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fake_apiserver_binary_prints_its_url_and_writes_a_usable_kubeconfig() {
    use std::io::{BufRead, BufReader};
    let Some(kubectl) = tools::kubectl() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("kubeconfig");
    let mut child = Command::new(env!("CARGO_BIN_EXE_fake-apiserver"))
        .args(["--listen", "127.0.0.1:0", "--kubeconfig"])
        .arg(&config)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let url = tokio::task::spawn_blocking(move || {
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line).map(|_| line)
    })
    .await
    .unwrap()
    .unwrap();
    assert!(url.trim().starts_with("http://127.0.0.1:"), "{url}");
    let cache = dir.path().join("cache");
    let mut cmd = Command::new(kubectl);
    cmd.arg("--kubeconfig")
        .arg(&config)
        .arg("--cache-dir")
        .arg(&cache)
        .args(["get", "namespace", "default", "-o", "name"]);
    let out = tokio::task::spawn_blocking(move || cmd.output())
        .await
        .unwrap()
        .unwrap();
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "namespace/default",
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_get_watch_prints_rows_as_objects_change() {
    let Some(kubectl) = tools::kubectl() else {
        return;
    };
    let server = ApiServer::start().await.unwrap();
    let k = Kubectl::new(&server, kubectl);
    k.ok(&["create", "configmap", "first", "--from-literal=a=b"])
        .await;
    let mut cmd = Command::new(&k.kubectl);
    cmd.arg("--kubeconfig")
        .arg(k.config())
        .arg("--cache-dir")
        .arg(k.dir.path().join("cache"));
    cmd.args(["get", "configmaps", "--watch", "--request-timeout=3s"]);
    let watching = tokio::task::spawn_blocking(move || cmd.output());
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
    k.ok(&[
        "create",
        "configmap",
        "second",
        "--from-literal=a=b",
        "--from-literal=c=d",
    ])
    .await;
    let out = watching.await.unwrap().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let rows: Vec<Vec<&str>> = text
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(
        rows.first().map(|r| r[..3].to_vec()),
        Some(vec!["NAME", "DATA", "AGE"]),
        "{text}"
    );
    assert!(rows.iter().any(|r| r[..2] == ["first", "1"]), "{text}");
    assert!(
        rows.iter().any(|r| r[..2] == ["second", "2"]),
        "the watch printed the new row:\n{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_from_a_kubeconfig_as_a_user_are_counted_as_that_user() {
    let Some(kubectl) = tools::kubectl() else {
        return;
    };
    let server = ApiServer::start().await.unwrap();
    let k = Kubectl::new(&server, kubectl);
    std::fs::write(k.config(), server.kubeconfig_as("ops")).unwrap();
    k.ok(&["get", "configmaps"]).await;
    assert!(
        server.count(|r| r.user == "ops" && r.verb == "list" && r.resource == "configmaps") >= 1
    );
    assert_eq!(
        server.count(|r| r.user.is_empty() && r.resource == "configmaps"),
        0
    );
}

/// The guide's shell block (Uninstall) that removes the operator's
/// finalizer by hand.
fn readme_finalizer_patch() -> String {
    let page = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../docs/guide/uninstall.md"
    ))
    .expect("docs/guide/uninstall.md");
    page.split("```sh\n")
        .skip(1)
        .filter_map(|block| block.split("```").next())
        .find(|block| block.contains("\"op\":\"test\"") && block.contains("toolgate.dev/unpublish"))
        .expect("a block of docs/guide/uninstall.md patching toolgate.dev/unpublish away")
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_readmes_finalizer_patch_lets_stuck_upstreams_go() {
    let Some(kubectl) = tools::kubectl() else {
        return;
    };
    let server = ApiServer::start().await.unwrap();
    server
        .prepare(&crds::crds(), &["team-a", "team-b"])
        .await
        .unwrap();
    let client = server.client().unwrap();
    for (ns, name, finalizers) in [
        ("team-a", "pets", json!(["toolgate.dev/unpublish"])),
        (
            "team-b",
            "more",
            json!(["toolgate.dev/unpublish", "example.com/keep"]),
        ),
        ("team-b", "theirs", json!(["example.com/keep"])),
    ] {
        let api: Api<crds::McpUpstream> = Api::namespaced(client.clone(), ns);
        let u = serde_json::from_value(json!({
            "apiVersion": "toolgate.dev/v1alpha1", "kind": "McpUpstream",
            "metadata": {"name": name, "finalizers": finalizers},
            "spec": {"toolPrefix": name, "baseUrl": "http://x", "openapi": {"inline": "{}"}},
        }))
        .unwrap();
        api.create(&Default::default(), &u).await.unwrap();
        api.delete(name, &Default::default()).await.unwrap();
    }
    let k = Kubectl::new(&server, kubectl.clone());
    let path = format!(
        "{}:{}",
        kubectl.parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut cmd = Command::new("bash");
    cmd.arg("-c")
        .arg(readme_finalizer_patch())
        .env("KUBECONFIG", k.config())
        .env("PATH", path);
    let out = tokio::task::spawn_blocking(move || cmd.output())
        .await
        .unwrap()
        .unwrap();
    eprintln!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let get = |ns: &'static str, name: &'static str| {
        let api: Api<crds::McpUpstream> = Api::namespaced(client.clone(), ns);
        async move { api.get_opt(name).await.unwrap() }
    };
    assert!(get("team-a", "pets").await.is_none(), "released and gone");
    let more = get("team-b", "more")
        .await
        .expect("still held by example.com/keep");
    assert_eq!(more.metadata.finalizers.unwrap(), ["example.com/keep"]);
    let theirs = get("team-b", "theirs").await.expect("untouched");
    assert_eq!(theirs.metadata.finalizers.unwrap(), ["example.com/keep"]);
}

/// The guide's shell block of step `marker` of the install
/// (docs/guide/install.md), without its `rollout status` waits (no kubelet
/// or Deployment controller runs here).
fn readme_install_block(marker: &str) -> String {
    let page = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../docs/guide/install.md"
    ))
    .expect("docs/guide/install.md");
    let install = page.split("## Steps").nth(1).expect("an install section");
    let step = install
        .split(marker)
        .nth(1)
        .unwrap_or_else(|| panic!("install step {marker:?} in docs/guide/install.md"));
    let block = step
        .split("```sh\n")
        .nth(1)
        .and_then(|b| b.split("\n```").next())
        .unwrap_or_else(|| panic!("a shell block in install step {marker:?}"));
    block
        .lines()
        .filter(|l| !l.contains(" rollout status "))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Install steps 2b (kustomize, with the README's overlay for one's own
/// images and the session key created first) and 3 (the examples), run as
/// written against the API server from a checkout-like directory.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_readmes_kustomize_install_applies_in_the_order_written() {
    let Some(kubectl) = tools::kubectl() else {
        return;
    };
    let server = ApiServer::start().await.unwrap();
    let k = Kubectl::new(&server, kubectl.clone());
    let checkout = tempfile::tempdir().unwrap();
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    std::os::unix::fs::symlink(repo.join("deploy"), checkout.path().join("deploy")).unwrap();
    let path = format!(
        "{}:{}",
        kubectl.parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    for marker in ["**2b.", "**3."] {
        let script = format!("set -euo pipefail\n{}", readme_install_block(marker));
        let mut cmd = Command::new("bash");
        cmd.arg("-c")
            .arg(&script)
            .current_dir(checkout.path())
            .env("KUBECONFIG", k.config())
            .env("REGISTRY", "registry.example.com/toolgate")
            .env("PATH", &path);
        let out = tokio::task::spawn_blocking(move || cmd.output())
            .await
            .unwrap()
            .unwrap();
        assert!(
            out.status.success(),
            "README install step {marker}:\n{script}\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let images = k
        .ok(&[
            "-n",
            "toolgate-system",
            "get",
            "deploy",
            "-o",
            "jsonpath={.items[*].spec.template.spec.containers[*].image}",
        ])
        .await;
    assert_eq!(
        images.split_whitespace().collect::<Vec<_>>(),
        [
            "registry.example.com/toolgate/toolgate-gateway:0.1.0",
            "registry.example.com/toolgate/toolgate-operator:0.1.0"
        ]
    );
    let key = k
        .ok(&[
            "-n",
            "toolgate-system",
            "get",
            "secret",
            "toolgate-gateway-session-key",
            "-o",
            "jsonpath={.data.key}",
        ])
        .await;
    assert!(key.len() >= 48, "a session key of 48 random bytes: {key}");
    let upstreams = k.ok(&["get", "mcpu", "-A", "-o", "name"]).await;
    assert!(
        upstreams.contains("mcpupstream.toolgate.dev/petstore"),
        "{upstreams}"
    );
}

/// `kubectl get mcpt` shows a toolset's readiness, mode, size and age, and
/// `kubectl explain` its fields' documentation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_gets_toolsets_with_their_columns_and_explains_their_fields() {
    let Some(kubectl) = tools::kubectl() else {
        return;
    };
    let server = ApiServer::start().await.unwrap();
    server.prepare(&crds::crds(), &["team-a"]).await.unwrap();
    let k = Kubectl::new(&server, kubectl);
    let file = k.dir.path().join("toolset.yaml");
    std::fs::write(
        &file,
        "apiVersion: toolgate.dev/v1alpha1\nkind: McpToolset\nmetadata:\n  name: readers\n  namespace: team-a\nspec:\n  upstreams:\n    - name: pets\n  tools:\n    readOnly: true\n  mode: search\n",
    )
    .unwrap();
    k.ok(&["apply", "--server-side", "-f", &file.display().to_string()])
        .await;
    let api: Api<crds::McpToolset> = Api::namespaced(server.client().unwrap(), "team-a");
    api.patch_status(
        "readers",
        &PatchParams::apply("toolgate-operator"),
        &Patch::Apply(json!({"apiVersion": "toolgate.dev/v1alpha1", "kind": "McpToolset",
            "status": {"conditions": [{"type": "Ready", "status": "True", "reason": "Resolved",
                                       "message": "serves 6 tools", "lastTransitionTime": "2026-12-01T00:00:00Z"}],
                       "toolCount": 6, "listing": {"bytes": 4934, "tokens": 1234}}})),
    )
    .await
    .unwrap();

    let table = k.ok(&["get", "mcpt", "-n", "team-a"]).await;
    let mut lines = table.lines();
    let header: Vec<&str> = lines
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    assert_eq!(
        header,
        ["NAME", "READY", "MODE", "TOOLS", "TOKENS", "AGE"],
        "{table}"
    );
    let row: Vec<&str> = lines
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    assert_eq!(
        &row[..5],
        ["readers", "True", "search", "6", "1234"],
        "{table}"
    );
    let all = k.ok(&["get", "mcp", "-n", "team-a", "-o", "name"]).await;
    assert!(
        all.contains("mcptoolset.toolgate.dev/readers"),
        "in the mcp category: {all}"
    );

    let spec = k.ok(&["explain", "mcptoolset.spec"]).await;
    for want in [
        "upstreams",
        "Which McpUpstreams the toolset takes tools from",
        "tools",
        "mode",
        "pinned",
        "metaToolDescriptions",
    ] {
        assert!(spec.contains(want), "explain lacks {want:?}:\n{spec}");
    }
    let read_only = k.ok(&["explain", "mcptoolset.spec.tools.readOnly"]).await;
    assert!(read_only.contains("readOnlyHint"), "{read_only}");
    let tokens = k.ok(&["explain", "mcptoolset.status.listing.tokens"]).await;
    assert!(tokens.contains("÷ 4"), "{tokens}");
}
