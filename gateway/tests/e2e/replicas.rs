//! Two real `toolgate serve` processes on the same catalog file, with a
//! shared session key, behind the round-robin [`Proxy`]: the stateless
//! protocol and sessions keep working while replicas restart one at a
//! time, and catalog changes reach clients on every replica.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{ProtocolVersion, ServerNotification, SubscriptionFilter};
use serde_json::{json, Value};

use crate::proxy::{Hit, Proxy};
use crate::reload::{serve, tempdir, with_extra, Served};
use crate::support::*;
use crate::upstream::TestUpstream;

const KEY: &str = "replicas-e2e-shared-session-key-0123456789";

struct Cluster {
    _up: TestUpstream,
    catalog: PathBuf,
    config: PathBuf,
    key: PathBuf,
    proxy: Proxy,
    replicas: HashMap<String, Served>,
}

impl Cluster {
    async fn start(name: &str) -> Cluster {
        let up = TestUpstream::start().await;
        let dir = tempdir(name);
        let (catalog, config) = write_slow_catalog_files(&dir, &up.url);
        let key = dir.join("session.key");
        std::fs::write(&key, format!("{KEY}\n")).unwrap();
        let mut c = Cluster {
            _up: up,
            catalog,
            config,
            key,
            proxy: Proxy::start().await,
            replicas: HashMap::new(),
        };
        c.start_replica("a");
        c.start_replica("b");
        c
    }

    fn mcp(&self) -> String {
        format!("{}/mcp", self.proxy.url)
    }

    fn start_replica(&mut self, name: &str) {
        let served = serve(&[
            "--catalog",
            self.catalog.to_str().unwrap(),
            "--config",
            self.config.to_str().unwrap(),
            "--session-key-file",
            self.key.to_str().unwrap(),
            "--grace-period-seconds",
            "5",
        ]);
        self.proxy.add(name, &served.url);
        self.replicas.insert(name.to_string(), served);
    }

    /// What Kubernetes does in a rolling restart: out of the Endpoints,
    /// SIGTERM, wait for the exit, start a new pod, back in the Endpoints.
    async fn restart(&mut self, name: &str) {
        self.proxy.remove(name);
        // Endpoint removal reaches the proxies slightly before the signal.
        tokio::time::sleep(Duration::from_millis(100)).await;
        self.replicas
            .remove(name)
            .expect("replica exists")
            .terminate()
            .await;
        self.start_replica(name);
    }

    /// Replaces the catalog file atomically; each replica's watcher picks
    /// it up.
    fn publish(&self, cat: &catalog::Catalog) {
        let tmp = self.catalog.with_extension("tmp");
        std::fs::write(&tmp, serde_json::to_vec(cat).unwrap()).unwrap();
        std::fs::rename(&tmp, &self.catalog).unwrap();
    }
}

/// Calls tools in a loop until stopped, counting successes and keeping
/// the failures.
#[derive(Clone, Default)]
pub(crate) struct Load {
    /// Calls made in turn; empty: the test catalog's `pets__get_pet` and
    /// (every third call) `pets__slow`.
    calls: Arc<Vec<(String, Value)>>,
    stop: Arc<AtomicBool>,
    ok: Arc<AtomicUsize>,
    failed: Arc<AtomicUsize>,
    /// The first few failures, to show.
    failures: Arc<Mutex<Vec<String>>>,
}

impl Load {
    pub(crate) fn calling(calls: Vec<(String, Value)>) -> Load {
        Load {
            calls: Arc::new(calls),
            ..Load::default()
        }
    }

    pub(crate) fn spawn(&self, client: Arc<Client>) -> tokio::task::JoinHandle<()> {
        let me = self.clone();
        tokio::spawn(async move {
            let mut n = 0usize;
            while !me.stop.load(Ordering::SeqCst) {
                n += 1;
                let (tool, args) = if !me.calls.is_empty() {
                    let (t, a) = &me.calls[n % me.calls.len()];
                    (t.as_str(), a.clone())
                } else if n.is_multiple_of(3) {
                    ("pets__slow", json!({}))
                } else {
                    ("pets__get_pet", json!({"id": "7"}))
                };
                let mut params = rmcp::model::CallToolRequestParams::new(tool.to_string());
                params.arguments = Some(crate::support::args(args));
                // A call that never answers is a failure the client sees
                // at its own timeout, not a reason to stop the load.
                let failure = match tokio::time::timeout(WAIT, client.call_tool(params)).await {
                    Ok(Ok(r)) if !is_error(&r) => {
                        me.ok.fetch_add(1, Ordering::SeqCst);
                        continue;
                    }
                    Ok(Ok(r)) => text(&r),
                    Ok(Err(e)) => format!("{tool}: {e}"),
                    Err(_) => format!("{tool}: no answer within {WAIT:?}"),
                };
                me.failed.fetch_add(1, Ordering::SeqCst);
                {
                    let mut shown = me.failures.lock().unwrap();
                    if shown.len() < 20 {
                        shown.push(failure);
                    }
                }
                // A client whose transport broke fails every call without
                // waiting: yield, or this task never gives its worker back
                // (nor lets the runtime shut down when the test fails).
                tokio::task::yield_now().await;
            }
        })
    }

