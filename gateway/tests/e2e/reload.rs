use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rmcp::model::SubscriptionFilter;
use serde_json::json;

use crate::support::*;
use crate::upstream::TestUpstream;

pub(crate) fn with_extra(n: usize, prefix: &str) -> catalog::Catalog {
    let mut other = other_tools();
    let mut pets = pets_tools();
    let target = if prefix == "other" {
        &mut other
    } else {
        &mut pets
    };
    target.push(tool(
        &format!("{prefix}__extra_{n}"),
        "GET",
        "/extra",
        json!({"type": "object"}),
        json!([]),
        json!({}),
    ));
    catalog_of(vec![upstream("pets", pets), upstream("other", other)])
}

#[tokio::test]
async fn reload_notifies_exactly_the_sessions_whose_tools_changed() {
    let up = TestUpstream::start().await;
    let gw = start_gateway(&default_catalog(), config_for(&up.url, "")).await;
    let all = connect(&format!("{}/mcp", gw.url)).await;
    let pets = connect(&format!("{}/mcp/pets", gw.url)).await;
    let other = connect(&format!("{}/mcp/other", gw.url)).await;
    // Let each session's standalone stream open before the first reload.
    tokio::time::sleep(Duration::from_millis(300)).await;

    let d = gw.store.install(&with_extra(1, "other")).unwrap();
    assert_eq!(d.added, vec!["other__extra_1"]);
    all.service().wait_changes(1).await;
    other.service().wait_changes(1).await;

    let d = gw.store.install(&with_extra(1, "pets")).unwrap();
    assert_eq!(d.added, vec!["pets__extra_1"]);
    assert_eq!(d.removed, vec!["other__extra_1"]);
    all.service().wait_changes(2).await;
    pets.service().wait_changes(1).await;
    other.service().wait_changes(2).await;

    // A no-op reload sends nothing.
    let d = gw.store.install(&with_extra(1, "pets")).unwrap();
    assert!(d.is_empty());
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(all.service().changes(), 2);
    assert_eq!(pets.service().changes(), 1);
    assert_eq!(other.service().changes(), 2);
    let names: Vec<String> = all
        .list_all_tools()
        .await
        .unwrap()
        .iter()
        .map(|t| t.name.to_string())
        .collect();
    assert!(names.contains(&"pets__extra_1".to_string()));
}

#[tokio::test]
async fn modified_tool_counts_as_a_change() {
    let up = TestUpstream::start().await;
    let gw = start_gateway(&default_catalog(), config_for(&up.url, "")).await;
    let mut cat = default_catalog();
    cat.upstreams[1].tools[0].description = Some("changed".into());
    cat.upstreams[1].seal();
    let cat = catalog_of(cat.upstreams);
    let d = gw.store.install(&cat).unwrap();
    assert_eq!(d.modified, vec!["pets__get_pet"]);
}

#[tokio::test]
async fn failed_reload_keeps_the_previous_catalog() {
    let up = TestUpstream::start().await;
    let gw = start_gateway(&default_catalog(), config_for(&up.url, "")).await;
    let client = connect(&format!("{}/mcp", gw.url)).await;
    let mut bad = with_extra(1, "pets");
    bad.upstreams[1].tools[0].input_schema = catalog::Schema::from_value(&json!({"type": 5}));
    let e = gw.store.install(&bad).unwrap_err();
    assert_eq!(e.upstream, "pets");
    assert_eq!(e.tool.as_deref(), Some("pets__get_pet"));
    assert_eq!(e.field, "inputSchema");
    // A boolean schema compiles, but is not a listable MCP inputSchema.
    bad.upstreams[1].tools[0].input_schema = catalog::Schema::from_value(&json!(true));
    let e = gw.store.install(&bad).unwrap_err();
    assert_eq!(e.field, "inputSchema");
    assert!(e.message.contains("must be a JSON object"), "{}", e.message);
    let tools = client.list_all_tools().await.unwrap();
    assert_eq!(tools.len(), 9);
    let r = call(&client, "pets__get_pet", json!({"id": "7"})).await;
    assert!(!is_error(&r));
}

