//! The install artifacts: the Helm chart (charts/toolgate) and the kustomize
//! base (deploy/default).
//!
//! Always: the chart's CRDs are the generated ones; values.yaml satisfies
//! values.schema.json; `kubectl kustomize deploy/default` renders, applies
//! server-side to the in-memory API server, and is consistent (every
//! ServiceAccount, Role and binding it refers to exists; the gateway reads
//! one namespace and touches no Secret or Lease; container args use flags
//! the binaries have; pods are locked down). Each ServiceAccount's RBAC
//! allows every API call its binary was recorded making
//! (`toolgate_tests::rbac`, tests/fixtures/rbac) and nothing else: a call
//! without a rule fails, and so does a rule without a call — for the
//! kustomize base and, with Helm, the chart rendered with each recording's
//! values. `deploy/uninstall` is the chart's pre-delete hook, and that hook
//! (a Job running `toolgate-operator uninstall`) is granted exactly the
//! calls the subcommand makes (`toolgate_tests::uninstall::CALLS`).
//! With `TOOLGATE_DEPLOY_PYTHON` (tests/deploy/venv.sh): the chart is linted
//! and rendered by Helm's own SDK for several value sets, each render passes
//! the same checks, the default one applies and equals the kustomize base,
//! and every rendered object validates against the Kubernetes schemas
//! (kubernetes-validate). Without kubectl or that Python the tests needing
//! them fail under CI and print a skip elsewhere (`toolgate_tests::tools`).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{json, Value};
use toolgate_tests::apiserver::{ApiServer, ApiServerHandle};
use toolgate_tests::rbac::{self, Call, Recording};
use toolgate_tests::tools;
use toolgate_tests::uninstall::{Scope, CALLS};

const NS: &str = "toolgate-system";

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn read(rel: &str) -> String {
    let path = repo().join(rel);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn yaml_docs(text: &str) -> Vec<Value> {
    use serde::Deserialize;
    yaml_serde::Deserializer::from_str(text)
        .map(|d| Value::deserialize(d).expect("valid YAML"))
        .filter(|v| !v.is_null())
        .collect()
}

fn run(cmd: &mut Command) -> Result<String, String> {
    let shown = format!("{cmd:?}");
    match cmd.output() {
        Ok(out) if out.status.success() => Ok(String::from_utf8_lossy(&out.stdout).into_owned()),
        Ok(out) => Err(format!(
            "{shown} failed:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )),
        Err(e) => Err(format!("{shown}: {e}")),
    }
}

fn kustomize_base(kubectl: &Path) -> String {
    kustomize(kubectl, "deploy/default")
}

fn kustomize(kubectl: &Path, dir: &str) -> String {
    run(Command::new(kubectl).arg("kustomize").arg(repo().join(dir)))
        .unwrap_or_else(|e| panic!("{e}"))
}

fn render_chart(python: &Path, values: &Value) -> String {
    let repo = repo();
    run(Command::new(python)
        .arg(repo.join("tests/deploy/render_chart.py"))
        .arg(repo.join("charts/toolgate"))
        .args(["toolgate", NS])
        .arg(values.to_string()))
    .unwrap_or_else(|e| panic!("{e}"))
}

/// Helm's message when the chart does not render with `values` (the
/// schema or a template refuses them); panics when it renders.
fn render_chart_refused(python: &Path, values: &Value) -> String {
    let out = Command::new(python)
        .arg(repo().join("tests/deploy/render_chart.py"))
        .arg(repo().join("charts/toolgate"))
        .args(["toolgate", NS])
        .arg(values.to_string())
        .output()
        .unwrap();
    assert!(!out.status.success(), "{values} must be refused");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

async fn apply(server: &ApiServerHandle, kubectl: &Path, manifests: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config");
    server.write_kubeconfig(&config).unwrap();
    let file = dir.path().join("install.yaml");
    std::fs::write(&file, manifests).unwrap();
    let mut cmd = Command::new(kubectl);
    cmd.arg("--kubeconfig")
        .arg(&config)
        .arg("--cache-dir")
        .arg(dir.path().join("cache"))
        .args(["apply", "--server-side", "-f"])
        .arg(&file);
    tokio::task::spawn_blocking(move || run(&mut cmd))
        .await
        .unwrap()
        .unwrap_or_else(|e| panic!("{e}"))
}

fn name(o: &Value) -> &str {
    o["metadata"]["name"].as_str().unwrap_or_default()
}

fn namespace(o: &Value) -> Option<&str> {
    o["metadata"]["namespace"].as_str()
}

fn find<'a>(objs: &'a [Value], kind: &str, ns: Option<&str>, n: &str) -> Option<&'a Value> {
    objs.iter()
        .find(|o| o["kind"] == kind && name(o) == n && namespace(o) == ns)
}

fn strs(v: &Value) -> Vec<&str> {
    v.as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

/// One RBAC rule, with where it applies (None: every namespace) and where
/// it comes from (for messages).
struct Grant<'a> {
    scope: Option<&'a str>,
    rule: &'a Value,
    /// `ClusterRole toolgate-operator-watch rule 3 (bound by ...)`.
    origin: String,
}

/// What the bindings in `objs` grant ServiceAccount `ns/sa`; every roleRef
/// must resolve.
fn grants<'a>(objs: &'a [Value], ns: &str, sa: &str) -> Vec<Grant<'a>> {
    let mut out = Vec::new();
    for b in objs
        .iter()
        .filter(|o| o["kind"] == "RoleBinding" || o["kind"] == "ClusterRoleBinding")
    {
        let bound = b["subjects"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|s| s["kind"] == "ServiceAccount" && s["name"] == sa && s["namespace"] == ns);
        if !bound {
            continue;
        }
        let role_kind = b["roleRef"]["kind"].as_str().unwrap_or_default();
        let role_name = b["roleRef"]["name"].as_str().unwrap_or_default();
        let (role, scope) = match role_kind {
            "Role" => {
                assert_eq!(
                    b["kind"],
                    "RoleBinding",
                    "{}: a Role is bound by a RoleBinding",
                    name(b)
                );
                (find(objs, "Role", namespace(b), role_name), namespace(b))
            }
            "ClusterRole" => (
                find(objs, "ClusterRole", None, role_name),
                namespace(b).filter(|_| b["kind"] == "RoleBinding"),
            ),
            k => panic!("{}: roleRef kind {k}", name(b)),
        };
        let role = role.unwrap_or_else(|| {
            panic!(
                "{} {}: roleRef {role_kind} {role_name} does not exist",
                b["kind"],
                name(b)
            )
        });
        for (i, rule) in role["rules"].as_array().into_iter().flatten().enumerate() {
            let origin = format!(
                "{role_kind} {role_name} rule {} {} (bound by {} {})",
                i + 1,
                json!({"apiGroups": rule["apiGroups"], "resources": rule["resources"],
                       "verbs": rule["verbs"], "resourceNames": rule["resourceNames"]}),
                b["kind"].as_str().unwrap_or_default(),
                name(b)
            );
            out.push(Grant {
                scope,
                rule,
                origin,
            });
        }
    }
    out
}

/// Whether `grants` allow `verb` on `group`/`resource` (optionally object
/// `object`) in namespace `ns` (None: cluster-wide).
fn allowed(
    grants: &[Grant],
    ns: Option<&str>,
    group: &str,
    resource: &str,
    verb: &str,
    object: Option<&str>,
) -> bool {
    grants.iter().any(|g| {
        let scope_ok = g.scope.is_none() || g.scope == ns;
        let names = strs(&g.rule["resourceNames"]);
        scope_ok
            && strs(&g.rule["apiGroups"]).contains(&group)
            && strs(&g.rule["resources"]).contains(&resource)
            && strs(&g.rule["verbs"]).contains(&verb)
            && (names.is_empty() || object.is_some_and(|o| names.contains(&o)))
    })
}

/// A binary built next to this test, if any.
fn built(binary: &str) -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    Some(exe.parent()?.parent()?.join(binary)).filter(|p| p.exists())
}

/// Long flags a binary's subcommand accepts, from its `--help` when the
/// binary is built next to this test (required under CI, where
/// `cargo test --workspace` builds it); otherwise (or for flags the
/// branch's binary does not have yet) the contract's.
fn flags(binary: &str, subcommand: &str, contract: &[&str]) -> BTreeSet<String> {
    let mut out: BTreeSet<String> = BTreeSet::new();
    let path = built(binary);
    let package = if binary == "toolgate" {
        "gateway"
    } else {
        binary
    };
    let path = tools::required(
        path,
        &format!("the {binary} binary (built next to the tests)"),
        &format!(
            "cargo build -p {package} --bin {binary}; until then its flags come from the contract"
        ),
    );
    let help = path.map(|p| {
        run(Command::new(p).args([subcommand, "--help"])).unwrap_or_else(|e| panic!("{e}"))
    });
    match help {
        Some(help) => {
            for word in help.split(|c: char| !(c.is_ascii_alphanumeric() || c == '-')) {
                if word.starts_with("--") && word.len() > 2 {
                    out.insert(word.to_string());
                }
            }
            for f in contract {
                if !out.contains(*f) {
                    eprintln!(
                        "NOTE: `{binary} {subcommand}` has no {f} yet; taken from the contract"
                    );
                    out.insert(f.to_string());
                }
            }
        }
        None => out.extend(contract.iter().map(|f| f.to_string())),
    }
    out
}

const GATEWAY_SERVE_FLAGS: &[&str] = &[
    "--kube",
    "--kube-namespace",
    "--listen",
    "--allowed-host",
    "--allowed-origin",
    "--grace-period-seconds",
    "--shutdown-delay-seconds",
    "--page-size",
    "--page-bytes",
    "--config",
    "--metrics-addr",
];

const OPERATOR_RUN_FLAGS: &[&str] = &[
    "--namespace",
    "--secret-namespaces",
    "--publish-namespace",
    "--leader-election",
    "--lease-name",
    "--identity",
    "--max-upstream-bytes",
    "--health-addr",
    "--compile-concurrency",
];