    pub(crate) fn ok(&self) -> usize {
        self.ok.load(Ordering::SeqCst)
    }

    pub(crate) async fn finish(&self, tasks: Vec<tokio::task::JoinHandle<()>>) {
        self.stop(tasks).await;
        self.check();
    }

    /// Stops the load, failed calls or not.
    pub(crate) async fn stop(&self, tasks: Vec<tokio::task::JoinHandle<()>>) {
        self.stop.store(true, Ordering::SeqCst);
        for t in tasks {
            tokio::time::timeout(WAIT, t)
                .await
                .expect("timed out stopping the load")
                .unwrap();
        }
    }

    pub(crate) fn failed(&self) -> usize {
        self.failed.load(Ordering::SeqCst)
    }

    /// The first failures, as the clients saw them.
    pub(crate) fn failures(&self) -> Vec<String> {
        self.failures.lock().unwrap().clone()
    }

    /// Calls made so far, failed or not.
    pub(crate) fn attempts(&self) -> usize {
        self.ok() + self.failed.load(Ordering::SeqCst)
    }

    /// Asserts that no call failed so far.
    pub(crate) fn check(&self) {
        let failed = self.failed.load(Ordering::SeqCst);
        let failures = self.failures.lock().unwrap();
        assert!(
            failed == 0,
            "{failed} failed calls; the first: {failures:?}"
        );
    }
}

pub(crate) fn is_call(h: &Hit) -> bool {
    h.rpc.as_deref() == Some("tools/call")
}

