//! A rolling restart behind a real reverse proxy: nginx on loopback in
//! front of `toolgate serve` processes, configured like ingress-nginx
//! (HTTP/1.1 keep-alive to the upstreams, no retry on another upstream, so
//! a failed request reaches the client). The test plays the kubelet and
//! the endpoints controller; MCP clients call tools through nginx all
//! along, and not one call may fail.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::reload::{serve, tempdir, Served};
use crate::replicas::{progress, Load};
use crate::support::*;
use crate::upstream::TestUpstream;

/// `--shutdown-delay-seconds` of the replicas. What has to happen within
/// it, as the endpoints update in a cluster: the test sees `/readyz` fail,
/// waits for a phase of calls, rewrites nginx's upstreams and waits for
/// the reload — well under a second on an idle machine. With 0 (no
/// drain), about half the calls of that phase fail with 502.
const SHUTDOWN_DELAY: &str = "10";
/// Calls that must succeed in each phase, so the test cannot pass without
/// traffic.
const CALLS_PER_PHASE: usize = 20;

/// nginx with its own prefix directory: config, pid, logs and temp files
/// all under it, so it runs without root.
struct Nginx {
    bin: PathBuf,
    dir: PathBuf,
    port: u16,
    child: Child,
    generation: usize,
    /// `proxy_next_upstream`: `off` shows every failed request to the
    /// client; `error timeout` is ingress-nginx's default.
    next_upstream: &'static str,
    /// New connections only, so `/generation` is answered by a worker of
    /// the current configuration.
    http: reqwest::Client,
}

impl Drop for Nginx {
    fn drop(&mut self) {
        // SIGTERM: the master stops its workers (SIGKILL would orphan them).
        let pid = self.child.id() as libc::pid_t;
        // SAFETY: signals a child process of this test by its pid.
        unsafe { libc::kill(pid, libc::SIGTERM) };
        let _ = self.child.wait();
    }
}

impl Nginx {
    /// Starts nginx proxying to `upstreams` (host:port), retrying no
    /// request on another upstream.
    async fn start(bin: PathBuf, dir: &Path, upstreams: &[&str]) -> Nginx {
        Nginx::start_with(bin, dir, upstreams, "off").await
    }