fn deployment<'a>(objs: &'a [Value], container: &str) -> &'a Value {
    objs.iter()
        .find(|o| {
            o["kind"] == "Deployment"
                && o["spec"]["template"]["spec"]["containers"][0]["name"] == container
        })
        .unwrap_or_else(|| panic!("no Deployment with a container {container:?}"))
}

fn check_args(d: &Value, subcommand: &str, known: &BTreeSet<String>) -> Vec<String> {
    let args: Vec<String> = strs(&d["spec"]["template"]["spec"]["containers"][0]["args"])
        .into_iter()
        .map(String::from)
        .collect();
    assert_eq!(
        args.first().map(String::as_str),
        Some(subcommand),
        "{}: {args:?}",
        name(d)
    );
    for a in &args {
        if let Some(flag) = a
            .strip_prefix("--")
            .map(|f| format!("--{}", f.split('=').next().unwrap()))
        {
            assert!(
                known.contains(&flag),
                "{}: unknown flag {flag} in {args:?}",
                name(d)
            );
        }
    }
    args
}

/// Values after each `flag` in `args`.
fn flag_values<'a>(args: &'a [String], flag: &str) -> Vec<&'a str> {
    args.windows(2)
        .filter(|w| w[0] == flag)
        .map(|w| w[1].as_str())
        .collect()
}

const OPERATOR_UNINSTALL_FLAGS: &[&str] = &[
    "--namespace",
    "--publish-namespace",
    "--lease-name",
    "--operator-deployment",
    "--wait-timeout",
];

/// Whether `o` is a Helm hook (not installed; run at its event).
fn is_hook(o: &Value) -> bool {
    o["metadata"]["annotations"]["helm.sh/hook"].is_string()
}

/// `o` without its hooks.
fn installed(objs: &[Value]) -> Vec<Value> {
    objs.iter().filter(|o| !is_hook(o)).cloned().collect()
}

fn hook_weight(o: &Value) -> i64 {
    o["metadata"]["annotations"]["helm.sh/hook-weight"]
        .as_str()
        .unwrap_or("0")
        .parse()
        .unwrap_or_else(|e| panic!("{}: hook weight: {e}", name(o)))
}

/// The pre-delete hook running `toolgate-operator uninstall`: a Job after
/// its ServiceAccount and RBAC, all deleted once they succeed, the Job's
/// args naming the operator's Deployment, Lease and namespaces, its RBAC
/// granting exactly [`CALLS`]. Returns the Job.
fn check_uninstall_hook<'a>(objs: &'a [Value], ns: &str, watch: Option<&str>) -> &'a Value {
    let hooks: Vec<&Value> = objs.iter().filter(|o| is_hook(o)).collect();
    let job = hooks
        .iter()
        .find(|o| o["kind"] == "Job")
        .copied()
        .expect("a hook Job");
    assert_eq!(namespace(job), Some(ns));
    for h in &hooks {
        let a = &h["metadata"]["annotations"];
        assert_eq!(a["helm.sh/hook"], "pre-delete", "{}", name(h));
        let policy = a["helm.sh/hook-delete-policy"].as_str().unwrap_or_default();
        for p in ["before-hook-creation", "hook-succeeded"] {
            assert!(policy.split(',').any(|x| x == p), "{}: {policy}", name(h));
        }
        if h["kind"] != "Job" {
            assert!(
                hook_weight(h) < hook_weight(job),
                "{} {} exists before the Job",
                h["kind"],
                name(h)
            );
        }
    }
    let spec = &job["spec"];
    let pod = &spec["template"]["spec"];
    assert_eq!(pod["restartPolicy"], "Never");
    assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
    let c = &pod["containers"][0];
    assert_eq!(c["securityContext"]["readOnlyRootFilesystem"], true);
    assert_eq!(c["securityContext"]["allowPrivilegeEscalation"], false);
    assert!(c["resources"]["limits"]["memory"].is_string());
    let deadline = spec["activeDeadlineSeconds"].as_u64().expect("a deadline");
    let args = check_args(
        job,
        "uninstall",
        &flags("toolgate-operator", "uninstall", OPERATOR_UNINSTALL_FLAGS),
    );
    let op = deployment(objs, "operator");
    let op_args = strs(&op["spec"]["template"]["spec"]["containers"][0]["args"]);
    let lease = op_args
        .iter()
        .find_map(|a| a.strip_prefix("--lease-name="))
        .expect("the operator's --lease-name");
    for want in [
        format!("--operator-deployment={}", name(op)),
        format!("--lease-name={lease}"),
        format!("--publish-namespace={ns}"),
    ] {
        assert!(args.contains(&want), "{want} in {args:?}");
    }
    match watch {
        Some(w) => assert!(args.contains(&format!("--namespace={w}")), "{args:?}"),
        None => assert!(
            !args.iter().any(|a| a.starts_with("--namespace")),
            "{args:?}"
        ),
    }
    if let Some(exe) = built("toolgate-operator") {
        // Values too, not only flag names: clap parses every argument
        // before it acts on --help.
        let mut cmd = Command::new(exe);
        cmd.args(&args).arg("--help");
        run(&mut cmd).unwrap_or_else(|e| panic!("the Job's args do not parse: {e}"));
    }
    let wait: u64 = args
        .iter()
        .find_map(|a| a.strip_prefix("--wait-timeout=")?.strip_suffix('s'))
        .expect("--wait-timeout=<seconds>s")
        .parse()
        .expect("seconds");
    assert!(
        wait < deadline,
        "the subcommand gives up before the Job's deadline"
    );

    // RBAC: every call granted, nothing else.
    let sa = pod["serviceAccountName"]
        .as_str()
        .expect("its ServiceAccount");
    assert!(
        hooks
            .iter()
            .any(|o| o["kind"] == "ServiceAccount" && name(o) == sa),
        "ServiceAccount {sa} is a hook"
    );
    let g = grants(objs, ns, sa);
    for c in CALLS {
        let scope = match c.scope {
            Scope::Publish => Some(ns),
            Scope::Watched => watch,
        };
        assert!(
            allowed(&g, scope, c.group, c.resource, c.verb, c.name),
            "the uninstall Job may not {} {}/{} {:?} in {scope:?}",
            c.verb,
            c.group,
            c.resource,
            c.name
        );
        if let (Scope::Watched, Some(_)) = (c.scope, watch) {
            assert!(!allowed(
                &g,
                Some("elsewhere"),
                c.group,
                c.resource,
                c.verb,
                None
            ));
        }
    }
    for grant in &g {
        for group in strs(&grant.rule["apiGroups"]) {
            for resource in strs(&grant.rule["resources"]) {
                for verb in strs(&grant.rule["verbs"]) {
                    let names = strs(&grant.rule["resourceNames"]);
                    assert!(
                        CALLS.iter().any(|c| c.group == group
                            && c.resource == resource
                            && c.verb == verb
                            && (c.name.is_none() || names == [c.name.unwrap_or_default()])),
                        "the uninstall Job may {verb} {group}/{resource} (resourceNames {names:?}), beyond what it does"
                    );
                }
            }
        }
    }
    job
}

fn check_pod_hardening(d: &Value) {
    let pod = &d["spec"]["template"]["spec"];
    let who = name(d);
    assert_eq!(pod["securityContext"]["runAsNonRoot"], true, "{who}");
    assert_eq!(
        pod["securityContext"]["seccompProfile"]["type"], "RuntimeDefault",
        "{who}"
    );
    for c in pod["containers"].as_array().unwrap() {
        let sc = &c["securityContext"];
        assert_eq!(sc["readOnlyRootFilesystem"], true, "{who}");
        assert_eq!(sc["allowPrivilegeEscalation"], false, "{who}");
        assert_eq!(strs(&sc["capabilities"]["drop"]), ["ALL"], "{who}");
        assert!(
            c["resources"]["requests"].is_object(),
            "{who}: resource requests"
        );
        assert!(
            c["resources"]["limits"]["memory"].is_string(),
            "{who}: a memory limit"
        );
        assert!(c["readinessProbe"]["httpGet"]["path"] == "/readyz", "{who}");
        assert!(c["livenessProbe"]["httpGet"]["path"] == "/healthz", "{who}");
    }
}

/// The shutdown arithmetic of the gateway's pod: unready before the
/// shutdown delay is over, and not killed before delay and grace period.
fn check_drain(pod: &Value, c: &Value, args: &[String]) {
    let seconds = |flag: &str| -> f64 {
        let v = flag_values(args, flag);
        v.first()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("{flag} is set: {args:?}"))
    };
    let delay = seconds("--shutdown-delay-seconds");
    let grace = seconds("--grace-period-seconds");
    assert!(
        delay > 0.0,
        "a rollout drains: --shutdown-delay-seconds {delay}"
    );
    let termination = pod["terminationGracePeriodSeconds"].as_f64().unwrap();
    assert!(
        termination > delay + grace,
        "terminationGracePeriodSeconds {termination} <= delay {delay} + grace {grace}"
    );
    let probe = &c["readinessProbe"];
    let unready = probe["periodSeconds"].as_f64().unwrap_or(10.0)
        * probe["failureThreshold"].as_f64().unwrap_or(3.0);
    assert!(
        unready < delay,
        "readiness fails after {unready} s, not within the {delay} s delay"
    );
}

/// The session key: a file from an optional Secret volume, so the first
/// install serves before the Secret exists (the gateway picks it up later).
fn check_session_key(pod: &Value, c: &Value) -> String {
    let file = c["env"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "TOOLGATE_SESSION_KEY_FILE")
        .and_then(|e| e["value"].as_str())
        .expect("TOOLGATE_SESSION_KEY_FILE");
    let mount = c["volumeMounts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| {
            m["mountPath"]
                .as_str()
                .is_some_and(|p| file.starts_with(&format!("{p}/")))
        })
        .unwrap_or_else(|| panic!("no volume mounted over {file}"));
    let volume = pod["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == mount["name"])
        .expect("the session key volume");
    assert_eq!(volume["secret"]["optional"], true, "{volume}");
    volume["secret"]["secretName"].as_str().unwrap().to_string()
}

fn env_from_field<'a>(c: &'a Value, var: &str) -> Option<&'a str> {
    c["env"].as_array()?.iter().find(|e| e["name"] == var)?["valueFrom"]["fieldRef"]["fieldPath"]
        .as_str()
}