/// Waits until the load made `n` more successful calls.
pub(crate) async fn progress(load: &Load, n: usize) {
    let target = load.ok() + n;
    tokio::time::timeout(WAIT, async {
        while load.ok() < target {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("timed out waiting for calls to succeed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn stateless_2026_calls_survive_a_rolling_restart() {
    let mut c = Cluster::start("replicas-stateless").await;
    let load = Load::default();
    let mut tasks = Vec::new();
    for _ in 0..4 {
        tasks.push(load.spawn(Arc::new(connect_stateless(&c.mcp()).await)));
    }
    progress(&load, 20).await;
    for name in ["a", "b"] {
        c.restart(name).await;
        let mark = c.proxy.hits().len();
        progress(&load, 20).await;
        // The restarted replica took calls again.
        let after = c.proxy.hits()[mark..]
            .iter()
            .filter(|h| h.backend == name && is_call(h))
            .count();
        assert!(after > 0, "no calls reached restarted replica {name}");
    }
    load.finish(tasks).await;
    for name in ["a", "b"] {
        let n = c.proxy.count(name, is_call);
        assert!(n > 5, "only {n} calls reached replica {name}");
    }
    // Stateless: no sessions were ever involved.
    assert!(c.proxy.hits().iter().all(|h| h.session.is_none()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sessions_continue_on_any_replica_across_restarts() {
    let mut c = Cluster::start("replicas-sessions").await;
    let load = Load::default();
    let s1 = Arc::new(connect(&c.mcp()).await);
    let s2 = Arc::new(connect_as(&c.mcp(), ProtocolVersion::V_2025_06_18, None).await);
    let mut tasks = vec![load.spawn(s1.clone()), load.spawn(s2.clone())];
    // Other traffic on the same proxy.
    tasks.push(load.spawn(Arc::new(connect_stateless(&c.mcp()).await)));
    progress(&load, 30).await;

    let sessions: HashSet<String> = c
        .proxy
        .hits()
        .iter()
        .filter(|h| is_call(h))
        .filter_map(|h| h.session.clone())
        .collect();
    assert_eq!(sessions.len(), 2, "{sessions:?}");
    let initializes = |hits: &[Hit]| {
        hits.iter()
            .filter(|h| h.rpc.as_deref() == Some("initialize"))
            .count()
    };
    let mark = c.proxy.hits().len();
    for name in ["b", "a"] {
        c.restart(name).await;
        progress(&load, 20).await;
    }
    let after = c.proxy.hits()[mark..].to_vec();
    load.finish(tasks).await;

    for s in &sessions {
        for name in ["a", "b"] {
            // Each session's calls landed on both replicas, including the
            // restarted ones that never saw its initialize.
            let n = after
                .iter()
                .filter(|h| h.backend == name && is_call(h) && h.session.as_ref() == Some(s))
                .count();
            assert!(
                n > 0,
                "session {s} made no call on restarted replica {name}"
            );
        }
    }
    assert_eq!(initializes(&after), 0, "a client had to re-initialize");

    // The sessions' notification streams moved to live replicas too.
    c.publish(&with_extra(1, "pets"));
    s1.service().wait_changes(1).await;
    s2.service().wait_changes(1).await;
    let tools = s1.list_all_tools().await.unwrap();
    assert!(tools.iter().any(|t| t.name == "pets__extra_1"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn list_changed_reaches_clients_on_both_replicas() {
    let c = Cluster::start("replicas-listchanged").await;
    let on_both = |f: &dyn Fn(&Hit) -> bool| c.proxy.count("a", f) > 0 && c.proxy.count("b", f) > 0;

    // Session clients until their standalone streams (GET) are on both.
    let mut sessions = Vec::new();
    while !on_both(&|h| h.http_method == "GET") {
        assert!(
            sessions.len() < 8,
            "GET streams never spread over both replicas"
        );
        sessions.push(connect(&c.mcp()).await);
        tokio::time::sleep(Duration::from_millis(200)).await;
        shift(&c.proxy).await;
    }
    // 2026-07-28 listeners until subscriptions are open on both.
    let mut listeners = Vec::new();
    while !on_both(&|h| h.rpc.as_deref() == Some("subscriptions/listen")) {
        assert!(
            listeners.len() < 8,
            "subscriptions never spread over both replicas"
        );
        let client = connect_stateless(&c.mcp()).await;
        let sub = tokio::time::timeout(
            WAIT,
            client.listen(SubscriptionFilter::builder().tools_list_changed().build()),
        )
        .await
        .expect("timed out opening subscriptions/listen")
        .expect("listen accepted");
        listeners.push((client, sub));
        // Each connect makes two requests; shift the rotation so the next
        // subscription does not land where this one did.
        shift(&c.proxy).await;
    }

    c.publish(&with_extra(1, "pets"));
    for s in &sessions {
        s.service().wait_changes(1).await;
    }
    for (_, sub) in &mut listeners {
        let n = tokio::time::timeout(WAIT, sub.next())
            .await
            .expect("timed out waiting for list_changed on a subscription")
            .unwrap()
            .expect("a notification");
        assert!(
            matches!(n, ServerNotification::ToolListChangedNotification(_)),
            "{n:?}"
        );
    }
    // Whichever replica answers, it serves the new catalog.
    for _ in 0..4 {
        let tools = listeners[0].0.list_all_tools().await.unwrap();
        assert!(tools.iter().any(|t| t.name == "pets__extra_1"));
    }
}

/// One request through the proxy, moving its rotation by one.
async fn shift(proxy: &Proxy) {
    gateway::net::install_crypto_provider();
    let r = reqwest::get(format!("{}/healthz", proxy.url))
        .await
        .unwrap();
    assert!(r.status().is_success());
}

/// A raw tools/list with `session`, straight to `base` (`/mcp`).
pub(crate) async fn raw_list(base: &str, session: &str) -> u16 {
    raw_list_at(&format!("{base}/mcp"), session).await
}

async fn raw_list_at(url: &str, session: &str) -> u16 {
    reqwest::Client::new()
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-session-id", session)
        .header("mcp-protocol-version", "2025-11-25")
        .body(r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#)
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn session_ids_are_refused_without_the_shared_key() {
    gateway::net::install_crypto_provider();
    let c = Cluster::start("replicas-key").await;
    let s = connect(&c.mcp()).await;
    let _ = s.list_all_tools().await.unwrap();
    let id = c
        .proxy
        .hits()
        .iter()
        .find_map(|h| h.session.clone())
        .expect("the client sent its session id");
    assert_eq!(raw_list(&c.replicas["a"].url, &id).await, 200);
    assert_eq!(raw_list(&c.replicas["b"].url, &id).await, 200);
    // Tampered ids and a replica with another key: unknown session.
    let forged = format!("{id}x");
    assert_eq!(raw_list(&c.replicas["a"].url, &forged).await, 404);
    // An `/mcp` session does not open `/mcp/pets`, even on a replica that
    // has not seen it.
    let scoped = format!("{}/mcp/pets", c.replicas["b"].url);
    assert_eq!(raw_list_at(&scoped, &id).await, 404);
    let stranger = serve(&[
        "--catalog",
        c.catalog.to_str().unwrap(),
        "--config",
        c.config.to_str().unwrap(),
    ]);
    assert_eq!(raw_list(&stranger.url, &id).await, 404);
}