    /// [`Nginx::start`] with a `proxy_next_upstream` policy.
    async fn start_with(
        bin: PathBuf,
        dir: &Path,
        upstreams: &[&str],
        next_upstream: &'static str,
    ) -> Nginx {
        std::fs::create_dir_all(dir.join("tmp")).unwrap();
        let http = reqwest::Client::builder()
            .pool_max_idle_per_host(0)
            .build()
            .unwrap();
        // A free port: nginx binds it right after; on the rare collision
        // with another test, take another.
        for _ in 0..5 {
            let port = std::net::TcpListener::bind("127.0.0.1:0")
                .unwrap()
                .local_addr()
                .unwrap()
                .port();
            write_config(dir, port, 0, upstreams, next_upstream);
            let child = command(&bin, dir)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("nginx starts");
            let mut n = Nginx {
                bin: bin.clone(),
                dir: dir.to_path_buf(),
                port,
                child,
                generation: 0,
                next_upstream,
                http: http.clone(),
            };
            if n.serves_generation().await {
                return n;
            }
        }
        panic!("nginx did not start: {}", error_log(dir));
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Whether nginx answers `/generation` with the current generation,
    /// polled until a deadline (or nginx exits).
    async fn serves_generation(&mut self) -> bool {
        let want = self.generation.to_string();
        let give_up = Instant::now() + WAIT;
        while Instant::now() < give_up {
            if let Ok(Some(_)) = self.child.try_wait() {
                return false;
            }
            let url = format!("{}/generation", self.url());
            if let Ok(r) = self.http.get(&url).send().await {
                if r.text().await.is_ok_and(|t| t == want) {
                    return true;
                }
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        false
    }

    /// Points nginx at `upstreams` (the endpoints changed) and waits until
    /// new connections are served by the new configuration.
    async fn route_to(&mut self, upstreams: &[&str]) {
        self.generation += 1;
        write_config(
            &self.dir,
            self.port,
            self.generation,
            upstreams,
            self.next_upstream,
        );
        let status = command(&self.bin, &self.dir)
            .args(["-s", "reload"])
            .status()
            .expect("nginx -s reload runs");
        assert!(
            status.success(),
            "nginx -s reload: {}",
            error_log(&self.dir)
        );
        assert!(
            self.serves_generation().await,
            "nginx did not load generation {}: {}",
            self.generation,
            error_log(&self.dir)
        );
    }

    /// The access log: (upstream addresses, status, method, URI) per
    /// request; the addresses are `a, b` when nginx tried two.
    fn requests(&self) -> Vec<(String, u16, String, String)> {
        let text = std::fs::read_to_string(self.dir.join("access.log")).unwrap_or_default();
        text.lines()
            .map(|l| {
                let mut f = l.splitn(4, ' ');
                let mut next = || f.next().unwrap_or_default().to_string();
                let (status, method, uri, upstream) = (next(), next(), next(), next());
                let status = status.parse().unwrap_or_else(|_| panic!("access log: {l}"));
                (upstream, status, method, uri)
            })
            .collect()
    }

    /// Tool calls and other MCP POSTs `upstream` answered with 200 after
    /// the first `since` logged requests.
    fn answered_by(&self, upstream: &str, since: usize) -> usize {
        self.requests()
            .iter()
            .skip(since)
            .filter(|(u, status, method, uri)| {
                u == upstream && *status == 200 && method == "POST" && uri == "/mcp"
            })
            .count()
    }
}

/// nginx with the prefix, config and error log under `dir`.
fn command(bin: &Path, dir: &Path) -> Command {
    let mut c = Command::new(bin);
    c.arg("-p")
        .arg(dir)
        .arg("-c")
        .arg(dir.join("nginx.conf"))
        .arg("-e")
        .arg(dir.join("error.log"));
    c
}

/// `dir/nginx.conf`: listen on `port`, proxy to `upstreams` (host:port),
/// answer `/generation` with `generation`.
fn write_config(dir: &Path, port: u16, generation: usize, upstreams: &[&str], next_upstream: &str) {
    // `max_fails=0`: nginx would otherwise take a server that refused a
    // connection out of rotation for 10 s on its own, hiding the failures
    // of the following requests; ingress-nginx's balancer does not.
    let servers: String = upstreams
        .iter()
        .map(|u| format!("        server {u} max_fails=0;\n"))
        .collect();
    let dir_text = dir.display();
    let conf = format!(
        r#"daemon off;
master_process on;
worker_processes 2;
pid {dir_text}/nginx.pid;
error_log {dir_text}/error.log notice;
events {{ worker_connections 1024; }}
http {{
    client_body_temp_path {dir_text}/tmp/body;
    proxy_temp_path {dir_text}/tmp/proxy;
    fastcgi_temp_path {dir_text}/tmp/fastcgi;
    uwsgi_temp_path {dir_text}/tmp/uwsgi;
    scgi_temp_path {dir_text}/tmp/scgi;
    # The upstream address last: a request retried on another server
    # logs every address tried, `a, b`.
    log_format calls '$status $request_method $request_uri $upstream_addr';
    access_log {dir_text}/access.log calls;
    upstream gateway {{
{servers}        keepalive 16;
    }}
    server {{
        listen 127.0.0.1:{port};
        # Client side only: the test changes upstreams by reloading nginx
        # (ingress-nginx updates endpoints without one), and a reload
        # closes the old workers' idle client connections under the
        # clients. Not what is under test.
        keepalive_timeout 0;
        location = /generation {{ return 200 "{generation}"; }}
        location / {{
            proxy_pass http://gateway;
            # As ingress-nginx: kept-alive HTTP/1.1 connections upstream.
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_set_header Host $host;
            # `off`: a failed request is the client's failure, not
            # retried on another upstream where it would go unnoticed.
            # `error timeout` (ingress-nginx's default) retries what never
            # reached a server, and never a POST that did.
            proxy_next_upstream {next_upstream};
            # MCP's SSE streams, unbuffered and long-lived (the chart's
            # Ingress annotations).
            proxy_buffering off;
            proxy_request_buffering off;
            proxy_read_timeout 3600s;
            proxy_send_timeout 3600s;
        }}
    }}
}}
"#,
    );
    std::fs::write(dir.join("nginx.conf"), conf).unwrap();
}

fn error_log(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("error.log")).unwrap_or_default()
}

/// host:port of a replica.
fn addr(s: &Served) -> &str {
    s.url.trim_start_matches("http://")
}

/// `/readyz` of a replica: `Some(status)`, `None` when nothing answers.
async fn readyz(s: &Served) -> Option<u16> {
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .build()
        .unwrap();
    match client.get(format!("{}/readyz", s.url)).send().await {
        Ok(r) => Some(r.status().as_u16()),
        Err(_) => None,
    }
}

async fn wait_for(what: &str, mut check: impl AsyncFnMut() -> bool) {
    let give_up = Instant::now() + WAIT;
    while !check().await {
        assert!(Instant::now() < give_up, "timed out waiting until {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The pods of one Deployment: `toolgate serve` processes of the slow
/// test catalog, sharing a session key, in front of one test upstream.
struct Pods {
    dir: PathBuf,
    args: Vec<String>,
    _upstream: TestUpstream,
}

impl Pods {
    async fn new(name: &str) -> Pods {
        gateway::net::install_crypto_provider();
        let upstream = TestUpstream::start().await;
        let dir = tempdir(name);
        let (catalog, config) = write_slow_catalog_files(&dir, &upstream.url);
        let key = dir.join("session.key");
        std::fs::write(&key, format!("{name}-e2e-shared-session-key-0123456789\n")).unwrap();
        let args = [
            "--catalog".as_ref(),
            catalog.as_os_str(),
            "--config".as_ref(),
            config.as_os_str(),
            "--session-key-file".as_ref(),
            key.as_os_str(),
        ]
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
        Pods {
            dir,
            args,
            _upstream: upstream,
        }
    }

    /// One more pod, with `extra` flags.
    fn start(&self, extra: &[&str]) -> Served {
        let mut args: Vec<&str> = self.args.iter().map(String::as_str).collect();
        args.extend(extra);
        serve(&args)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_rolling_restart_behind_nginx_fails_no_call() {
    let Some(bin) = toolgate_tests::tools::nginx() else {
        return;
    };
    let pods = Pods::new("rollout").await;
    let dir = &pods.dir;
    let replica = || {
        pods.start(&[
            "--shutdown-delay-seconds",
            SHUTDOWN_DELAY,
            "--grace-period-seconds",
            "10",
        ])
    };

    let a = replica();
    wait_for("A is ready", async || readyz(&a).await == Some(200)).await;
    let mut nginx = Nginx::start(bin, &dir.join("nginx"), &[addr(&a)]).await;
    let mcp = format!("{}/mcp", nginx.url());

    // Stateless clients, and a session (valid on B too: the shared key).
    let load = Load::default();
    let mut tasks = Vec::new();
    for _ in 0..3 {
        tasks.push(load.spawn(Arc::new(connect_stateless(&mcp).await)));
    }
    tasks.push(load.spawn(Arc::new(connect(&mcp).await)));
    progress(&load, CALLS_PER_PHASE).await;

    // The new pod: ready, then in the endpoints.
    let b = replica();
    wait_for("B is ready", async || readyz(&b).await == Some(200)).await;
    let mark = nginx.requests().len();
    nginx.route_to(&[addr(&a), addr(&b)]).await;
    progress(&load, CALLS_PER_PHASE).await;
    wait_for("B answers calls", async || {
        nginx.answered_by(addr(&b), mark) > 0
    })
    .await;

    // The old pod is deleted: SIGTERM. Its readiness fails at once.
    let mark = nginx.requests().len();
    a.sigterm();
    wait_for("A's /readyz fails", async || readyz(&a).await != Some(200)).await;
    // Endpoints controller, API server, ingress controller: the proxy
    // learns of it only a while later (a second or two in a cluster) and
    // routes to A meanwhile. That lag is played as calls, not time: nginx
    // keeps A for this many more calls.
    let target = load.attempts() + CALLS_PER_PHASE;
    wait_for("calls are made during the drain", async || {
        load.attempts() >= target
    })
    .await;
    load.check();
    assert!(
        nginx.answered_by(addr(&a), mark) > 0,
        "no call reached A after its SIGTERM"
    );
    assert_eq!(readyz(&a).await, Some(503), "A serves on while draining");
    // The endpoints update: A leaves nginx's upstreams.
    nginx.route_to(&[addr(&b)]).await;
    a.exited().await;

    // B alone, with the session restored from its signed id.
    let mark = nginx.requests().len();
    progress(&load, CALLS_PER_PHASE).await;
    load.finish(tasks).await;
    assert!(nginx.answered_by(addr(&b), mark) >= CALLS_PER_PHASE);
    let failed: Vec<_> = nginx
        .requests()
        .into_iter()
        .filter(|(_, status, _, _)| *status >= 500)
        .collect();
    assert!(failed.is_empty(), "nginx logged failures: {failed:?}");
}

/// One of three replicas dies without a drain (SIGKILL: the OOM killer, a
/// lost node) while agents call tools through an ingress-nginx-like proxy.
/// Only the calls in flight on it may fail: nginx retries what could not
/// reach it (ingress-nginx's default `proxy_next_upstream error timeout`),
/// and sessions continue on the other two, restored from their signed ids.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_replica_killed_under_load_fails_only_its_calls_in_flight() {
    let Some(bin) = toolgate_tests::tools::nginx() else {
        return;
    };
    let pods = Pods::new("sigkill").await;
    let dir = &pods.dir;
    let (a, mut b, c) = (pods.start(&[]), pods.start(&[]), pods.start(&[]));
    for r in [&a, &b, &c] {
        wait_for("a replica is ready", async || readyz(r).await == Some(200)).await;
    }
    let mut nginx = Nginx::start_with(
        bin,
        &dir.join("nginx"),
        &[addr(&a), addr(&b), addr(&c)],
        "error timeout",
    )
    .await;
    let mcp = format!("{}/mcp", nginx.url());

    // Stateless clients and sessions apart, to see that the sessions go on.
    let (stateless, sessions) = (Load::default(), Load::default());
    let mut tasks = Vec::new();
    for _ in 0..4 {
        tasks.push(stateless.spawn(Arc::new(connect_stateless(&mcp).await)));
    }
    let mut session_tasks = Vec::new();
    for _ in 0..2 {
        session_tasks.push(sessions.spawn(Arc::new(connect(&mcp).await)));
    }
    let clients = tasks.len() + session_tasks.len();
    wait_for("every replica answers calls", async || {
        [&a, &b, &c]
            .iter()
            .all(|r| nginx.answered_by(addr(r), 0) > 0)
    })
    .await;
    stateless.check();
    sessions.check();

    let mark = nginx.requests().len();
    let killed = addr(&b).to_string();
    b.sigkill();
    // The kubelet, the endpoints controller and the ingress controller
    // learn of it a while later; meanwhile nginx keeps B. Played as calls.
    let target = stateless.attempts() + CALLS_PER_PHASE;
    wait_for("calls are made before the endpoints update", async || {
        stateless.attempts() >= target
    })
    .await;
    nginx.route_to(&[addr(&a), addr(&c)]).await;
    progress(&stateless, CALLS_PER_PHASE).await;
    progress(&sessions, CALLS_PER_PHASE).await;
    stateless.stop(tasks).await;
    sessions.stop(session_tasks).await;

    let failed = stateless.failed() + sessions.failed();
    let mut failures = stateless.failures();
    failures.extend(sessions.failures());
    let refused: Vec<_> = nginx
        .requests()
        .into_iter()
        .skip(mark)
        .filter(|(_, status, _, _)| *status >= 500)
        .collect();
    eprintln!(
        "SIGKILL of 1 of 3 replicas under {clients} clients: {failed} of {} calls failed \
         ({} retried on another replica by nginx)",
        stateless.attempts() + sessions.attempts(),
        nginx
            .requests()
            .iter()
            .skip(mark)
            .filter(|(u, _, _, _)| u.contains(", "))
            .count(),
    );
    eprintln!(
        "failures of stateless clients: {:?}; of sessions: {:?}",
        stateless.failures(),
        sessions.failures()
    );
    // Each client has one call at a time: at most one each was on B.
    assert!(
        failed <= clients,
        "{failed} calls failed, more than the {clients} that can have been in flight on the \
         killed replica: {failures:?}"
    );
    assert!(
        refused.len() <= clients && refused.iter().all(|(u, _, _, _)| *u == killed),
        "requests failed that were not in flight on the killed replica: {refused:?}"
    );
}

#[tokio::test]
async fn a_second_sigterm_skips_the_shutdown_delay() {
    gateway::net::install_crypto_provider();
    let up = TestUpstream::start().await;
    let dir = tempdir("shutdown-delay");
    let (catalog, config) = write_slow_catalog_files(&dir, &up.url);
    let served = serve(&[
        "--catalog",
        catalog.to_str().unwrap(),
        "--config",
        config.to_str().unwrap(),
        "--shutdown-delay-seconds",
        "3600",
    ]);
    let client = connect_stateless(&format!("{}/mcp", served.url)).await;
    served.sigterm();
    wait_for("/readyz fails", async || readyz(&served).await == Some(503)).await;
    // Draining: calls are still served, on connections closed after each
    // response (clients of the Service's virtual IP move to other pods).
    let r = call(&client, "pets__get_pet", serde_json::json!({"id": "7"})).await;
    assert!(!is_error(&r), "{}", text(&r));
    let health = reqwest::get(format!("{}/healthz", served.url))
        .await
        .expect("still serving");
    assert_eq!(health.headers()["connection"], "close");
    served.sigterm();
    // Exits long before the hour is over (`exited` gives up after 30 s).
    served.exited().await;
}