#[tokio::test]
async fn stateless_2026_client_calls_and_hears_list_changed_through_listen() {
    let up = TestUpstream::start().await;
    let gw = start_gateway(&default_catalog(), config_for(&up.url, "")).await;
    let client = connect_stateless(&format!("{}/mcp/pets", gw.url)).await;
    let r = call(&client, "pets__get_pet", json!({"id": "7"})).await;
    assert!(!is_error(&r), "{}", text(&r));
    let mut sub = tokio::time::timeout(
        WAIT,
        client.listen(SubscriptionFilter::builder().tools_list_changed().build()),
    )
    .await
    .expect("timed out opening subscriptions/listen")
    .expect("listen accepted");
    assert_eq!(sub.acknowledged().tools_list_changed, Some(true));
    gw.store.install(&with_extra(1, "pets")).unwrap();
    let n = tokio::time::timeout(WAIT, sub.next())
        .await
        .expect("timed out waiting for list_changed on the subscription")
        .unwrap()
        .expect("a notification");
    assert!(
        matches!(
            n,
            rmcp::model::ServerNotification::ToolListChangedNotification(_)
        ),
        "{n:?}"
    );
}

// ---- the real binary ----

pub(crate) struct Served {
    pub child: Child,
    pub url: String,
    /// Every line logged so far.
    pub logs: Arc<std::sync::Mutex<Vec<String>>>,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Served {
    /// SIGTERM, then waits for a clean exit (as the kubelet stops a pod).
    pub(crate) async fn terminate(self) {
        self.sigterm();
        self.exited().await;
    }

    /// How many lines were logged so far.
    pub(crate) fn log_count(&self) -> usize {
        self.logs.lock().unwrap().len()
    }

    /// Waits until a line logged after the first `from` contains every one
    /// of `parts`; returns it.
    pub(crate) async fn wait_log(&self, from: usize, parts: &[&str]) -> String {
        tokio::time::timeout(WAIT, async {
            loop {
                let found = self
                    .logs
                    .lock()
                    .unwrap()
                    .iter()
                    .skip(from)
                    .find(|l| parts.iter().all(|p| l.contains(p)))
                    .cloned();
                if let Some(line) = found {
                    return line;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
        .await
        .unwrap_or_else(|_| panic!("timed out waiting for a log line with {parts:?}"))
    }

    /// SIGKILL, as the kernel's OOM killer or a node failure stops a pod:
    /// no drain, every connection closed at once.
    pub(crate) fn sigkill(&mut self) {
        self.child.kill().expect("kill runs");
        let _ = self.child.wait();
    }

    /// Sends SIGTERM.
    pub(crate) fn sigterm(&self) {
        let pid = self.child.id().to_string();
        assert!(Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .expect("kill runs")
            .success());
    }

    /// Waits for a clean exit.
    pub(crate) async fn exited(mut self) {
        let exited = tokio::time::timeout(Duration::from_secs(30), async {
            loop {
                if let Ok(Some(s)) = self.child.try_wait() {
                    return s;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
        .await
        .expect("timed out waiting for toolgate to exit");
        assert!(exited.success(), "toolgate exited with {exited:?}");
    }
}

/// Starts `toolgate serve` on 127.0.0.1:0 and reads its URL from the log.
pub(crate) fn serve(args: &[&str]) -> Served {
    serve_with_env(args, &[])
}

/// [`serve`] with extra environment variables.
pub(crate) fn serve_with_env(args: &[&str], env: &[(&str, &str)]) -> Served {
    let mut child = Command::new(env!("CARGO_BIN_EXE_toolgate"))
        .arg("serve")
        .args(["--listen", "127.0.0.1:0", "--poll-interval-ms", "50"])
        .args(args)
        // Not the default 0.0.0.0:9090, which parallel tests share;
        // `--metrics-addr` wins over it.
        .env("TOOLGATE_METRICS_ADDR", "off")
        .env("RUST_LOG", "info")
        .envs(env.iter().copied())
        .env_remove("POD_NAMESPACE")
        .env_remove("TOOLGATE_LOG_FORMAT")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("toolgate starts");
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let logs = Arc::new(std::sync::Mutex::new(Vec::new()));
    let kept = logs.clone();
    std::thread::spawn(move || {
        let mut sent = false;
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            kept.lock().unwrap().push(line.clone());
            if !sent {
                if let Some(i) = line.find("at http://") {
                    let url = line[i + 3..]
                        // JSON log lines end the message with a quote.
                        .split(|c: char| c.is_whitespace() || c == '"')
                        .next()
                        .unwrap_or("")
                        .to_string();
                    let _ = tx.send(url.trim_end_matches("/mcp").to_string());
                    sent = true;
                }
            }
            if std::env::var("TOOLGATE_E2E_LOGS").is_ok() {
                eprintln!("[toolgate] {line}");
            }
        }
    });
    let url = rx
        .recv_timeout(WAIT)
        .expect("timed out waiting for toolgate to print its URL");
    Served { child, url, logs }
}

pub(crate) fn tempdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("toolgate-e2e-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn configmap_publish(dir: &Path, n: usize, bytes: &[u8]) {
    kubelet_publish(dir, n, "catalog.json", bytes);
}

/// Publishes `bytes` as `dir/name` the way the kubelet updates a ConfigMap
/// or Secret volume: a new timestamped directory, then an atomic rename of
/// the `..data` symlink; `name` links through `..data`.
pub(crate) fn kubelet_publish(dir: &Path, n: usize, name: &str, bytes: &[u8]) {
    let ts = dir.join(format!("..v{n}"));
    std::fs::create_dir_all(&ts).unwrap();
    std::fs::write(ts.join(name), bytes).unwrap();
    let tmp = dir.join("..data_tmp");
    let _ = std::fs::remove_file(&tmp);
    std::os::unix::fs::symlink(format!("..v{n}"), &tmp).unwrap();
    std::fs::rename(&tmp, dir.join("..data")).unwrap();
    let link = dir.join(name);
    if std::fs::symlink_metadata(&link).is_err() {
        std::os::unix::fs::symlink(format!("..data/{name}"), &link).unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn catalog_replaced_20_times_under_load_fails_no_call() {
    let up = TestUpstream::start().await;
    let dir = tempdir("reload");
    let config = dir.join("gateway.yaml");
    std::fs::write(
        &config,
        format!(
            "upstreams:\n  pets: {{baseUrl: '{0}'}}\n  other: {{baseUrl: '{0}/other-base'}}\n",
            up.url
        ),
    )
    .unwrap();
    configmap_publish(&dir, 0, &serde_json::to_vec(&default_catalog()).unwrap());
    let catalog_path = dir.join("catalog.json");
    let served = serve(&[
        "--catalog",
        catalog_path.to_str().unwrap(),
        "--config",
        config.to_str().unwrap(),
    ]);

    let mut clients = Vec::new();
    for _ in 0..4 {
        clients.push(Arc::new(connect(&format!("{}/mcp", served.url)).await));
    }
    let scoped_other = connect(&format!("{}/mcp/other", served.url)).await;
    tokio::time::sleep(Duration::from_millis(300)).await;

    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let ok = Arc::new(AtomicUsize::new(0));
    let failed = Arc::new(AtomicUsize::new(0));
    let mut load = Vec::new();
    for c in &clients {
        let (c, stop, ok, failed) = (c.clone(), stop.clone(), ok.clone(), failed.clone());
        load.push(tokio::spawn(async move {
            while !stop.load(Ordering::SeqCst) {
                match try_call(&c, "pets__get_pet", json!({"id": "7"})).await {
                    Ok(r) if !is_error(&r) => ok.fetch_add(1, Ordering::SeqCst),
                    _ => failed.fetch_add(1, Ordering::SeqCst),
                };
            }
        }));
    }

    for n in 1..=20 {
        // Alternate the changed upstream so scoping is exercised too.
        let prefix = if n % 2 == 0 { "pets" } else { "other" };
        let bytes = serde_json::to_vec(&with_extra(n, prefix)).unwrap();
        if n % 4 == 0 {
            // A plain in-place write every fourth time.
            let target = std::fs::canonicalize(&catalog_path).unwrap();
            std::fs::write(target, bytes).unwrap();
        } else {
            configmap_publish(&dir, n, &bytes);
        }
        for c in &clients {
            c.service().wait_changes(n).await;
        }
        // From the second reload on, each one touches `other` (adding its
        // extra tool or removing the previous one).
        scoped_other.service().wait_changes(n).await;
    }
    stop.store(true, Ordering::SeqCst);
    for l in load {
        tokio::time::timeout(WAIT, l)
            .await
            .expect("timed out stopping the load")
            .unwrap();
    }
    assert_eq!(
        failed.load(Ordering::SeqCst),
        0,
        "failed calls during reloads"
    );
    assert!(
        ok.load(Ordering::SeqCst) > 20,
        "too few calls: {}",
        ok.load(Ordering::SeqCst)
    );
    let tools = clients[0].list_all_tools().await.unwrap();
    assert!(tools.iter().any(|t| t.name == "pets__extra_20"));
    drop(served);
}

#[tokio::test]
async fn sigterm_drains_in_flight_calls_then_exits() {
    let up = TestUpstream::start().await;
    let dir = tempdir("sigterm");
    let (path, config) = write_slow_catalog_files(&dir, &up.url);
    let mut served = serve(&[
        "--catalog",
        path.to_str().unwrap(),
        "--config",
        config.to_str().unwrap(),
        "--grace-period-seconds",
        "5",
    ]);
    let client = connect(&format!("{}/mcp", served.url)).await;
    let pending = tokio::spawn(async move { try_call(&client, "pets__slow", json!({})).await });
    tokio::time::sleep(Duration::from_millis(100)).await;
    let pid = served.child.id().to_string();
    let status = Command::new("kill").args(["-TERM", &pid]).status().unwrap();
    assert!(status.success());
    let r = tokio::time::timeout(WAIT, pending)
        .await
        .expect("timed out waiting for the in-flight call")
        .unwrap()
        .expect("in-flight call completed during shutdown");
    assert!(!is_error(&r), "{}", text(&r));
    let exited = tokio::time::timeout(WAIT, async {
        loop {
            if let Ok(Some(s)) = served.child.try_wait() {
                return s;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .expect("timed out waiting for toolgate to exit");
    assert!(exited.success(), "{exited:?}");
}

#[tokio::test]
async fn spec_mode_compiles_in_process_and_serves() {
    let up = TestUpstream::start().await;
    let spec = toolgate_corpus::spec("oai-petstore-v3.yaml");
    let spec = spec.to_str().expect("a UTF-8 corpus path");
    let served = serve(&["--spec", spec, "--prefix", "pets", "--base-url", &up.url]);
    let client = connect(&format!("{}/mcp", served.url)).await;
    let tools = client.list_all_tools().await.unwrap();
    assert_eq!(tools.len(), 3);
    // Names follow the compiler's naming rules; find them by operationId.
    let named = |op: &str| {
        tools
            .iter()
            .map(|t| t.name.to_string())
            .find(|n| {
                n.replace('_', "")
                    .eq_ignore_ascii_case(&format!("pets{op}"))
            })
            .unwrap_or_else(|| panic!("no tool for {op}"))
    };
    let r = call(&client, &named("showPetById"), json!({"petId": "7"})).await;
    assert!(!is_error(&r), "{}", text(&r));
    assert_eq!(r.structured_content, Some(json!({"id": 7, "name": "rex"})));
    let r = call(&client, &named("listPets"), json!({"limit": 101})).await;
    assert!(is_error(&r));
    assert_eq!(up.count(), 1);
    let r = call(
        &client,
        &named("createPets"),
        json!({"id": 1, "name": "rex"}),
    )
    .await;
    assert!(!is_error(&r), "{}", text(&r));
    let rec = up.last();
    assert_eq!((rec.method.as_str(), rec.path.as_str()), ("POST", "/pets"));
    assert_eq!(
        serde_json::from_slice::<serde_json::Value>(&rec.body).unwrap(),
        json!({"id": 1, "name": "rex"})
    );
}
