//! Load and memory benchmark of `toolgate serve` (a plain binary, not a
//! timed test: it prints numbers and never fails on them).
//!
//! ```text
//! cargo bench -p gateway --bench load                 # both parts
//! cargo bench -p gateway --bench load -- --load       # throughput/latency only
//! cargo bench -p gateway --bench load -- --memory     # RSS with the corpus only
//! cargo bench -p gateway --bench load -- --auth       # JWT auth on vs off only
//! cargo bench -p gateway --bench load -- --tracing    # OTLP traces on vs off only
//! cargo bench -p gateway --bench load -- --access     # costly access rules only
//! ```
//!
//! **Load.** A small upstream (axum, `GET /pets/{id}` → a 3-field JSON
//! object) runs in this process; the real `toolgate` binary runs as a
//! subprocess serving a catalog compiled from a tiny OpenAPI document for
//! it. For 1 and 32 concurrent clients, each for a fixed duration, it
//! measures tools/call through the gateway (one rmcp Streamable HTTP client
//! per worker, each its own session) and the same request sent directly
//! with reqwest (one client per worker, so both sides use one connection
//! per worker). Everything shares one machine; the ratios, not the
//! absolute numbers, are the result.
//!
//! **Memory.** Every document of the corpus (`TOOLGATE_SPECS`, else
//! `../shared/specs`) is compiled with its own prefix into one catalog
//! file; `toolgate serve --catalog FILE` loads it, and once `/readyz` says
//! ready the gateway's VmRSS is read from `/proc/PID/status` (again after a
//! full `tools/list`, which builds every tool's MCP view).
//!
//! **Auth.** The same upstream behind two gateways started side by side:
//! one open, one requiring JWTs from a test identity provider on loopback
//! (`toolgate_tests::idp`, RS256). Each client sends one minted token with
//! every call, so every call verifies a signature and its claims; the two
//! are measured in alternating rounds (open, JWT, open, JWT) so drift in
//! the machine's load hits both alike.
//!
//! **Tracing.** As for auth: two gateways side by side, one without
//! tracing, one exporting every span (the default sampler samples all)
//! over OTLP/HTTP to a receiver in this process
//! (`toolgate_tests::otlp`); alternating rounds. The receiver answers
//! without decoding, so the numbers are the gateway's cost rather than a
//! collector's sharing its cores (`BENCH_OTLP_DECODE=1` decodes, as the
//! tests do).
//!
//! **Access.** The attacks of the second security round, on the release
//! binary: the access rules that once crashed every replica must stop
//! `serve` at load, naming the field; and 200 upstreams, each with the
//! costliest policy the bound admits, listed by callers with 11 KiB of
//! claims (four at once, each a different caller), must leave `/healthz`
//! answering promptly: decisions that costly run on the blocking pool.
//! Prints the listing times, first and remembered, and `/healthz`'s
//! slowest answer meanwhile.
//!
//! Env: `BENCH_SECONDS` (default 5) per measurement.
//!
//! Size: over 600 lines because this is a bench binary (each file under
//! `benches/` is one); its scenarios share one harness (spawning `toolgate
//! serve`, loopback upstreams, measuring RSS) and are read side by side.

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rmcp::model::{CallToolRequestParams, ClientConfig, ProtocolVersion};
use rmcp::service::RunningService;
use rmcp::service::{ClientLifecycleMode, ClientServiceExt};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::RoleClient;
use serde_json::{json, Value};

const TOOLGATE: &str = env!("CARGO_BIN_EXE_toolgate");