fn selects(selector: &Value, labels: &Value) -> bool {
    selector
        .as_object()
        .is_some_and(|s| !s.is_empty() && s.iter().all(|(k, v)| &labels[k] == v))
}

/// The checks every rendering of the install must pass. `watch`: the
/// namespace the operator is limited to, if any.
fn check_install(objs: &[Value], ns: &str, watch: Option<&str>) {
    assert!(
        objs.iter().all(|o| o["kind"] == "Namespace"
            || o["kind"] == "CustomResourceDefinition"
            || o["kind"] == "ClusterRole"
            || o["kind"] == "ClusterRoleBinding"
            || namespace(o).is_some()),
        "every namespaced object names its namespace"
    );
    for o in objs
        .iter()
        .filter(|o| o["kind"] == "Role" || o["kind"] == "ClusterRole")
    {
        for rule in o["rules"].as_array().unwrap() {
            for field in ["apiGroups", "resources", "verbs"] {
                assert!(
                    !strs(&rule[field]).contains(&"*"),
                    "{}: wildcard {field}",
                    name(o)
                );
            }
        }
    }

    // Operator.
    let op = deployment(objs, "operator");
    let op_ns = namespace(op).unwrap();
    assert_eq!(op_ns, ns);
    check_pod_hardening(op);
    let op_sa = op["spec"]["template"]["spec"]["serviceAccountName"]
        .as_str()
        .unwrap();
    assert!(
        find(objs, "ServiceAccount", Some(ns), op_sa).is_some(),
        "ServiceAccount {op_sa}"
    );
    let args = check_args(
        op,
        "run",
        &flags("toolgate-operator", "run", OPERATOR_RUN_FLAGS),
    );
    let op_c = &op["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(
        env_from_field(op_c, "POD_NAMESPACE"),
        Some("metadata.namespace")
    );
    assert_eq!(env_from_field(op_c, "POD_NAME"), Some("metadata.name"));
    assert!(
        args.contains(&"--leader-election=true".to_string()),
        "{args:?}"
    );
    match watch {
        Some(w) => assert!(args.contains(&format!("--namespace={w}")), "{args:?}"),
        None => assert!(
            !args.iter().any(|a| a.starts_with("--namespace")),
            "{args:?}"
        ),
    }
    // What it may do is checked against what it does (the recorded calls,
    // `the_rbac_allows_exactly_the_recorded_calls`); here, what it must not.
    let g = grants(objs, ns, op_sa);
    if let Some(w) = watch {
        assert!(
            !allowed(
                &g,
                Some("elsewhere"),
                "toolgate.dev",
                "mcpupstreams",
                "list",
                None
            ),
            "watching {w} only, the operator may still list upstreams elsewhere"
        );
    }
    for (verb, object) in [("delete", "toolgate-credentials"), ("update", "other")] {
        assert!(
            !allowed(&g, Some(ns), "", "secrets", verb, Some(object)),
            "operator may {verb} Secret {object}"
        );
    }
    for (verb, object) in [("update", "other"), ("delete", "toolgate-operator")] {
        assert!(
            !allowed(
                &g,
                Some(ns),
                "coordination.k8s.io",
                "leases",
                verb,
                Some(object)
            ),
            "operator may {verb} Lease {object}"
        );
    }

    // Gateway.
    let gw = deployment(objs, "gateway");
    assert_eq!(namespace(gw), Some(ns));
    check_pod_hardening(gw);
    let pod = &gw["spec"]["template"]["spec"];
    let gw_sa = pod["serviceAccountName"].as_str().unwrap();
    assert!(
        find(objs, "ServiceAccount", Some(ns), gw_sa).is_some(),
        "ServiceAccount {gw_sa}"
    );
    let args = check_args(
        gw,
        "serve",
        &flags("toolgate", "serve", GATEWAY_SERVE_FLAGS),
    );
    assert!(args.contains(&"--kube".to_string()), "{args:?}");
    let listen = flag_values(&args, "--listen");
    let host = listen
        .first()
        .and_then(|l| l.strip_suffix(":8080"))
        .unwrap_or_else(|| panic!("--listen on port 8080: {listen:?}"));
    let op_args = strs(&op["spec"]["template"]["spec"]["containers"][0]["args"]);
    assert!(
        op_args.contains(&format!("--health-addr={host}:8081").as_str()),
        "the operator listens where the gateway does ({host}): {op_args:?}"
    );
    let c = &pod["containers"][0];
    check_drain(pod, c, &args);
    check_session_key(pod, c);
    assert_eq!(
        env_from_field(c, "POD_NAMESPACE"),
        Some("metadata.namespace")
    );
    let g = grants(objs, ns, gw_sa);
    assert!(
        !allowed(&g, Some("elsewhere"), "", "configmaps", "list", None),
        "gateway reads other namespaces"
    );
    for v in ["get", "create", "update", "patch", "delete"] {
        assert!(
            !allowed(
                &g,
                Some(ns),
                "coordination.k8s.io",
                "leases",
                v,
                Some("toolgate-operator")
            ),
            "gateway may {v} the operator's leader Lease"
        );
    }
    assert_eq!(env_from_field(c, "POD_NAME"), Some("metadata.name"));
    for (r, v) in [
        ("configmaps", "update"),
        ("configmaps", "patch"),
        ("secrets", "get"),
        ("secrets", "list"),
    ] {
        assert!(
            !allowed(&g, Some(ns), "", r, v, None),
            "gateway may {v} {r}"
        );
    }
    let mount = c["volumeMounts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["mountPath"] == "/var/run/toolgate/credentials")
        .expect("credentials mounted at /var/run/toolgate/credentials");
    let volume = pod["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == mount["name"])
        .expect("the credentials volume");
    assert_eq!(
        volume["secret"],
        json!({"secretName": "toolgate-credentials", "optional": true})
    );

    let svc = find(objs, "Service", Some(ns), name(gw)).expect("the gateway Service");
    let pod_labels = &gw["spec"]["template"]["metadata"]["labels"];
    assert!(
        selects(&svc["spec"]["selector"], pod_labels),
        "the Service selects the gateway pods"
    );
    assert!(selects(&gw["spec"]["selector"]["matchLabels"], pod_labels));
    assert!(!selects(
        &svc["spec"]["selector"],
        &op["spec"]["template"]["metadata"]["labels"]
    ));
    let port = &svc["spec"]["ports"][0];
    assert_eq!(port["port"], 8080);
    assert!(
        c["ports"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["name"] == port["targetPort"]),
        "targetPort names a container port"
    );
    let hosts = flag_values(&args, "--allowed-host");
    let svc_name = name(svc);
    for h in [svc_name.to_string(), format!("{svc_name}.{ns}.svc")] {
        assert!(
            hosts.contains(&h.as_str()),
            "--allowed-host {h} missing: {hosts:?}"
        );
    }
    check_metrics_services(objs, ns, &args);
    for pdb in objs.iter().filter(|o| o["kind"] == "PodDisruptionBudget") {
        assert!(selects(&pdb["spec"]["selector"]["matchLabels"], pod_labels));
    }
    for ing in objs.iter().filter(|o| o["kind"] == "Ingress") {
        for rule in ing["spec"]["rules"].as_array().unwrap() {
            if let Some(host) = rule["host"].as_str() {
                assert!(hosts.contains(&host), "the gateway accepts Host {host}");
            }
            for p in rule["http"]["paths"].as_array().unwrap() {
                assert_eq!(p["path"], "/mcp");
                assert_eq!(p["backend"]["service"]["name"], svc_name);
                assert_eq!(p["backend"]["service"]["port"]["name"], port["name"]);
            }
        }
    }
}

/// The metrics Services: each component's `/metrics` behind a headless
/// Service of its own, port `metrics`, selecting that component's pods
/// only, on the port the binary listens on (the gateway's `--metrics-addr`
/// beside its `--listen` host; the operator's `--health-addr`). `gw_args`:
/// the gateway's arguments.
fn check_metrics_services(objs: &[Value], ns: &str, gw_args: &[String]) {
    let listen_host = flag_values(gw_args, "--listen")[0]
        .rsplit_once(':')
        .map(|(h, _)| h.to_string())
        .expect("--listen host:port");
    let op = deployment(objs, "operator");
    let op_args = strs(&op["spec"]["template"]["spec"]["containers"][0]["args"]);
    let health = op_args
        .iter()
        .find_map(|a| a.strip_prefix("--health-addr="))
        .expect("--health-addr");
    let metrics_addr = flag_values(gw_args, "--metrics-addr");
    let [metrics_addr] = metrics_addr[..] else {
        panic!("one --metrics-addr: {gw_args:?}")
    };
    for (component, addr) in [("gateway", metrics_addr), ("operator", health)] {
        let d = deployment(objs, component);
        let svc = find(objs, "Service", Some(ns), &format!("{}-metrics", name(d)))
            .unwrap_or_else(|| panic!("the {component}'s metrics Service"));
        assert_eq!(svc["spec"]["clusterIP"], "None", "{}: headless", name(svc));
        let labels = &d["spec"]["template"]["metadata"]["labels"];
        assert!(selects(&svc["spec"]["selector"], labels), "{}", name(svc));
        let other = if component == "gateway" {
            "operator"
        } else {
            "gateway"
        };
        assert!(!selects(
            &svc["spec"]["selector"],
            &deployment(objs, other)["spec"]["template"]["metadata"]["labels"]
        ));
        let ports = svc["spec"]["ports"].as_array().expect("ports");
        assert_eq!(ports.len(), 1, "{}: /metrics only", name(svc));
        assert_eq!(ports[0]["name"], "metrics");
        let c = &d["spec"]["template"]["spec"]["containers"][0];
        let target = c["ports"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == ports[0]["targetPort"])
            .unwrap_or_else(|| panic!("{}: targetPort names a container port", name(svc)));
        let (host, port) = addr.rsplit_once(':').expect("host:port");
        assert_eq!(
            host, listen_host,
            "{component} listens where the gateway does"
        );
        assert_eq!(
            target["containerPort"].to_string(),
            port,
            "{component}: {addr}"
        );
        assert_eq!(ports[0]["port"].to_string(), port);
    }
    // The MCP routes never reach /metrics.
    let metrics_svc = format!("{}-metrics", name(deployment(objs, "gateway")));
    for o in objs
        .iter()
        .filter(|o| o["kind"] == "Ingress" || o["kind"] == "HTTPRoute")
    {
        assert!(
            !o.to_string().contains(&format!("\"{metrics_svc}\"")),
            "{} {} routes to {metrics_svc}",
            o["kind"],
            name(o)
        );
    }
}

/// Whether `g` allows `call`, as RBAC decides it.
fn grant_allows(g: &Grant, call: &Call) -> bool {
    let scope_ok = match (g.scope, call.namespace.as_str()) {
        (None, _) => true,
        (Some(_), rbac::ALL_NAMESPACES) => false,
        (Some(scope), ns) => scope == ns,
    };
    let names = strs(&g.rule["resourceNames"]);
    scope_ok
        && strs(&g.rule["apiGroups"]).contains(&call.group.as_str())
        && strs(&g.rule["resources"]).contains(&call.resource.as_str())
        && strs(&g.rule["verbs"]).contains(&call.verb.as_str())
        && (names.is_empty() || names.contains(&call.name.as_str()))
}

/// Whether `values` sets everything `subset` sets, to the same values.
fn sets_all(values: &Value, subset: &Value) -> bool {
    match subset {
        Value::Object(m) => m.iter().all(|(k, v)| sets_all(&values[k], v)),
        v => values == v,
    }
}

/// How many settings `values` makes.
fn settings(values: &Value) -> usize {
    match values {
        Value::Object(m) => m.values().map(settings).sum(),
        _ => 1,
    }
}

/// Checks the RBAC of an install (`objs`, rendered with chart `values`;
/// `what` names it) against the recorded calls: for each ServiceAccount,
/// the recording made with the most specific of the values `values`
/// includes. Every recorded call must be allowed by a rule bound to its
/// ServiceAccount, and every verb of every such rule (for each of its
/// `resourceNames`) must be used by a recorded call. Returns one message
/// per violation.
fn check_recorded(
    objs: &[Value],
    ns: &str,
    values: &Value,
    recordings: &[(String, Recording)],
    what: &str,
) -> Vec<String> {
    let mut errors = Vec::new();
    // Every ServiceAccount the install binds must have recorded calls. The
    // pre-delete hook's are `check_uninstall_hook`'s: its RBAC must grant
    // exactly `toolgate_tests::uninstall::CALLS`, which the operator suite
    // checks against the calls an uninstall run makes.
    let mut bound: BTreeSet<&str> = BTreeSet::new();
    for b in objs.iter().filter(|o| {
        (o["kind"] == "RoleBinding" || o["kind"] == "ClusterRoleBinding") && !is_hook(o)
    }) {
        for s in b["subjects"].as_array().into_iter().flatten() {
            if s["kind"] == "ServiceAccount" && s["namespace"] == ns {
                bound.insert(s["name"].as_str().unwrap_or_default());
            }
        }
    }
    for sa in &bound {
        if !recordings.iter().any(|(_, r)| r.service_account == *sa) {
            errors.push(format!(
                "{what}: ServiceAccount {sa} is granted RBAC but no recording in {} says what it does \
                 (add a recording test: see toolgate_tests::rbac)",
                rbac::DIR
            ));
        }
    }
    let accounts: BTreeSet<&str> = recordings
        .iter()
        .map(|(_, r)| r.service_account.as_str())
        .collect();
    for sa in accounts {
        let Some((file, rec)) = recordings
            .iter()
            .filter(|(_, r)| r.service_account == sa && sets_all(values, &r.values))
            .max_by_key(|(_, r)| settings(&r.values))
        else {
            errors.push(format!(
                "{what}: no recording for ServiceAccount {sa} applies to values {values}"
            ));
            continue;
        };
        if find(objs, "ServiceAccount", Some(ns), sa).is_none() {
            errors.push(format!("{what}: no ServiceAccount {sa}"));
            continue;
        }
        let g = grants(objs, ns, sa);
        for call in &rec.calls {
            if !g.iter().any(|g| grant_allows(g, call)) {
                errors.push(format!(
                    "{what}: no rule lets ServiceAccount {sa} {call} (recorded in {}/{file}): add one",
                    rbac::DIR
                ));
            }
        }
        for grant in &g {
            let names = strs(&grant.rule["resourceNames"]);
            let names: Vec<Option<&str>> = if names.is_empty() {
                vec![None]
            } else {
                names.into_iter().map(Some).collect()
            };
            for group in strs(&grant.rule["apiGroups"]) {
                for resource in strs(&grant.rule["resources"]) {
                    for verb in strs(&grant.rule["verbs"]) {
                        for object in &names {
                            let used = rec.calls.iter().any(|c| {
                                c.group == group
                                    && c.resource == resource
                                    && c.verb == verb
                                    && object.is_none_or(|n| c.name == n)
                                    && grant.scope.is_none_or(|s| c.namespace == s)
                            });
                            if !used {
                                let object = object.map(|n| format!(" {n:?}")).unwrap_or_default();
                                let scope = grant.scope.unwrap_or("any namespace");
                                let group = if group.is_empty() { "core" } else { group };
                                errors.push(format!(
                                    "{what}: {}: nothing ServiceAccount {sa} does uses `{verb} {group}/{resource}{object}` in {scope} \
                                     (recorded in {}/{file}): remove it, or record the call that needs it",
                                    grant.origin,
                                    rbac::DIR
                                ));
                            }
                        }
                    }
                }
            }
        }
    }
    errors
}

#[test]
fn the_rbac_allows_exactly_the_recorded_calls() {
    let recordings = rbac::load_all();
    let accounts: BTreeSet<&str> = recordings
        .iter()
        .map(|(_, r)| r.service_account.as_str())
        .collect();
    assert!(
        accounts.contains("toolgate-operator") && accounts.contains("toolgate-gateway"),
        "{accounts:?}"
    );
    let mut errors = Vec::new();
    if let Some(kubectl) = tools::kubectl() {
        let objs = yaml_docs(&kustomize_base(&kubectl));
        errors.extend(check_recorded(
            &objs,
            NS,
            &json!({}),
            &recordings,
            "deploy/default",
        ));
    }
    if let Some(python) = tools::deploy_python() {
        let mut renders: Vec<&Value> = Vec::new();
        for (_, r) in &recordings {
            if !renders.contains(&&r.values) {
                renders.push(&r.values);
            }
        }
        for values in renders {
            let objs = yaml_docs(&render_chart(&python, values));
            let what = format!("the chart with values {values}");
            errors.extend(check_recorded(&objs, NS, values, &recordings, &what));
        }
    }
    assert!(errors.is_empty(), "{}", errors.join("\n"));
}

/// The check above can fail both ways: a call no rule allows, and a rule
/// no call uses, each named in the message.
#[test]
fn the_rbac_check_names_a_call_without_a_rule_and_a_rule_without_a_call() {
    let objs: Vec<Value> = [
        "deploy/default/operator.yaml",
        "deploy/default/gateway.yaml",
    ]
    .iter()
    .flat_map(|f| yaml_docs(&read(f)))
    .collect();
    let recordings = rbac::load_all();
    assert!(
        check_recorded(&objs, NS, &json!({}), &recordings, "base").is_empty(),
        "the base and the recordings agree"
    );

    let mut more = recordings.clone();
    let (_, gateway) = more
        .iter_mut()
        .find(|(_, r)| r.service_account == "toolgate-gateway" && r.values == json!({}))
        .expect("the gateway's recording");
    gateway.calls.insert(Call {
        verb: "get".into(),
        group: "".into(),
        resource: "secrets".into(),
        namespace: NS.into(),
        name: "".into(),
    });
    let errors = check_recorded(&objs, NS, &json!({}), &more, "base");
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(
        errors[0].contains(
            "no rule lets ServiceAccount toolgate-gateway get core/secrets in namespace toolgate-system"
        ),
        "{errors:?}"
    );

    let mut fewer = recordings.clone();
    let (_, operator) = fewer
        .iter_mut()
        .find(|(_, r)| r.service_account == "toolgate-operator" && r.values == json!({}))
        .expect("the operator's recording");
    operator
        .calls
        .retain(|c| !(c.resource == "leases" && c.verb == "update"));
    let errors = check_recorded(&objs, NS, &json!({}), &fewer, "base");
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(
        errors[0].contains("Role toolgate-operator-publish rule")
            && errors[0].contains(
                "nothing ServiceAccount toolgate-operator does uses `update coordination.k8s.io/leases \"toolgate-operator\"` in toolgate-system"
            ),
        "{errors:?}"
    );
}

#[test]
fn the_charts_crds_are_the_generated_crds() {
    assert!(
        read("charts/toolgate/crds/toolgate.dev.yaml") == read("crds/toolgate.dev.yaml"),
        "charts/toolgate/crds/toolgate.dev.yaml is stale: regenerate it with `{}`",
        crds::CRD_REGENERATE_COMMAND
    );
}

#[test]
fn the_charts_values_satisfy_its_schema() {
    let schema: Value = serde_json::from_str(&read("charts/toolgate/values.schema.json")).unwrap();
    let validator = jsonschema::validator_for(&schema).expect("a valid JSON Schema");
    let values = &yaml_docs(&read("charts/toolgate/values.yaml"))[0];
    let errors: Vec<String> = validator
        .iter_errors(values)
        .map(|e| e.to_string())
        .collect();
    assert!(errors.is_empty(), "values.yaml: {errors:?}");
    let mut typo = values.clone();
    typo["gateway"]["replica"] = json!(3);
    assert!(!validator.is_valid(&typo), "unknown keys are rejected");
    // Helm passes `global` to every subchart: as a dependency of an
    // umbrella chart, toolgate must accept it.
    let mut subchart = values.clone();
    subchart["global"] = json!({"imageRegistry": "registry.example"});
    let errors: Vec<String> = validator
        .iter_errors(&subchart)
        .map(|e| e.to_string())
        .collect();
    assert!(errors.is_empty(), "with global: {errors:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_kustomize_base_applies_server_side_and_grants_what_each_component_needs() {
    let Some(kubectl) = tools::kubectl() else {
        return;
    };
    let text = kustomize_base(&kubectl);
    let objs = yaml_docs(&text);
    let kinds: BTreeSet<&str> = objs.iter().filter_map(|o| o["kind"].as_str()).collect();
    for k in [
        "CustomResourceDefinition",
        "Namespace",
        "Deployment",
        "Service",
        "PodDisruptionBudget",
        "ClusterRoleBinding",
    ] {
        assert!(kinds.contains(k), "no {k} in {kinds:?}");
    }
    check_install(&objs, NS, None);
    assert!(!objs.iter().any(is_hook), "deploy/default holds no hook");
    let mut with_uninstall = objs.clone();
    with_uninstall.extend(yaml_docs(&kustomize(&kubectl, "deploy/uninstall")));
    check_uninstall_hook(&with_uninstall, NS, None);

    let server = ApiServer::start().await.unwrap();
    let out = apply(&server, &kubectl, &text).await;
    assert!(
        out.contains("deployment.apps/toolgate-gateway serverside-applied"),
        "{out}"
    );
    assert!(out.contains("customresourcedefinition.apiextensions.k8s.io/mcpupstreams.toolgate.dev serverside-applied"), "{out}");
    let before = server.resource_version();
    apply(&server, &kubectl, &text).await;
    assert_eq!(
        server.resource_version(),
        before,
        "re-applying the same install changes nothing"
    );
}

/// The default render, minus Helm's own labels, as the kustomize base has it.
fn without_helm_labels(mut objs: Vec<Value>) -> Vec<Value> {
    for o in &mut objs {
        if let Some(labels) = o["metadata"]["labels"].as_object_mut() {
            labels.remove("helm.sh/chart");
            labels.remove("app.kubernetes.io/managed-by");
        }
    }
    objs.sort_by_key(|o| (o["kind"].to_string(), name(o).to_string()));
    objs
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_chart_renders_with_helm_for_each_option_and_the_default_applies() {
    let (Some(python), Some(kubectl)) = (tools::deploy_python(), tools::kubectl()) else {
        return;
    };
    let crds = read("charts/toolgate/crds/toolgate.dev.yaml");

    let default = render_chart(&python, &json!({}));
    let objs = yaml_docs(&default);
    check_install(&objs, NS, None);
    check_uninstall_hook(&objs, NS, None);
    let gw_args =
        strs(&deployment(&objs, "gateway")["spec"]["template"]["spec"]["containers"][0]["args"]);
    assert!(
        gw_args
            .windows(2)
            .any(|w| w == ["--listen", "0.0.0.0:8080"]),
        "IPv4 by default: {gw_args:?}"
    );
    assert!(
        !objs.iter().any(|o| o["kind"] == "Ingress"),
        "no Ingress unless enabled"
    );
    let base = kustomize_base(&kubectl);
    let base_objs: Vec<Value> = yaml_docs(&base)
        .into_iter()
        .filter(|o| o["kind"] != "CustomResourceDefinition" && o["kind"] != "Namespace")
        .collect();
    // The generated session key is random and not part of the base
    // (kustomize users create it; see the README); hooks are not installed.
    let rendered: Vec<Value> = installed(&objs)
        .into_iter()
        .filter(|o| !(o["kind"] == "Secret" && name(o).ends_with("-session-key")))
        .collect();
    assert!(
        without_helm_labels(rendered) == without_helm_labels(base_objs),
        "deploy/default differs from the chart's default render: regenerate it (see its header)"
    );
    let hooks: Vec<Value> = objs.iter().filter(|o| is_hook(o)).cloned().collect();
    assert!(
        without_helm_labels(hooks)
            == without_helm_labels(yaml_docs(&kustomize(&kubectl, "deploy/uninstall"))),
        "deploy/uninstall differs from the chart's pre-delete hook: regenerate it (see its header)"
    );
    let server = ApiServer::start().await.unwrap();
    // As `helm install --create-namespace` does: everything but the hooks.
    let namespace = format!("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {NS}\n");
    let install: Vec<String> = installed(&objs)
        .iter()
        .map(|o| serde_json::to_string(o).unwrap())
        .collect();
    let out = apply(
        &server,
        &kubectl,
        &format!("{crds}\n---\n{namespace}---\n{}", install.join("\n---\n")),
    )
    .await;
    assert!(
        out.contains("deployment.apps/toolgate-operator serverside-applied"),
        "{out}"
    );

    let options = json!({
        "listenHost": "::",
        "operator": {"watchNamespace": "apps", "replicas": 1,
                     "uninstallHook": {"activeDeadlineSeconds": 100},
                     "secrets": {"access": "namespaces", "namespaces": ["apps", "team-b"]}},
        "gateway": {"autoscaling": {"enabled": true}, "networkPolicy": {"enabled": true},
                    "extraAllowedHosts": ["mcp.internal"],
                    "shutdownDelaySeconds": 15,
                    "sessionKey": {"existingSecret": "mcp-session-key", "graceSeconds": 0}},
        "ingress": {"enabled": true, "host": "mcp.example.com", "tlsSecretName": "mcp-tls"},
    });
    let all = render_chart(&python, &options);
    let objs = yaml_docs(&all);
    check_install(&objs, NS, Some("apps"));
    let job = check_uninstall_hook(&objs, NS, Some("apps"));
    assert_eq!(job["spec"]["activeDeadlineSeconds"], 100);
    assert!(
        !objs
            .iter()
            .any(|o| o["kind"] == "ClusterRole" || o["kind"] == "ClusterRoleBinding"),
        "one watched namespace: no cluster-wide RBAC"
    );
    // Secrets only where granted: the flag, and a Role and RoleBinding in
    // each granting namespace; no Secret rule in the watch Role.
    let op_args =
        strs(&deployment(&objs, "operator")["spec"]["template"]["spec"]["containers"][0]["args"]);
    assert!(
        op_args.contains(&"--secret-namespaces=apps,team-b"),
        "{op_args:?}"
    );
    let g = grants(&objs, NS, "toolgate-operator");
    for ns in ["apps", "team-b"] {
        assert!(allowed(&g, Some(ns), "", "secrets", "watch", None), "{ns}");
        let role = find(&objs, "Role", Some(ns), "toolgate-operator-secrets").expect("the grant");
        assert_eq!(role["rules"].as_array().map(Vec::len), Some(1), "{ns}");
    }
    assert!(!allowed(&g, Some("team-c"), "", "secrets", "get", None));
    let ing = objs
        .iter()
        .find(|o| o["kind"] == "Ingress")
        .expect("the Ingress");
    assert_eq!(ing["spec"]["tls"][0]["hosts"], json!(["mcp.example.com"]));
    assert_eq!(
        ing["metadata"]["annotations"]["nginx.ingress.kubernetes.io/proxy-buffering"],
        "off"
    );
    let gw = deployment(&objs, "gateway");
    assert!(
        gw["spec"].get("replicas").is_none(),
        "the HPA owns replicas"
    );
    let pod = &gw["spec"]["template"]["spec"];
    let args = strs(&pod["containers"][0]["args"]);
    assert!(args.contains(&"mcp.internal"), "{args:?}");
    assert!(
        args.windows(2).any(|w| w == ["--listen", "[::]:8080"]),
        "listenHost \"::\" (IPv6-only clusters): {args:?}"
    );
    assert!(
        args.windows(2)
            .any(|w| w == ["--shutdown-delay-seconds", "15"]),
        "{args:?}"
    );
    // A Secret made out of band (GitOps: `helm template` cannot keep a
    // generated key): mounted, and none generated.
    assert_eq!(
        check_session_key(pod, &pod["containers"][0]),
        "mcp-session-key"
    );
    assert!(
        !objs.iter().any(|o| o["kind"] == "Secret"),
        "existingSecret: no generated key"
    );
    assert!(
        pod["containers"][0]["env"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["name"] == "TOOLGATE_SESSION_KEY_GRACE_SECONDS" && e["value"] == "0"),
        "sessionKey.graceSeconds"
    );
    // Scrapes reach the metrics port from the monitoring namespace only;
    // the MCP port's peers do not reach it.
    let np = find(&objs, "NetworkPolicy", Some(NS), "toolgate-gateway").expect("NetworkPolicy");
    let rules = np["spec"]["ingress"].as_array().expect("ingress rules");
    let by_port = |port: &str| -> Vec<&Value> {
        rules
            .iter()
            .filter(|r| {
                r["ports"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|p| p["port"] == port)
            })
            .collect()
    };
    let [scrape] = by_port("metrics")[..] else {
        panic!("one rule for the metrics port: {rules:?}")
    };
    assert_eq!(scrape["ports"].as_array().map(Vec::len), Some(1));
    assert_eq!(
        scrape["from"],
        json!([{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}},
                "podSelector": {}}])
    );
    let [mcp] = by_port("http")[..] else {
        panic!("one rule for the MCP port: {rules:?}")
    };
    assert_eq!(mcp["ports"].as_array().map(Vec::len), Some(1));
    let hpa = objs
        .iter()
        .find(|o| o["kind"] == "HorizontalPodAutoscaler")
        .expect("HPA");
    assert_eq!(hpa["spec"]["scaleTargetRef"]["name"], name(gw));

    let without_hook = yaml_docs(&render_chart(
        &python,
        &json!({"operator": {"uninstallHook": {"enabled": false}}}),
    ));
    assert!(
        !without_hook.iter().any(is_hook),
        "the hook can be turned off"
    );
    check_install(&without_hook, NS, None);

    for bad in [
        json!({"gateway": {"replicas": "two"}}),
        json!({"gatway": {}}),
        json!({"operator": {"uninstallHook": {"activeDeadlineSeconds": 5}}}),
    ] {
        render_chart_refused(&python, &bad);
    }

    // Every object of every rendering, against the Kubernetes schemas.
    let dir = tempfile::tempdir().unwrap();
    let mut files = Vec::new();
    for (i, text) in [default, all, base].iter().enumerate() {
        let f = dir.path().join(format!("render-{i}.yaml"));
        std::fs::write(&f, text).unwrap();
        files.push(f);
    }
    for f in ["petstore-demo.yaml", "petstore-upstream.yaml"] {
        files.push(repo().join("deploy/examples").join(f));
    }
    let validate = python.with_file_name("kubernetes-validate");
    run(Command::new(validate)
        .args(["--strict", "--quiet", "--no-warn", "-k", "1.32.0"])
        .args(&files))
    .unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn the_demo_deployment_runs_toolgate_demo_with_flags_it_has() {
    let docs = yaml_docs(&read("deploy/examples/petstore-demo.yaml"));
    let d = deployment(&docs, "petstore");
    let known = flags(
        "toolgate",
        "demo",
        &["--listen", "--upstream-listen", "--allowed-host"],
    );
    let args = check_args(d, "demo", &known);
    let api = flag_values(&args, "--upstream-listen");
    let port = api[0].rsplit(':').next().unwrap();
    let c = &d["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(c["ports"][0]["containerPort"].to_string(), port);
    assert_eq!(c["securityContext"]["readOnlyRootFilesystem"], true);
}

/// `gatewayApi.enabled` renders an HTTPRoute to the gateway's Service that
/// the Gateway API CRDs' schemas accept, and its host names reach the
/// gateway's Host check.
#[test]
fn the_charts_httproute_validates_against_the_gateway_api_schema() {
    let (Some(python), Some((node, validate))) =
        (tools::deploy_python(), tools::gateway_api_validator())
    else {
        return;
    };
    let values = json!({"gatewayApi": {
        "enabled": true,
        "parentRefs": [{"name": "eg", "namespace": "envoy-gateway-system", "sectionName": "http"}],
        "hostnames": ["mcp.example.com"],
        "timeouts": {"request": "1h", "backendRequest": "30m"},
    }});
    let objs = yaml_docs(&render_chart(&python, &values));
    check_install(&objs, NS, None);
    let routes: Vec<&Value> = objs.iter().filter(|o| o["kind"] == "HTTPRoute").collect();
    let [route] = routes[..] else {
        panic!("one HTTPRoute, got {}", routes.len())
    };
    let svc = find(&objs, "Service", Some(NS), "toolgate-gateway").expect("the gateway Service");
    let rule = &route["spec"]["rules"][0];
    assert_eq!(rule["backendRefs"][0]["name"], svc["metadata"]["name"]);
    assert_eq!(
        rule["backendRefs"][0]["port"],
        svc["spec"]["ports"][0]["port"]
    );
    assert_eq!(rule["matches"][0]["path"]["value"], "/mcp");
    assert_eq!(rule["timeouts"]["request"], "1h");
    let gw = deployment(&objs, "gateway");
    let args = strs(&gw["spec"]["template"]["spec"]["containers"][0]["args"]);
    assert!(
        args.windows(2)
            .any(|w| w == ["--allowed-host", "mcp.example.com"]),
        "the route's host name is an allowed Host: {args:?}"
    );

    // The default timeouts, and a broken copy to show the check can fail.
    let default = yaml_docs(&render_chart(
        &python,
        &json!({"gatewayApi": {"enabled": true, "parentRefs": [{"name": "eg"}]}}),
    ));
    let default_route = default
        .iter()
        .find(|o| o["kind"] == "HTTPRoute")
        .expect("the HTTPRoute")
        .clone();
    assert_eq!(
        default_route["spec"]["rules"][0]["timeouts"]["request"], "0s",
        "SSE streams are not cut by the route"
    );
    let mut broken = default_route.clone();
    broken["metadata"]["name"] = json!("broken");
    broken["spec"]["rules"][0]["matches"][0]["path"]["type"] = json!("Prefix");
    broken["spec"]["rules"][0]["timeouts"]["request"] = json!("1 hour");

    let dir = tempfile::tempdir().unwrap();
    let check = |objs: &[&Value]| {
        let file = dir.path().join("routes.json");
        std::fs::write(&file, serde_json::to_vec(objs).unwrap()).unwrap();
        run(Command::new(&node).arg(&validate).arg(&file))
    };
    let out = check(&[route, &default_route]).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(out.matches(": valid").count(), 2, "{out}");
    let err = check(&[&broken]).expect_err("a route with an unknown path type is invalid");
    assert!(err.contains("/spec/rules/0/matches/0/path/type"), "{err}");
    assert!(err.contains("/spec/rules/0/timeouts/request"), "{err}");

    // Attaching to nothing is refused at render time, with what to set.
    let err = render_chart_refused(&python, &json!({"gatewayApi": {"enabled": true}}));
    assert!(err.contains("gatewayApi.parentRefs is required"), "{err}");
    for bad in [
        json!({"gatewayApi": {"hostnames": ["*.example.com"]}}),
        json!({"gatewayApi": {"timeouts": {"request": "forever"}}}),
        json!({"gatewayApi": {"parentRefs": [{"namespace": "x"}]}}),
    ] {
        render_chart_refused(&python, &bad);
    }
}

/// `gateway.inbound` reaches the gateway as its config file (a ConfigMap
/// passed with `--config`) and Secrets mounted as files at exactly the
/// paths that file names; without a method the file says the endpoints are
/// open, and a method without a public URL to point clients at is refused.
#[test]
fn the_charts_inbound_settings_reach_the_gateway_as_a_file_and_secret_files() {
    let Some(python) = tools::deploy_python() else {
        return;
    };
    // What the gateway reads: its own parser and start-up checks accept
    // the file (`serve --kube` allows only `inbound:` in it).
    let gateway_file = |objs: &[Value]| -> Value {
        let cm = find(objs, "ConfigMap", Some(NS), "toolgate-gateway-config").expect("config");
        let text = cm["data"]["gateway.yaml"].as_str().expect("gateway.yaml");
        let file = gateway::config::parse_file(text).unwrap_or_else(|e| panic!("{e}: {text}"));
        assert!(file.upstreams.is_none(), "{text}");
        file.inbound
            .validate()
            .unwrap_or_else(|e| panic!("{e}: {text}"));
        yaml_serde::from_str(text).unwrap_or_else(|e| panic!("{e}: {text}"))
    };
    let open = yaml_docs(&render_chart(&python, &json!({})));
    assert_eq!(
        gateway_file(&open),
        json!({"inbound": {"defaultAccess": "allow"}})
    );

    let values = json!({
        "ingress": {"enabled": true, "host": "mcp.example.com", "tlsSecretName": "mcp-tls"},
        "gateway": {"inbound": {
            "jwt": [{"issuer": "https://login.example.com", "audiences": ["toolgate"]}],
            "scopesSupported": ["pets.read"],
            "defaultAccess": "deny",
            "apiKeys": {"existingSecret": "mcp-api-keys"},
            "introspection": {"url": "https://login.example.com/introspect",
                              "clientId": "toolgate",
                              "clientSecret": {"existingSecret": "mcp-introspection"}}}},
    });
    let objs = yaml_docs(&render_chart(&python, &values));
    check_install(&objs, NS, None);
    let file = gateway_file(&objs);
    let inbound = &file["inbound"];
    assert_eq!(inbound["resource"], "https://mcp.example.com/mcp");
    assert_eq!(inbound["jwt"][0]["issuer"], "https://login.example.com");
    assert_eq!(inbound["defaultAccess"], "deny");
    assert_eq!(inbound["scopesSupported"], json!(["pets.read"]));
    let gw = deployment(&objs, "gateway");
    let pod = &gw["spec"]["template"]["spec"];
    let c = &pod["containers"][0];
    let args = strs(&c["args"]);
    assert!(
        args.windows(2)
            .any(|w| w == ["--config", "/etc/toolgate/gateway.yaml"]),
        "{args:?}"
    );
    // Each file the config names lies in a volume of the Secret meant.
    let mounted_from = |path: &str| -> String {
        let m = c["volumeMounts"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| path.starts_with(&format!("{}/", m["mountPath"].as_str().unwrap())))
            .unwrap_or_else(|| panic!("{path} is not mounted"));
        let v = pod["volumes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|v| v["name"] == m["name"])
            .unwrap();
        v["secret"]["secretName"].as_str().unwrap_or("").to_string()
    };
    assert_eq!(
        mounted_from(inbound["apiKeys"]["file"].as_str().unwrap()),
        "mcp-api-keys"
    );
    assert_eq!(
        mounted_from(
            inbound["introspection"]["clientSecret"]["file"]
                .as_str()
                .unwrap()
        ),
        "mcp-introspection"
    );
    assert_eq!(
        mounted_from("/etc/toolgate/gateway.yaml"),
        "",
        "the config file is the ConfigMap"
    );
    // A changed config rolls the pods (it is read at start-up).
    assert_ne!(
        pod_annotation(&objs, "checksum/config"),
        pod_annotation(&open, "checksum/config")
    );

    let refused = render_chart_refused(
        &python,
        &json!({"gateway": {"inbound": {"apiKeys": {"existingSecret": "k"}}}}),
    );
    assert!(refused.contains("gateway.inbound.resource"), "{refused}");
    render_chart_refused(
        &python,
        &json!({"gateway": {"inbound": {"jwt": [{"issuer": "https://x", "audiences": []}]}}}),
    );
}

/// `gateway.listing` reaches the gateway's config file as `listing:`,
/// beside `inbound:` whether or not authentication is on, and only when
/// it differs from the defaults; bad values are refused at render time.
#[test]
fn the_charts_listing_settings_reach_the_gateway_config_file() {
    let Some(python) = tools::deploy_python() else {
        return;
    };
    let listing_of = |objs: &[Value]| -> gateway::config::ListingConfig {
        let cm = find(objs, "ConfigMap", Some(NS), "toolgate-gateway-config").expect("config");
        let text = cm["data"]["gateway.yaml"].as_str().expect("gateway.yaml");
        gateway::config::parse_file(text)
            .unwrap_or_else(|e| panic!("{e}: {text}"))
            .listing
    };
    let default = yaml_docs(&render_chart(&python, &json!({})));
    assert_eq!(listing_of(&default), Default::default());
    let listing = json!({"mode": "search", "prefixMode": "all", "pinned": ["pets__get_pet"],
                         "descriptions": {"searchTools": "Find our tools."}});
    for inbound in [
        json!({}),
        json!({"resource": "https://mcp.example.com/mcp",
               "jwt": [{"issuer": "https://login.example.com", "audiences": ["toolgate"]}]}),
    ] {
        let values = json!({"gateway": {"listing": listing, "inbound": inbound}});
        let objs = yaml_docs(&render_chart(&python, &values));
        let l = listing_of(&objs);
        assert_eq!(l.default_mode(false), catalog::listing::ListMode::Search);
        assert_eq!(l.default_mode(true), catalog::listing::ListMode::All);
        assert_eq!(l.pinned, ["pets__get_pet"]);
        assert_eq!(
            l.descriptions.search_tools.as_deref(),
            Some("Find our tools.")
        );
        // Read at start-up: a change rolls the pods.
        assert_ne!(
            pod_annotation(&objs, "checksum/config"),
            pod_annotation(&default, "checksum/config")
        );
    }
    let many: Vec<String> = (0..65).map(|i| format!("t__{i}")).collect();
    for bad in [
        json!({"mode": "bogus"}),
        json!({"pinned": many}),
        json!({"descriptions": {"other": "x"}}),
    ] {
        render_chart_refused(&python, &json!({"gateway": {"listing": bad}}));
    }
}

fn pod_annotation(objs: &[Value], key: &str) -> String {
    deployment(objs, "gateway")["spec"]["template"]["metadata"]["annotations"][key]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

fn container<'a>(objs: &'a [Value], component: &str) -> &'a Value {
    &deployment(objs, component)["spec"]["template"]["spec"]["containers"][0]
}

/// `name=value` of each plain env var of `c` (valueFrom ones as
/// `name=<from>`).
fn env_of(c: &Value) -> Vec<String> {
    c["env"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|e| match e["value"].as_str() {
            Some(v) => format!("{}={v}", e["name"].as_str().unwrap_or_default()),
            None => format!("{}=<from>", e["name"].as_str().unwrap_or_default()),
        })
        .collect()
}

const MONITORING_KINDS: [&str; 2] = ["ServiceMonitor", "PrometheusRule"];

fn is_dashboard(o: &Value) -> bool {
    o["kind"] == "ConfigMap" && o["data"]["toolgate.json"].is_string()
}

/// Logs and traces: JSON logs by default, the OTel variables only with an
/// endpoint, each component under its own service name.
#[test]
fn the_charts_otel_values_reach_both_binaries_only_with_an_endpoint() {
    let Some(python) = tools::deploy_python() else {
        return;
    };
    let default = yaml_docs(&render_chart(&python, &json!({})));
    for component in ["gateway", "operator"] {
        let env = env_of(container(&default, component));
        assert!(env.contains(&"TOOLGATE_LOG_FORMAT=json".into()), "{env:?}");
        assert!(
            !env.iter().any(|e| e.starts_with("OTEL_")),
            "no endpoint, no OTel: {env:?}"
        );
    }
    let text = yaml_docs(&render_chart(&python, &json!({"logFormat": "text"})));
    assert!(env_of(container(&text, "operator")).contains(&"TOOLGATE_LOG_FORMAT=text".into()));

    let values = json!({"otel": {
        "endpoint": "http://otel-collector.observability:4318",
        "sampler": "parentbased_traceidratio", "samplerArg": "0.25",
        "resourceAttributes": {"deployment.environment": "prod"},
        "headersSecret": {"name": "otlp-auth", "key": "headers"},
    }});
    let objs = yaml_docs(&render_chart(&python, &values));
    check_install(&objs, NS, None);
    for component in ["gateway", "operator"] {
        let c = container(&objs, component);
        let env = env_of(c);
        for want in [
            "OTEL_EXPORTER_OTLP_ENDPOINT=http://otel-collector.observability:4318".to_string(),
            "OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf".to_string(),
            format!("OTEL_SERVICE_NAME=toolgate-{component}"),
            "OTEL_TRACES_SAMPLER=parentbased_traceidratio".to_string(),
            "OTEL_TRACES_SAMPLER_ARG=0.25".to_string(),
            "OTEL_RESOURCE_ATTRIBUTES=k8s.namespace.name=$(POD_NAMESPACE),k8s.pod.name=$(POD_NAME),deployment.environment=prod".to_string(),
            "OTEL_EXPORTER_OTLP_HEADERS=<from>".to_string(),
        ] {
            assert!(env.contains(&want), "{component}: {want} in {env:?}");
        }
        // $(VAR) expands only to variables defined before it.
        let at = |n: &str| env.iter().position(|e| e.starts_with(&format!("{n}=")));
        assert!(at("POD_NAME") < at("OTEL_RESOURCE_ATTRIBUTES"), "{env:?}");
        assert!(
            at("POD_NAMESPACE") < at("OTEL_RESOURCE_ATTRIBUTES"),
            "{env:?}"
        );
        let headers = c["env"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["name"] == "OTEL_EXPORTER_OTLP_HEADERS")
            .unwrap();
        assert_eq!(
            headers["valueFrom"],
            json!({"secretKeyRef": {"name": "otlp-auth", "key": "headers"}})
        );
    }
    for bad in [
        json!({"otel": {"endpoint": "otel-collector:4318"}}),
        json!({"otel": {"sampler": "sometimes"}}),
        json!({"otel": {"samplerArg": "2"}}),
        json!({"logFormat": "xml"}),
    ] {
        render_chart_refused(&python, &bad);
    }
}

/// `metrics.*`: nothing of Prometheus Operator or Grafana by default (the
/// install applies where their CRDs are absent); enabled, a ServiceMonitor
/// per component on its metrics Service, a PrometheusRule whose alerts
/// carry their thresholds, severities and annotations, and the dashboard
/// ConfigMap with the dashboard's JSON, labelled for Grafana's sidecar.
#[test]
fn the_charts_monitoring_objects_render_when_enabled_and_are_well_formed() {
    let Some(python) = tools::deploy_python() else {
        return;
    };
    let default = yaml_docs(&render_chart(&python, &json!({})));
    assert!(
        !default.iter().any(
            |o| MONITORING_KINDS.contains(&o["kind"].as_str().unwrap_or_default())
                || is_dashboard(o)
        ),
        "monitoring objects are off by default"
    );
    assert!(toolgate_tests::monitoring::queries(&default)
        .unwrap()
        .is_empty());

    let values = json!({"metrics": {
        "serviceMonitor": {"enabled": true, "labels": {"release": "kube-prometheus-stack"},
                           "interval": "15s", "scrapeTimeout": "5s",
                           "relabelings": [{"action": "replace", "targetLabel": "cluster", "replacement": "east"}]},
        "prometheusRule": {"enabled": true, "labels": {"release": "kube-prometheus-stack"},
                           "alerts": {"upstreamErrorRatio": {"threshold": 0.2},
                                      "requestValidationFailures": {"enabled": false}}},
        "dashboard": {"enabled": true, "namespace": "grafana",
                      "labels": {"grafana_dashboard": "toolgate"},
                      "annotations": {"grafana_folder": "MCP"}},
    }});
    let objs = yaml_docs(&render_chart(&python, &values));
    check_install(&objs, NS, None);

    // ServiceMonitors: each selects exactly its component's metrics
    // Service, on a port that Service has.
    let services: Vec<&Value> = objs
        .iter()
        .filter(|o| o["kind"] == "Service" && namespace(o) == Some(NS))
        .collect();
    let monitors: Vec<&Value> = objs
        .iter()
        .filter(|o| o["kind"] == "ServiceMonitor")
        .collect();
    assert_eq!(monitors.len(), 2, "one per component");
    for component in ["gateway", "operator"] {
        let sm = find(
            &objs,
            "ServiceMonitor",
            Some(NS),
            &format!("toolgate-{component}"),
        )
        .unwrap_or_else(|| panic!("the {component}'s ServiceMonitor"));
        assert_eq!(sm["apiVersion"], "monitoring.coreos.com/v1");
        assert_eq!(sm["metadata"]["labels"]["release"], "kube-prometheus-stack");
        assert_eq!(sm["spec"]["namespaceSelector"]["matchNames"], json!([NS]));
        let selected: Vec<&str> = services
            .iter()
            .filter(|s| {
                selects(
                    &sm["spec"]["selector"]["matchLabels"],
                    &s["metadata"]["labels"],
                )
            })
            .map(|s| name(s))
            .collect();
        assert_eq!(selected, [format!("toolgate-{component}-metrics")]);
        let endpoints = sm["spec"]["endpoints"].as_array().unwrap();
        assert_eq!(endpoints.len(), 1);
        let e = &endpoints[0];
        assert_eq!(e["port"], "metrics");
        assert_eq!(e["path"], "/metrics");
        assert_eq!(e["interval"], "15s");
        assert_eq!(e["scrapeTimeout"], "5s");
        assert_eq!(e["relabelings"][0]["targetLabel"], "cluster");
    }

    // The PrometheusRule.
    let rules: Vec<&Value> = objs
        .iter()
        .filter(|o| o["kind"] == "PrometheusRule")
        .collect();
    let [rule] = rules[..] else {
        panic!("one PrometheusRule, got {}", rules.len())
    };
    assert_eq!(namespace(rule), Some(NS));
    assert_eq!(
        rule["metadata"]["labels"]["release"],
        "kube-prometheus-stack"
    );
    let alerts: Vec<&Value> = rule["spec"]["groups"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|g| g["rules"].as_array().unwrap())
        .collect();
    let alert = |n: &str| -> &Value {
        alerts
            .iter()
            .find(|a| a["alert"] == n)
            .unwrap_or_else(|| panic!("alert {n}"))
    };
    let names: BTreeSet<&str> = alerts.iter().filter_map(|a| a["alert"].as_str()).collect();
    assert_eq!(
        names,
        BTreeSet::from([
            "ToolgateUpstreamErrorRatio",
            "ToolgateResponseValidationFailures",
            "ToolgateCatalogReloadFailures",
            "ToolgateOperatorNoLeader",
            "ToolgateUpstreamNotReady",
            "ToolgateOperatorReconcileErrors",
        ]),
        "every alert but the one disabled"
    );
    for a in &alerts {
        let n = a["alert"].as_str().unwrap();
        let expr = a["expr"].as_str().unwrap_or_default();
        assert!(!expr.trim().is_empty(), "{n}: an expr");
        assert!(
            a["for"].as_str().is_some_and(|f| !f.is_empty()),
            "{n}: a `for`"
        );
        assert!(
            a["labels"]["severity"]
                .as_str()
                .is_some_and(|s| !s.is_empty()),
            "{n}: a severity"
        );
        for k in ["summary", "description", "runbook_url"] {
            assert!(
                a["annotations"][k].as_str().is_some_and(|s| !s.is_empty()),
                "{n}: annotation {k}"
            );
        }
        assert!(
            a["annotations"]["runbook_url"]
                .as_str()
                .unwrap()
                .ends_with(&format!("#{}", n.to_lowercase())),
            "{n}: its runbook section"
        );
        // Balanced brackets: a first sanity check of the PromQL.
        for (open, close) in [('(', ')'), ('{', '}'), ('[', ']')] {
            assert_eq!(
                expr.matches(open).count(),
                expr.matches(close).count(),
                "{n}: {expr}"
            );
        }
        // This release's series only: the job the ServiceMonitor gives
        // them, which is its metrics Service's name.
        let jobs: Vec<&str> = expr
            .match_indices("job=\"")
            .map(|(i, m)| expr[i + m.len()..].split('"').next().unwrap())
            .collect();
        assert!(!jobs.is_empty(), "{n}: selects by job: {expr}");
        for job in jobs {
            assert!(
                find(&objs, "Service", Some(NS), job)
                    .is_some_and(|s| s["spec"]["ports"][0]["name"] == "metrics"),
                "{n}: job {job} is not a metrics Service"
            );
        }
        assert!(expr.contains(&format!("namespace=\"{NS}\"")), "{n}: {expr}");
    }
    assert!(
        alert("ToolgateUpstreamErrorRatio")["expr"]
            .as_str()
            .unwrap()
            .ends_with("> 0.2"),
        "the threshold value"
    );
    assert_eq!(
        alert("ToolgateUpstreamErrorRatio")["labels"]["severity"],
        "warning"
    );
    assert_eq!(
        alert("ToolgateOperatorNoLeader")["labels"]["severity"],
        "critical"
    );
    let not_ready = alert("ToolgateUpstreamNotReady");
    assert_eq!(not_ready["for"], "10m");
    assert!(
        not_ready["expr"]
            .as_str()
            .unwrap()
            .contains(r#"reason!="Published""#),
        "Ready=True has reason Published"
    );
    // The reason of a Ready upstream, as the operator writes it.
    assert_eq!(catalog::Reason::Published.as_str(), "Published");
    let no_leader = alert("ToolgateOperatorNoLeader")["expr"].as_str().unwrap();
    assert!(
        no_leader.contains("absent(toolgate_operator_leader{"),
        "{no_leader}"
    );

    // Custom selectors, for series scraped otherwise.
    let custom = yaml_docs(&render_chart(
        &python,
        &json!({"metrics": {"prometheusRule": {"enabled": true,
            "gatewaySelector": "job=\"gw\"", "operatorSelector": "job=\"op\""}}}),
    ));
    let custom_rule = custom
        .iter()
        .find(|o| o["kind"] == "PrometheusRule")
        .unwrap()
        .to_string();
    assert!(
        custom_rule.contains(r#"toolgate_catalog_reloads_total{job=\"gw\",result=\"failure\"}"#),
        "{custom_rule}"
    );
    assert!(
        custom_rule.contains(r#"absent(toolgate_operator_leader{job=\"op\"})"#),
        "{custom_rule}"
    );

    // The dashboard.
    let dashboards: Vec<&Value> = objs.iter().filter(|o| is_dashboard(o)).collect();
    let [cm] = dashboards[..] else {
        panic!("one dashboard ConfigMap, got {}", dashboards.len())
    };
    assert_eq!(namespace(cm), Some("grafana"));
    assert_eq!(cm["metadata"]["labels"]["grafana_dashboard"], "toolgate");
    assert_eq!(cm["metadata"]["annotations"]["grafana_folder"], "MCP");
    let text = cm["data"]["toolgate.json"].as_str().unwrap();
    assert_eq!(
        text,
        read("charts/toolgate/dashboards/toolgate.json").trim_end(),
        "the file, as it is"
    );
    let dashboard: Value = serde_json::from_str(text).expect("the dashboard is JSON");
    assert!(dashboard["uid"].as_str().is_some_and(|u| !u.is_empty()));
    let vars = dashboard["templating"]["list"]
        .as_array()
        .expect("variables");
    assert!(
        vars.iter().any(|v| v["name"] == "datasource"
            && v["type"] == "datasource"
            && v["query"] == "prometheus"),
        "a Prometheus datasource variable"
    );
    let mut panels: Vec<&Value> = Vec::new();
    let mut ids = BTreeSet::new();
    for p in dashboard["panels"].as_array().expect("panels") {
        assert!(
            ids.insert(p["id"].as_u64().expect("an id")),
            "panel ids are unique"
        );
        for k in ["x", "y", "w", "h"] {
            assert!(p["gridPos"][k].is_u64(), "{}: gridPos.{k}", p["title"]);
        }
        if p["type"] != "row" {
            panels.push(p);
        }
    }
    for p in &panels {
        let title = p["title"].as_str().unwrap_or_default();
        assert!(!title.is_empty() && p["description"].is_string(), "{p}");
        assert_eq!(p["datasource"]["uid"], "${datasource}", "{title}");
        let targets = p["targets"].as_array().expect("targets");
        assert!(!targets.is_empty(), "{title}");
        for t in targets {
            assert_eq!(t["datasource"]["uid"], "${datasource}", "{title}");
            let expr = t["expr"].as_str().unwrap_or_default();
            assert!(
                !toolgate_tests::monitoring::metric_names(expr).is_empty(),
                "{title}: {expr}"
            );
            assert!(
                expr.contains(r#"namespace=~"$namespace""#),
                "{title}: {expr}"
            );
        }
    }
    let queries = toolgate_tests::monitoring::queries(&objs).unwrap();
    assert_eq!(
        queries.len(),
        alerts.len()
            + panels
                .iter()
                .map(|p| p["targets"].as_array().unwrap().len())
                .sum::<usize>()
            + 1,
        "every rule, target and the namespace variable"
    );

    // What the issue's dashboard must show, by the metric each panel reads.
    let read_by_panels: BTreeSet<String> = queries
        .iter()
        .filter(|q| q.origin.starts_with("dashboard"))
        .flat_map(|q| toolgate_tests::monitoring::metric_names(&q.expr))
        .collect();
    for m in [
        "mcp_server_operation_duration_seconds_count",
        "mcp_server_operation_duration_seconds_bucket",
        "toolgate_upstream_request_duration_seconds_bucket",
        "toolgate_upstream_request_duration_seconds_count",
        "toolgate_validation_failures_total",
        "toolgate_catalog_reloads_total",
        "toolgate_catalog_tools",
        "toolgate_catalog_info",
        "mcp_server_sessions_active",
        "toolgate_auth_denials_total",
        "toolgate_rate_limited_total",
        "toolgate_operator_reconciles_total",
        "toolgate_operator_reconcile_duration_seconds_bucket",
        "toolgate_operator_compile_duration_seconds_bucket",
        "toolgate_operator_published_bytes_total",
        "toolgate_operator_upstreams",
        "toolgate_operator_prefix_conflicts",
        "toolgate_operator_leader",
    ] {
        assert!(read_by_panels.contains(m), "no panel reads {m}");
    }

    // Everything but the Prometheus Operator's kinds, against the
    // Kubernetes schemas (the ConfigMap, the metrics Services).
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("monitoring.yaml");
    let core: Vec<String> = objs
        .iter()
        .filter(|o| !MONITORING_KINDS.contains(&o["kind"].as_str().unwrap_or_default()))
        .map(|o| serde_json::to_string(o).unwrap())
        .collect();
    std::fs::write(&file, core.join("\n---\n")).unwrap();
    run(Command::new(python.with_file_name("kubernetes-validate"))
        .args(["--strict", "--quiet", "--no-warn", "-k", "1.32.0"])
        .arg(&file))
    .unwrap_or_else(|e| panic!("{e}"));

    // The Prometheus Operator's kinds against its CRDs' schemas, and every
    // PromQL expression through Prometheus's grammar (a broken one to show
    // the check can fail).
    if let Some((node, validate)) = tools::gateway_api_validator() {
        let monitoring: Vec<&Value> = objs
            .iter()
            .filter(|o| MONITORING_KINDS.contains(&o["kind"].as_str().unwrap_or_default()))
            .collect();
        let file = dir.path().join("monitoring.json");
        std::fs::write(&file, serde_json::to_vec(&monitoring).unwrap()).unwrap();
        let out =
            run(Command::new(&node).arg(&validate).arg(&file)).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(out.matches(": valid").count(), 3, "{out}");

        let mut promql: Vec<Value> = queries
            .iter()
            .filter(|q| !q.expr.starts_with("label_values("))
            .map(|q| json!({"origin": q.origin, "expr": q.expr}))
            .collect();
        let parse = |promql: &[Value]| {
            let file = dir.path().join("promql.json");
            std::fs::write(&file, serde_json::to_vec(promql).unwrap()).unwrap();
            run(Command::new(&node)
                .arg(validate.with_file_name("promql.mjs"))
                .arg(&file))
        };
        let out = parse(&promql).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(out.matches(": valid").count(), promql.len(), "{out}");
        promql.push(json!({"origin": "broken", "expr": "sum by (upstream) (rate(toolgate_rate_limited_total[5m])"}));
        let err = parse(&promql).expect_err("an unclosed parenthesis does not parse");
        assert!(err.contains("broken: INVALID"), "{err}");
    }

    for bad in [
        json!({"metrics": {"serviceMonitor": {"interval": "soon"}}}),
        json!({"metrics": {"prometheusRule": {"alerts": {"noLeader": {"threshold": 1}}}}}),
        json!({"metrics": {"prometheusRule": {"alerts": {"upstreamErrorRatio": {"threshold": -1}}}}}),
        json!({"metrics": {"dashboard": {"labels": {"grafana_dashboard": 1}}}}),
    ] {
        render_chart_refused(&python, &bad);
    }
}