fn main() {
    let args: Vec<String> = std::env::args().collect();
    // `cargo test --benches` (CI) runs bench binaries without `--bench`:
    // building it is the check there; the measurement needs a release build
    // and minutes of load.
    if !args.iter().any(|a| a == "--bench") {
        println!("gateway load bench: skipped outside `cargo bench`");
        return;
    }
    let only_load = args.iter().any(|a| a == "--load");
    let only_mem = args.iter().any(|a| a == "--memory");
    let only_auth = args.iter().any(|a| a == "--auth");
    let only_tracing = args.iter().any(|a| a == "--tracing");
    let only_access = args.iter().any(|a| a == "--access");
    gateway::net::install_crypto_provider();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let tmp = std::env::temp_dir().join(format!("toolgate-bench-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).expect("temp dir");
    let all = !only_load && !only_mem && !only_auth && !only_tracing && !only_access;
    if all || only_load {
        rt.block_on(load(&tmp));
    }
    if all || only_mem {
        rt.block_on(memory(&tmp));
    }
    if all || only_auth {
        rt.block_on(auth(&tmp));
    }
    if all || only_tracing {
        rt.block_on(tracing_cost(&tmp));
    }
    if all || only_access {
        rt.block_on(access_attacks(&tmp));
    }
    let _ = std::fs::remove_dir_all(&tmp);
}

// ---------------------------------------------------------------- load

/// Upstream service times measured: an instant upstream (the worst case
/// for the ratio: all of a call is transport) and one that takes 1 ms, like
/// an API doing real work.
const DELAYS_MS: [u64; 2] = [0, 1];

async fn upstream() -> SocketAddr {
    use axum::extract::Path;
    use axum::routing::get;
    async fn pet(Path(id): Path<u64>) -> axum::Json<Value> {
        axum::Json(json!({"id": id, "name": "rex", "tag": "dog"}))
    }
    async fn slow_pet(Path(id): Path<u64>) -> axum::Json<Value> {
        tokio::time::sleep(Duration::from_millis(1)).await;
        axum::Json(json!({"id": id, "name": "rex", "tag": "dog"}))
    }
    let app = axum::Router::new()
        .route("/pets/{id}", get(pet))
        .route("/slow/pets/{id}", get(slow_pet));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind upstream");
    let addr = listener.local_addr().expect("upstream addr");
    tokio::spawn(async move { axum::serve(listener, app).await });
    addr
}

fn pets_spec(base: &str) -> Value {
    let op = |id: &str| {
        json!({
            "operationId": id,
            "summary": "One pet",
            "parameters": [{"name": "id", "in": "path", "required": true,
                            "schema": {"type": "integer", "minimum": 1}}],
            "responses": {"200": {"description": "the pet", "content": {"application/json": {
                "schema": {"type": "object", "required": ["id", "name"], "properties": {
                    "id": {"type": "integer"}, "name": {"type": "string"}, "tag": {"type": "string"}}}}}}}
        })
    };
    json!({
        "openapi": "3.0.3",
        "info": {"title": "pets", "version": "1"},
        "servers": [{"url": base}],
        "paths": {
            "/pets/{id}": {"get": op("get_pet")},
            "/slow/pets/{id}": {"get": op("get_slow_pet")}
        }
    })
}

fn compile(prefix: &str, document: &str, spec: &[u8]) -> Result<catalog::UpstreamCatalog, String> {
    catalog::compile_upstream(&catalog::UpstreamSource {
        prefix,
        document,
        spec,
        overlays: &[],
        options: &catalog::CompileOptions::default(),
    })
    .map_err(|e| e.to_string())
}

/// A running `toolgate serve`, killed on drop.
struct Gateway {
    child: Child,
    url: String,
}

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("free port")
        .port()
}

async fn start_gateway(catalog: &Path, config: Option<&Path>) -> Gateway {
    start_gateway_on(free_port(), catalog, config).await
}

async fn start_gateway_on(port: u16, catalog: &Path, config: Option<&Path>) -> Gateway {
    start_gateway_with_env(port, catalog, config, &[]).await
}

async fn start_gateway_with_env(
    port: u16,
    catalog: &Path,
    config: Option<&Path>,
    env: &[(&str, &str)],
) -> Gateway {
    let mut cmd = Command::new(TOOLGATE);
    cmd.envs(env.iter().copied());
    cmd.args([
        "serve",
        "--listen",
        &format!("127.0.0.1:{port}"),
        "--catalog",
    ])
    .arg(catalog)
    // Several gateways at once: not all on the default metrics port.
    .env("TOOLGATE_METRICS_ADDR", "off")
    .stdout(Stdio::null())
    .stderr(Stdio::null());
    // The gateway's tokio worker threads (default: one per core).
    if let Ok(t) = std::env::var("BENCH_GATEWAY_THREADS") {
        cmd.env("TOKIO_WORKER_THREADS", t);
    }
    if let Some(c) = config {
        cmd.arg("--config").arg(c);
    }
    let child = cmd.spawn().expect("spawn toolgate serve");
    let gw = Gateway {
        child,
        url: format!("http://127.0.0.1:{port}"),
    };
    let http = reqwest::Client::new();
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        if let Ok(r) = http.get(format!("{}/readyz", gw.url)).send().await {
            if r.status().is_success() {
                return gw;
            }
        }
        assert!(Instant::now() < deadline, "toolgate never became ready");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

type Client = RunningService<RoleClient, ClientConfig>;

/// An MCP client on one kept-alive connection. rmcp's default HTTP client
/// opens a connection per request (`pool_max_idle_per_host(0)`); the
/// official SDKs' clients (httpx, undici) keep connections alive.
async fn connect(url: &str, mode: Mode) -> Client {
    connect_as(url, mode, None).await
}

async fn connect_as(url: &str, mode: Mode, token: Option<&str>) -> Client {
    let mut config = StreamableHttpClientTransportConfig::with_uri(format!("{url}/mcp"));
    if let Some(t) = token {
        config = config.auth_header(t);
    }
    let transport = StreamableHttpClientTransport::with_client(reqwest::Client::new(), config);
    let lifecycle = match mode {
        Mode::Stateless => ClientLifecycleMode::Discover {
            preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        },
        _ => ClientLifecycleMode::Initialize,
    };
    ClientConfig::default()
        .serve_with_lifecycle(transport, lifecycle)
        .await
        .expect("MCP client connects")
}

#[derive(Clone, Copy, PartialEq, Debug)]
enum Mode {
    /// reqwest straight to the upstream.
    Direct,
    /// Through the gateway, 2025-11-25 with a session: each result is an
    /// SSE stream of one event.
    Session,
    /// Through the gateway, 2026-07-28 stateless: each result is JSON.
    Stateless,
    /// The same stateless JSON-RPC POST sent with plain reqwest: the
    /// gateway's own cost without the rmcp client's.
    Raw,
}

impl Mode {
    fn label(self) -> &'static str {
        match self {
            Mode::Direct => "direct",
            Mode::Session => "gateway, session",
            Mode::Stateless => "gateway, stateless",
            Mode::Raw => "gateway, raw POST",
        }
    }
}

struct Stats {
    calls: usize,
    errors: usize,
    rate: f64,
    p50: Duration,
    p99: Duration,
}

/// One worker's loop until `end`; returns latencies (µs) and error count.
async fn worker(
    mode: Mode,
    delay_ms: u64,
    base: Arc<str>,
    gw: Arc<str>,
    seed: u64,
    end: Instant,
    token: Option<Arc<str>>,
) -> (Vec<u32>, usize) {
    let mut lat = Vec::with_capacity(100_000);
    let mut errors = 0;
    let http = reqwest::Client::new();
    let mcp = match mode {
        Mode::Direct | Mode::Raw => None,
        _ => Some(connect_as(&gw, mode, token.as_deref()).await),
    };
    let (path, tool) = if delay_ms == 0 {
        ("pets", "pets__get_pet")
    } else {
        ("slow/pets", "pets__get_slow_pet")
    };
    let mut i = seed * 1_000_000;
    while Instant::now() < end {
        i += 1;
        let id = i % 1000 + 1;
        let t = Instant::now();
        let ok = match &mcp {
            None if mode == Mode::Raw => raw_call(&http, &gw, tool, i, id, token.as_deref()).await,
            None => match http.get(format!("{base}/{path}/{id}")).send().await {
                Ok(r) if r.status().is_success() => r.json::<Value>().await.is_ok(),
                _ => false,
            },
            Some(c) => {
                let mut p = CallToolRequestParams::new(tool);
                p.arguments = json!({"id": id}).as_object().cloned();
                matches!(c.call_tool(p).await, Ok(r) if r.is_error != Some(true))
            }
        };
        let us = t.elapsed().as_micros().min(u32::MAX as u128) as u32;
        if ok {
            lat.push(us);
        } else {
            errors += 1;
        }
    }
    if let Some(c) = mcp {
        let _ = c.cancel().await;
    }
    (lat, errors)
}

/// tools/call as one stateless (2026-07-28) JSON-RPC POST.
async fn raw_call(
    http: &reqwest::Client,
    gw: &str,
    tool: &str,
    rpc_id: u64,
    id: u64,
    token: Option<&str>,
) -> bool {
    let body = json!({
        "jsonrpc": "2.0", "id": rpc_id, "method": "tools/call",
        "params": {
            "name": tool, "arguments": {"id": id},
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "1"},
                "io.modelcontextprotocol/clientCapabilities": {}
            }
        }
    });
    let mut req = http.post(format!("{gw}/mcp"));
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    let sent = req
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/call")
        .header("mcp-name", tool)
        .json(&body)
        .send()
        .await;
    match sent {
        Ok(r) if r.status().is_success() => match r.json::<Value>().await {
            Ok(v) => v["result"]["isError"] == json!(false),
            Err(_) => false,
        },
        _ => false,
    }
}

async fn measure(
    mode: Mode,
    delay_ms: u64,
    clients: usize,
    base: &str,
    gw: &str,
    secs: f64,
) -> Stats {
    measure_as(mode, delay_ms, clients, base, gw, secs, None).await
}

async fn measure_as(
    mode: Mode,
    delay_ms: u64,
    clients: usize,
    base: &str,
    gw: &str,
    secs: f64,
    token: Option<&str>,
) -> Stats {
    let base: Arc<str> = Arc::from(base);
    let gw: Arc<str> = Arc::from(gw);
    let token: Option<Arc<str>> = token.map(Arc::from);
    let run = |end: Instant| -> Vec<_> {
        (0..clients)
            .map(|s| {
                tokio::spawn(worker(
                    mode,
                    delay_ms,
                    base.clone(),
                    gw.clone(),
                    s as u64,
                    end,
                    token.clone(),
                ))
            })
            .collect()
    };
    // Warm-up: connections, sessions, the tool's validators.
    for t in run(Instant::now() + Duration::from_millis(500)) {
        let _ = t.await;
    }
    let start = Instant::now();
    let mut all = Vec::new();
    let mut errors = 0;
    for t in run(start + Duration::from_secs_f64(secs)) {
        let (l, e) = t.await.expect("worker");
        all.extend(l);
        errors += e;
    }
    let elapsed = start.elapsed().as_secs_f64();
    all.sort_unstable();
    let pct = |p: f64| {
        all.get(((all.len() as f64 * p) as usize).min(all.len().saturating_sub(1)))
            .map(|&us| Duration::from_micros(us as u64))
            .unwrap_or_default()
    };
    Stats {
        calls: all.len(),
        errors,
        rate: all.len() as f64 / elapsed,
        p50: pct(0.50),
        p99: pct(0.99),
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

async fn load(tmp: &Path) {
    let secs: f64 = std::env::var("BENCH_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(5.0);
    let up = upstream().await;
    let base = format!("http://{up}");
    let spec = serde_json::to_vec(&pets_spec(&base)).expect("spec");
    let upstream = compile("pets", "pets.json", &spec).expect("pets spec compiles");
    let cat = catalog::Catalog::new(vec![upstream]);
    let file = tmp.join("pets-catalog.json");
    std::fs::write(&file, serde_json::to_vec(&cat).expect("catalog json")).expect("write");
    let gw = start_gateway(&file, None).await;

    // One call through each path first: a broken setup must not be
    // reported as a fast benchmark.
    for mode in [Mode::Session, Mode::Stateless] {
        let c = connect(&gw.url, mode).await;
        for tool in ["pets__get_pet", "pets__get_slow_pet"] {
            let mut p = CallToolRequestParams::new(tool);
            p.arguments = json!({"id": 7}).as_object().cloned();
            let r = c.call_tool(p).await.expect("tools/call answers");
            assert_ne!(r.is_error, Some(true), "{mode:?} {tool} failed: {r:?}");
        }
        let _ = c.cancel().await;
    }

    println!(
        "\n## tools/call load ({secs} s per row, upstream GET /pets/{{id}}, {} cores, gateway threads: {})\n",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        std::env::var("BENCH_GATEWAY_THREADS").unwrap_or_else(|_| "default".into())
    );
    println!("| upstream | path               | clients | calls  | errors | calls/s  | p50 ms | p99 ms |");
    println!("|----------|--------------------|---------|--------|--------|----------|--------|--------|");
    let mut results = Vec::new();
    for delay in DELAYS_MS {
        for clients in [1usize, 32] {
            for mode in [Mode::Direct, Mode::Session, Mode::Stateless, Mode::Raw] {
                let s = measure(mode, delay, clients, &base, &gw.url, secs).await;
                println!(
                    "| {:>5} ms | {:<18} | {:>7} | {:>6} | {:>6} | {:>8.0} | {:>6.3} | {:>6.3} |",
                    delay,
                    mode.label(),
                    clients,
                    s.calls,
                    s.errors,
                    s.rate,
                    ms(s.p50),
                    ms(s.p99)
                );
                results.push((delay, clients, mode, s));
            }
        }
    }
    let get = |d: u64, c: usize, m: Mode| {
        results
            .iter()
            .find(|(dd, cc, mm, _)| *dd == d && *cc == c && *mm == m)
            .map(|(_, _, _, s)| s)
            .expect("measured")
    };
    println!();
    for delay in DELAYS_MS {
        for mode in [Mode::Session, Mode::Stateless, Mode::Raw] {
            for c in [1, 32] {
                let (d, g) = (get(delay, c, Mode::Direct), get(delay, c, mode));
                println!(
                    "upstream {delay} ms, {}, {c:>2} client(s): gateway/direct rate {:.2}x (goal >= 0.5x)",
                    mode.label(),
                    g.rate / d.rate
                );
            }
            let (d, g) = (get(delay, 1, Mode::Direct), get(delay, 1, mode));
            println!(
                "upstream {delay} ms, {}: p50 added latency at 1 client {:.3} ms (goal <= 0.2 ms)",
                mode.label(),
                ms(g.p50) - ms(d.p50)
            );
        }
    }
}

// ---------------------------------------------------------------- auth

async fn auth(tmp: &Path) {
    let secs: f64 = std::env::var("BENCH_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(5.0);
    let idp = toolgate_tests::idp::Idp::start().await;
    let up = upstream().await;
    let base = format!("http://{up}");
    let spec = serde_json::to_vec(&pets_spec(&base)).expect("spec");
    let upstream = compile("pets", "pets.json", &spec).expect("pets spec compiles");
    let file = tmp.join("pets-catalog-auth.json");
    let cat = catalog::Catalog::new(vec![upstream]);
    std::fs::write(&file, serde_json::to_vec(&cat).expect("catalog json")).expect("write");
    let port = free_port();
    let config = tmp.join("gateway-jwt.yaml");
    let text = json!({"inbound": {
        "resource": format!("http://127.0.0.1:{port}/mcp"),
        "jwt": [{"issuer": idp.issuer(), "audiences": ["toolgate"]}],
    }});
    std::fs::write(&config, serde_json::to_vec(&text).expect("config")).expect("write");
    let open = start_gateway(&file, None).await;
    let jwt = start_gateway_on(port, &file, Some(&config)).await;
    let token = idp.token().aud("toolgate").scope("pets.read").mint();

    // A broken setup must not be reported as fast: the JWT gateway must
    // refuse a call without the token and serve one with it.
    let refused = reqwest::Client::new()
        .post(format!("{}/mcp", jwt.url))
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}))
        .send()
        .await
        .expect("the JWT gateway answers");
    assert_eq!(
        refused.status(),
        401,
        "the JWT gateway must require a token"
    );
    let c = connect_as(&jwt.url, Mode::Stateless, Some(&token)).await;
    let mut p = CallToolRequestParams::new("pets__get_pet");
    p.arguments = json!({"id": 7}).as_object().cloned();
    let r = c.call_tool(p).await.expect("tools/call with a token");
    assert_ne!(r.is_error, Some(true), "{r:?}");
    let _ = c.cancel().await;

    println!("\n## tools/call with JWT auth on vs off ({secs} s per row, upstream 0 ms, RS256)\n");
    println!(
        "| path               | clients | auth | calls  | errors | calls/s  | p50 ms | p99 ms |"
    );
    println!(
        "|--------------------|---------|------|--------|--------|----------|--------|--------|"
    );
    let mut sums = RateSums::default();
    for _round in 0..2 {
        for mode in [Mode::Raw, Mode::Session] {
            for clients in [1usize, 32] {
                for on in [false, true] {
                    let (gw, t) = if on {
                        (&jwt.url, Some(token.as_str()))
                    } else {
                        (&open.url, None)
                    };
                    let s = measure_as(mode, 0, clients, &base, gw, secs, t).await;
                    println!(
                        "| {:<18} | {:>7} | {:<4} | {:>6} | {:>6} | {:>8.0} | {:>6.3} | {:>6.3} |",
                        mode.label(),
                        clients,
                        if on { "JWT" } else { "off" },
                        s.calls,
                        s.errors,
                        s.rate,
                        ms(s.p50),
                        ms(s.p99)
                    );
                    let e = sums.entry((mode.label(), clients, on)).or_default();
                    e.0 += s.rate;
                    e.1 += 1;
                }
            }
        }
    }
    println!();
    print_change(&sums, "JWT");
}

/// Rates summed over rounds, by mode, clients and whether the feature
/// under test is on.
type RateSums = std::collections::BTreeMap<(&'static str, usize, bool), (f64, u32)>;

/// The mean rate with `feature` on against off, per mode and clients.
fn print_change(sums: &RateSums, feature: &str) {
    for mode in [Mode::Raw, Mode::Session] {
        for clients in [1usize, 32] {
            let avg = |on| {
                let (sum, n) = sums[&(mode.label(), clients, on)];
                sum / f64::from(n)
            };
            let (off, on) = (avg(false), avg(true));
            println!(
                "{}, {clients:>2} client(s): {feature} {on:.0} vs off {off:.0} calls/s: {:+.1}% (goal >= -10%)",
                mode.label(),
                (on / off - 1.0) * 100.0
            );
        }
    }
}

// ------------------------------------------------------------- tracing

async fn tracing_cost(tmp: &Path) {
    let secs: f64 = std::env::var("BENCH_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(5.0);
    // `BENCH_OTLP_DECODE=1`: the receiver decodes every export, as a
    // collector would, on the cores the gateway uses.
    let decode = std::env::var("BENCH_OTLP_DECODE").is_ok_and(|v| v == "1");
    let receiver = if decode {
        toolgate_tests::otlp::Receiver::start().await
    } else {
        toolgate_tests::otlp::Receiver::start_discarding().await
    };
    let up = upstream().await;
    let base = format!("http://{up}");
    let spec = serde_json::to_vec(&pets_spec(&base)).expect("spec");
    let upstream = compile("pets", "pets.json", &spec).expect("pets spec compiles");
    let file = tmp.join("pets-catalog-tracing.json");
    let cat = catalog::Catalog::new(vec![upstream]);
    std::fs::write(&file, serde_json::to_vec(&cat).expect("catalog json")).expect("write");
    let off = start_gateway(&file, None).await;
    let endpoint = receiver.endpoint();
    let on = start_gateway_with_env(
        free_port(),
        &file,
        None,
        &[("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str())],
    )
    .await;

    // A broken setup must not be reported as fast: the traced gateway
    // must export the spans of a call.
    let c = connect(&on.url, Mode::Stateless).await;
    let mut p = CallToolRequestParams::new("pets__get_pet");
    p.arguments = json!({"id": 7}).as_object().cloned();
    let r = c.call_tool(p).await.expect("tools/call");
    assert_ne!(r.is_error, Some(true), "{r:?}");
    let _ = c.cancel().await;
    if decode {
        receiver
            .wait_for("the benchmark's first tools/call", |s| {
                s.name == "tools/call pets__get_pet"
            })
            .await;
    }

    println!(
        "\n## tools/call with OTLP tracing on vs off ({secs} s per row, upstream 0 ms, every span exported)\n"
    );
    println!(
        "| path               | clients | tracing | calls  | errors | calls/s  | p50 ms | p99 ms |"
    );
    println!(
        "|--------------------|---------|---------|--------|--------|----------|--------|--------|"
    );
    let mut sums = RateSums::default();
    let mut traced_calls = 0;
    let spans_before = receiver.span_count();
    let exports_before = receiver.exports();
    for _round in 0..2 {
        for mode in [Mode::Raw, Mode::Session] {
            for clients in [1usize, 32] {
                for traced in [false, true] {
                    let gw = if traced { &on.url } else { &off.url };
                    let s = measure(mode, 0, clients, &base, gw, secs).await;
                    println!(
                        "| {:<18} | {:>7} | {:<7} | {:>6} | {:>6} | {:>8.0} | {:>6.3} | {:>6.3} |",
                        mode.label(),
                        clients,
                        if traced { "OTLP" } else { "off" },
                        s.calls,
                        s.errors,
                        s.rate,
                        ms(s.p50),
                        ms(s.p99),
                    );
                    if traced {
                        traced_calls += s.calls;
                    }
                    // The spans are counted, not kept.
                    receiver.clear();
                    let e = sums.entry((mode.label(), clients, traced)).or_default();
                    e.0 += s.rate;
                    e.1 += 1;
                }
            }
        }
    }
    // Warm-up calls and the last batch (still in the exporter's queue)
    // blur this: it shows whether spans were dropped, not their number.
    println!(
        "\nreceiver: {}; {} exports for {traced_calls} measured traced calls",
        if decode {
            "decoding"
        } else {
            "discarding (BENCH_OTLP_DECODE=1 decodes)"
        },
        receiver.exports() - exports_before,
    );
    if decode {
        println!(
            "spans received: {} (about {:.1} per call)",
            receiver.span_count() - spans_before,
            (receiver.span_count() - spans_before) as f64 / traced_calls.max(1) as f64
        );
    }
    println!();
    print_change(&sums, "tracing");
}

// -------------------------------------------------------------- memory

fn status_kib(pid: u32, field: &str) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    s.lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

async fn memory(tmp: &Path) {
    let paths = toolgate_corpus::documents();
    let mut upstreams = Vec::new();
    let mut config = String::from("upstreams:\n");
    let mut skipped = Vec::new();
    for (i, path) in paths.iter().enumerate() {
        let prefix = format!("c{i}");
        let Ok(bytes) = std::fs::read(path) else {
            continue;
        };
        match compile(&prefix, &path.display().to_string(), &bytes) {
            Ok(u) => {
                config.push_str(&format!(
                    "  {prefix}:\n    baseUrl: http://127.0.0.1:9/api\n"
                ));
                upstreams.push(u);
            }
            Err(e) => skipped.push(format!("{}: {e}", path.display())),
        }
    }
    let cat = catalog::Catalog::new(upstreams);
    let tools = cat.tool_count();
    let docs = cat.upstreams.len();
    let file = tmp.join("corpus-catalog.json");
    let bytes = serde_json::to_vec(&cat).expect("catalog json");
    std::fs::write(&file, &bytes).expect("write catalog");
    drop(cat);
    let cfg = tmp.join("corpus-gateway.yaml");
    std::fs::write(&cfg, config).expect("write config");

    let started = Instant::now();
    let gw = start_gateway(&file, Some(&cfg)).await;
    let ready_after = started.elapsed();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let pid = gw.child.id();
    let rss_ready = status_kib(pid, "VmRSS:");
    let hwm_ready = status_kib(pid, "VmHWM:");

    // A full listing: every tool's MCP view is built (and not kept).
    let c = connect(&gw.url, Mode::Session).await;
    let listed = c.list_all_tools().await.map(|t| t.len()).unwrap_or(0);
    let _ = c.cancel().await;
    let rss_listing = status_kib(pid, "VmRSS:");
    // The gateway hands a listing's garbage back to the OS half a second
    // after the listing (it is freed only once the response is sent).
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let rss_listed = status_kib(pid, "VmRSS:");

    println!(
        "\n## gateway memory: {tools} tools from {docs} corpus documents (catalog file {:.1} MiB)\n",
        bytes.len() as f64 / (1024.0 * 1024.0)
    );
    println!("ready after {:.2} s", ready_after.as_secs_f64());
    println!(
        "VmRSS when ready: {:.1} MiB  (goal <= 60 MiB; peak VmHWM during load {:.1} MiB)",
        mib(rss_ready),
        mib(hwm_ready)
    );
    println!(
        "VmRSS after a full tools/list ({listed} tools): {:.1} MiB at once, {:.1} MiB 1.5 s later",
        mib(rss_listing),
        mib(rss_listed)
    );
    if !skipped.is_empty() {
        println!("not compiled: {skipped:#?}");
    }
}

// ---------------------------------------------------------------- access

/// The largest `n` in `1..=max` for which `shape(n)` is admitted as a
/// `when` (within 4 KiB).
fn largest_admitted(shape: &dyn Fn(usize) -> String, max: usize) -> usize {
    let admitted = |n: usize| {
        let when = shape(n);
        when.len() <= 4096
            && catalog::access::AccessPolicy {
                rules: vec![catalog::access::AccessRule {
                    when: Some(when),
                    ..Default::default()
                }],
            }
            .compile(&catalog::access::PolicySite::McpUpstream)
            .is_ok()
    };
    let (mut lo, mut hi) = (1, max);
    while lo < hi {
        let mid = (lo + hi).div_ceil(2);
        if admitted(mid) {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    lo
}

async fn access_attacks(tmp: &Path) {
    const UPSTREAMS: usize = 200;
    const LISTERS: usize = 4;
    let idp = toolgate_tests::idp::Idp::start().await;
    let up = upstream().await;
    let spec = serde_json::to_vec(&pets_spec(&format!("http://{up}"))).expect("spec");
    let upstreams = (0..UPSTREAMS)
        .map(|i| compile(&format!("p{i}"), "pets.json", &spec).expect("pets spec compiles"))
        .collect();
    let file = tmp.join("access-catalog.json");
    let cat = catalog::Catalog::new(upstreams);
    std::fs::write(&file, serde_json::to_vec(&cat).expect("catalog json")).expect("write");

    println!("\n## Costly access rules, release binary\n");
    // 1. The rules of the report: refused at load, naming the field.
    let zeros = vec!["0"; 900].join(",");
    let bomb = format!(
        "[{zeros}].map(x, [{zeros}]).map(y, y+y+y+y+y+y+y+y).map(y, y+y+y+y+y+y+y+y).size() > 0"
    );
    let zeros = vec!["0"; 500].join(",");
    let cpu = format!("[{zeros}].map(x, [{zeros}]).map(y, y+y).size() > 0");
    for (name, when) in [("3.7 KiB memory bomb", bomb), ("2 KiB CPU variant", cpu)] {
        let config = tmp.join("bomb.yaml");
        let text = json!({"upstreams": {"p0": {"access": {"rules": [{"when": when}]}}}});
        std::fs::write(&config, serde_json::to_vec(&text).expect("config")).expect("write");
        let started = Instant::now();
        let out = Command::new(TOOLGATE)
            .args(["serve", "--listen", "127.0.0.1:0", "--catalog"])
            .arg(&file)
            .arg("--config")
            .arg(&config)
            .env("TOOLGATE_METRICS_ADDR", "off")
            .output()
            .expect("run toolgate serve");
        let stderr = String::from_utf8_lossy(&out.stderr);
        let line = stderr
            .lines()
            .find(|l| l.contains("access.rules[0].when"))
            .unwrap_or("(no line names the field)");
        println!(
            "- {name}: `serve` exits {} after {:.0} ms: {}",
            out.status,
            started.elapsed().as_secs_f64() * 1e3,
            line.chars().take(160).collect::<String>()
        );
        assert!(!out.status.success(), "serve must refuse the rule");
    }

    // 2. The costliest admitted policy on every upstream.
    let shape = |n: usize| {
        let body = vec!["g.contains(\"7\")"; n].join(" || ");
        format!("claims.groups.filter(g, {body}).size() > 0")
    };
    let n = largest_admitted(&shape, 200);
    let when = shape(n);
    let port = free_port();
    let upstream_cfg: serde_json::Map<String, Value> = (0..UPSTREAMS)
        .map(|i| {
            (
                format!("p{i}"),
                json!({"access": {"rules": [{"when": when}]}}),
            )
        })
        .collect();
    let config = tmp.join("gateway-access.yaml");
    let text = json!({
        "inbound": {
            "resource": format!("http://127.0.0.1:{port}/mcp"),
            "jwt": [{"issuer": idp.issuer(), "audiences": ["toolgate"]}],
        },
        "upstreams": upstream_cfg,
    });
    std::fs::write(&config, serde_json::to_vec(&text).expect("config")).expect("write");
    let gw = start_gateway_on(port, &file, Some(&config)).await;
    // ~11 KiB of groups, none containing a 7 but the last, which grants.
    let token = |who: usize, groups: usize| {
        let mut g: Vec<String> = (0..groups).map(|i| format!("{:0>40}", i % 7)).collect();
        g.push("team-7".into());
        let g: Vec<&str> = g.iter().map(String::as_str).collect();
        idp.token()
            .aud("toolgate")
            .subject(&format!("caller-{who}"))
            .groups(&g)
            .mint()
    };
    let big: Vec<String> = (0..LISTERS).map(|i| token(i, 260)).collect();
    let small = token(99, 2);

    // `/healthz`, asked every 5 ms while the listings run.
    let probing = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let prober = {
        let (url, probing) = (gw.url.clone(), probing.clone());
        tokio::spawn(async move {
            let http = reqwest::Client::new();
            let (mut slowest, mut probes) = (Duration::ZERO, 0u32);
            while probing.load(std::sync::atomic::Ordering::Relaxed) {
                let started = Instant::now();
                let ok = http
                    .get(format!("{url}/healthz"))
                    .send()
                    .await
                    .is_ok_and(|r| r.status().is_success());
                assert!(ok, "/healthz must answer");
                slowest = slowest.max(started.elapsed());
                probes += 1;
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            (slowest, probes)
        })
    };
    let list = |token: String| {
        let url = gw.url.clone();
        async move {
            let c = connect_as(&url, Mode::Session, Some(&token)).await;
            let mut times = Vec::new();
            let mut count = 0;
            for _ in 0..2 {
                let started = Instant::now();
                count = c.list_all_tools().await.expect("tools/list").len();
                times.push(started.elapsed());
            }
            let _ = c.cancel().await;
            (times, count)
        }
    };
    let started = Instant::now();
    let results = futures::future::join_all(big.into_iter().map(list)).await;
    let wall = started.elapsed();
    let (small_times, small_count) = list(small).await;
    probing.store(false, std::sync::atomic::Ordering::Relaxed);
    let (slowest, probes) = prober.await.expect("prober");
    println!(
        "- {UPSTREAMS} upstreams, each with `{}…` (n = {n}, {} B), {LISTERS} callers with ~11 KiB of claims listing at once:",
        &when[..40],
        when.len()
    );
    for (i, (times, count)) in results.iter().enumerate() {
        assert_eq!(*count, UPSTREAMS * 2, "every tool is granted");
        println!(
            "  - caller {i}: first listing {:.0} ms, remembered {:.1} ms ({count} tools)",
            ms(times[0]),
            ms(times[1])
        );
    }
    assert_eq!(small_count, UPSTREAMS * 2);
    println!(
        "  - all four: {:.0} ms wall; a caller with small claims: {:.1} ms, then {:.1} ms",
        ms(wall),
        ms(small_times[0]),
        ms(small_times[1])
    );
    println!(
        "  - `/healthz` meanwhile: {probes} probes, slowest {:.1} ms",
        ms(slowest)
    );
}
