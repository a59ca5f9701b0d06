//! `/metrics` as Prometheus scrapes it: over HTTP from the metrics
//! listener, parsed with a Prometheus text parser (prometheus-parse).
//! In-process gateways for the calls (each has metrics of its own), the
//! real binary for `--metrics-addr` and reloads of a catalog file.

use std::sync::Arc;

use gateway::observe::metrics::{Metrics, ToolLabelSettings, ToolLabels};
use gateway::serving::snapshot::Overrides;
use gateway::{CatalogStore, EdgeOptions};
use prometheus_parse::{Sample, Scrape, Value};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::reload::{serve, tempdir, with_extra};
use crate::support::*;
use crate::upstream::TestUpstream;

/// Serves `metrics` on a loopback listener of its own; its `/metrics` URL.
async fn metrics_url(metrics: Arc<Metrics>) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/metrics", listener.local_addr().unwrap());
    tokio::spawn(gateway::observe::metrics::serve(
        listener,
        metrics,
        CancellationToken::new(),
    ));
    url
}

/// One scrape, as text and parsed.
pub(crate) struct Scraped {
    text: String,
    samples: Vec<Sample>,
}

pub(crate) async fn scrape(url: &str) -> Scraped {
    gateway::net::install_crypto_provider();
    let resp = reqwest::get(url).await.expect("scrape answered");
    assert_eq!(resp.status(), 200);
    let ct = resp.headers()["content-type"].to_str().unwrap().to_string();
    assert!(ct.starts_with("text/plain; version=0.0.4"), "{ct}");
    let text = resp.text().await.unwrap();
    let parsed =
        Scrape::parse(text.lines().map(|l| Ok(l.to_string()))).expect("Prometheus text parses");
    Scraped {
        text,
        samples: parsed.samples,
    }
}

impl Scraped {
    fn matching<'a>(
        &'a self,
        metric: &'a str,
        labels: &'a [(&'a str, &'a str)],
    ) -> impl Iterator<Item = &'a Sample> + 'a {
        self.samples.iter().filter(move |s| {
            s.metric == metric && labels.iter().all(|(k, v)| s.labels.get(k) == Some(*v))
        })
    }

    /// Sum of the counters or gauges `metric` with `labels` (0: none).
    pub(crate) fn value(&self, metric: &str, labels: &[(&str, &str)]) -> f64 {
        self.matching(metric, labels)
            .map(|s| match &s.value {
                Value::Counter(v) | Value::Gauge(v) | Value::Untyped(v) => *v,
                other => panic!("{metric} is not a counter or gauge: {other:?}"),
            })
            .sum()
    }

    /// Observations of the histogram `metric` with `labels` (0: none).
    fn count(&self, metric: &str, labels: &[(&str, &str)]) -> f64 {
        self.matching(metric, labels)
            .map(|s| match &s.value {
                Value::Histogram(buckets) => buckets
                    .iter()
                    .find(|b| b.less_than.is_infinite())
                    .map_or(0.0, |b| b.count),
                other => panic!("{metric} is not a histogram: {other:?}"),
            })
            .sum()
    }

    /// The label `name` of every series of `metric`.
    pub(crate) fn label_values(&self, metric: &str, name: &str) -> Vec<String> {
        self.matching(metric, &[])
            .filter_map(|s| s.labels.get(name).map(str::to_string))
            .collect()
    }
}

/// Scrapes until `ok` holds (the gateway records after it answers).
pub(crate) async fn scrape_until(url: &str, what: &str, ok: impl Fn(&Scraped) -> bool) -> Scraped {
    tokio::time::timeout(WAIT, async {
        loop {
            let s = scrape(url).await;
            if ok(&s) {
                return s;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("timed out waiting for {what}"))
}

const OPS: &str = "mcp_server_operation_duration_seconds";
const UPSTREAM: &str = "toolgate_upstream_request_duration_seconds";
const VALIDATION: &str = "toolgate_validation_failures_total";

fn call_labels<'a>(tool: &'a str, error: &'a str) -> [(&'a str, &'a str); 3] {
    [
        ("mcp_method_name", "tools/call"),
        ("gen_ai_tool_name", tool),
        ("error_type", error),
    ]
}

async fn setup(pets_extra: &str) -> (TestUpstream, Gateway, String) {
    let up = TestUpstream::start().await;
    let gw = start_gateway(&default_catalog(), config_for(&up.url, pets_extra)).await;
    let url = metrics_url(gw.store.metrics().clone()).await;
    (up, gw, url)
}

#[tokio::test]
async fn calls_move_the_operation_upstream_and_validation_series() {
    let (up, gw, url) = setup("").await;
    let client = connect(&format!("{}/mcp", gw.url)).await;
    let s = scrape_until(&url, "the session", |s| {
        s.value("mcp_server_sessions_active", &[]) == 1.0
    })
    .await;
    assert_eq!(
        s.count(
            OPS,
            &[("mcp_method_name", "initialize"), ("error_type", "")]
        ),
        1.0
    );
    client.list_all_tools().await.unwrap();

    // A success, then arguments the schema refuses (never sent).
    assert!(!is_error(
        &call(&client, "pets__list_pets", json!({"limit": 5})).await
    ));
    assert!(is_error(
        &call(&client, "pets__list_pets", json!({"limit": 0})).await
    ));
    // An error status, a status nobody declared, a response that breaks
    // its schema (warn: returned), a tool nobody serves.
    assert!(is_error(
        &call(&client, "pets__get_pet", json!({"id": "500"})).await
    ));
    assert!(is_error(&call(&client, "pets__teapot", json!({})).await));
    assert!(!is_error(
        &call(&client, "pets__get_pet", json!({"id": "bad"})).await
    ));
    assert!(try_call(&client, "pets__no_such_tool_xyz", json!({}))
        .await
        .is_err());
    assert_eq!(up.count(), 4);

    let s = scrape_until(&url, "six tools/call", |s| {
        s.count(OPS, &[("mcp_method_name", "tools/call")]) == 6.0
    })
    .await;
    assert_eq!(
        s.count(
            OPS,
            &[("mcp_method_name", "tools/list"), ("error_type", "")]
        ),
        1.0
    );
    assert_eq!(s.count(OPS, &call_labels("pets__list_pets", "")), 1.0);
    assert_eq!(
        s.count(OPS, &call_labels("pets__list_pets", "invalid_arguments")),
        1.0
    );
    assert_eq!(
        s.count(OPS, &call_labels("pets__get_pet", "upstream_status")),
        1.0
    );
    assert_eq!(
        s.count(OPS, &call_labels("pets__teapot", "upstream_status")),
        1.0
    );
    assert_eq!(s.count(OPS, &call_labels("pets__get_pet", "")), 1.0);
    // A name a client made up is never a label value.
    assert_eq!(s.count(OPS, &call_labels("", "unknown_tool")), 1.0);
    assert!(!s.text.contains("no_such_tool"), "{}", s.text);

    let get = |class| {
        [
            ("upstream", "pets"),
            ("http_request_method", "GET"),
            ("status_class", class),
        ]
    };
    assert_eq!(s.count(UPSTREAM, &get("2xx")), 2.0);
    assert_eq!(s.count(UPSTREAM, &get("5xx")), 1.0);
    assert_eq!(s.count(UPSTREAM, &get("4xx")), 1.0);
    assert_eq!(s.count(UPSTREAM, &[]), 4.0, "{}", s.text);
    assert_eq!(
        s.value(
            VALIDATION,
            &[("direction", "request"), ("upstream", "pets")]
        ),
        1.0
    );
    assert_eq!(
        s.value(
            VALIDATION,
            &[("direction", "response"), ("upstream", "pets")]
        ),
        1.0
    );
    assert_eq!(s.value("toolgate_rate_limited_total", &[]), 0.0);

    // The session ends with its client.
    client.cancel().await.unwrap();
    scrape_until(&url, "the session to close", |s| {
        s.value("mcp_server_sessions_active", &[]) == 0.0
    })
    .await;
}

#[tokio::test]
async fn a_schema_violation_in_fail_mode_is_a_response_validation_error() {
    let (_up, gw, url) = setup("    responseValidation: fail").await;
    let client = connect(&format!("{}/mcp", gw.url)).await;
    assert!(is_error(
        &call(&client, "pets__get_pet", json!({"id": "bad"})).await
    ));
    let s = scrape_until(&url, "the call", |s| {
        s.count(OPS, &[("mcp_method_name", "tools/call")]) == 1.0
    })
    .await;
    assert_eq!(
        s.count(OPS, &call_labels("pets__get_pet", "response_validation")),
        1.0
    );
    assert_eq!(
        s.value(
            VALIDATION,
            &[("direction", "response"), ("upstream", "pets")]
        ),
        1.0
    );
    assert_eq!(s.value(VALIDATION, &[("direction", "request")]), 0.0);
}

#[tokio::test]
async fn rate_limited_calls_are_counted_and_never_sent() {
    let (up, gw, url) = setup("    rateLimit: {requestsPerSecond: 0.001, burst: 1}").await;
    let client = connect(&format!("{}/mcp", gw.url)).await;
    assert!(!is_error(
        &call(&client, "pets__get_pet", json!({"id": "7"})).await
    ));
    let limited = call(&client, "pets__get_pet", json!({"id": "7"})).await;
    assert!(is_error(&limited), "{}", text(&limited));
    assert_eq!(up.count(), 1);
    let s = scrape_until(&url, "two calls", |s| {
        s.count(OPS, &[("mcp_method_name", "tools/call")]) == 2.0
    })
    .await;
    assert_eq!(
        s.value("toolgate_rate_limited_total", &[("upstream", "pets")]),
        1.0
    );
    assert_eq!(
        s.count(OPS, &call_labels("pets__get_pet", "rate_limited")),
        1.0
    );
    assert_eq!(s.count(UPSTREAM, &[]), 1.0);
}

/// A gateway over the default catalog whose metrics label tools as
/// `labels` says; its MCP URL and metrics URL.
async fn labelled(labels: ToolLabelSettings) -> (TestUpstream, Gateway, String) {
    gateway::net::install_crypto_provider();
    let up = TestUpstream::start().await;
    let metrics = Arc::new(Metrics::new(labels));
    let store = CatalogStore::with_metrics(
        config_for(&up.url, ""),
        Overrides::default(),
        metrics.clone(),
    );
    store.install(&default_catalog()).unwrap();
    let gw = serve_store(store, EdgeOptions::default()).await;
    (up, gw, metrics_url(metrics).await)
}

#[tokio::test]
async fn tool_labels_go_empty_above_the_limit_or_when_off() {
    let tools = default_catalog().tool_count();
    let cases = [
        (ToolLabels::Auto, tools, "pets__get_pet"),
        (ToolLabels::Auto, tools - 1, ""),
        (ToolLabels::Off, tools, ""),
        (ToolLabels::On, 1, "pets__get_pet"),
    ];
    for (mode, limit, expected) in cases {
        let (_up, gw, url) = labelled(ToolLabelSettings { mode, limit }).await;
        let client = connect(&format!("{}/mcp", gw.url)).await;
        call(&client, "pets__get_pet", json!({"id": "7"})).await;
        let s = scrape_until(&url, "the call", |s| {
            s.count(OPS, &[("mcp_method_name", "tools/call")]) == 1.0
        })
        .await;
        assert_eq!(
            s.label_values(OPS, "gen_ai_tool_name")
                .into_iter()
                .filter(|t| !t.is_empty())
                .collect::<Vec<_>>(),
            if expected.is_empty() {
                vec![]
            } else {
                vec![expected.to_string()]
            },
            "{mode:?} limit {limit} ({tools} tools)"
        );
        assert_eq!(s.count(OPS, &call_labels(expected, "")), 1.0);
    }
}

#[tokio::test]
async fn auth_denials_are_counted_by_reason() {
    let idp = toolgate_tests::idp::Idp::start().await;
    let gw = start_gateway_trusting(
        &idp,
        &default_catalog(),
        config_for("http://127.0.0.1:9", ""),
        "allow",
    )
    .await;
    let url = metrics_url(gw.store.metrics().clone()).await;
    let http = reqwest::Client::new();
    let post = |auth: Option<String>| {
        let mut req = http
            .post(format!("{}/mcp", gw.url))
            .header("accept", "application/json, text/event-stream")
            .header("content-type", "application/json")
            .body(r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#);
        if let Some(a) = auth {
            req = req.header("authorization", a);
        }
        req.send()
    };
    let expired = idp.token().aud("toolgate").expired().mint();
    for auth in [
        None,
        Some(format!("Bearer {expired}")),
        Some("Bearer not-a-token".to_string()),
        Some("Bearer also-not-a-token".to_string()),
    ] {
        assert_eq!(post(auth).await.unwrap().status(), 401);
    }
    let s = scrape(&url).await;
    let denials = |reason| s.value("toolgate_auth_denials_total", &[("reason", reason)]);
    assert_eq!(denials("missing"), 1.0);
    assert_eq!(denials("expired"), 1.0);
    assert_eq!(denials("invalid"), 2.0);
    assert_eq!(denials("unavailable"), 0.0);
}

/// The metrics listener's URL, from the binary's log.
pub(crate) async fn served_metrics_url(served: &crate::reload::Served) -> String {
    let line = served.wait_log(0, &["metrics served on http://"]).await;
    let at = line.find("http://").unwrap();
    line[at..]
        .split_whitespace()
        .next()
        .unwrap()
        .trim_end_matches(|c: char| !c.is_ascii_alphanumeric())
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_counts_reloads_and_shows_only_the_current_hash() {
    gateway::net::install_crypto_provider();
    let dir = tempdir("metrics-reload");
    let (path, config) = write_slow_catalog_files(&dir, "http://127.0.0.1:9");
    let first = default_catalog();
    std::fs::write(&path, serde_json::to_vec(&first).unwrap()).unwrap();
    let served = serve(&[
        "--catalog",
        path.to_str().unwrap(),
        "--config",
        config.to_str().unwrap(),
        "--metrics-addr",
        "127.0.0.1:0",
    ]);
    let url = served_metrics_url(&served).await;
    assert!(url.ends_with("/metrics"), "{url}");

    // Not on the MCP port, which agents reach.
    let mcp_port = reqwest::get(format!("{}/metrics", served.url))
        .await
        .unwrap();
    assert_eq!(mcp_port.status(), 404);
    assert!(!mcp_port.text().await.unwrap().contains("toolgate_"));

    let s = scrape(&url).await;
    let reloads =
        |s: &Scraped, result| s.value("toolgate_catalog_reloads_total", &[("result", result)]);
    assert_eq!(reloads(&s, "success"), 1.0);
    assert_eq!(reloads(&s, "failure"), 0.0);
    assert_eq!(
        s.value("toolgate_catalog_tools", &[]),
        first.tool_count() as f64
    );
    assert_eq!(
        s.label_values("toolgate_catalog_info", "hash"),
        vec![first.hash.clone()]
    );

    // A new catalog: counted, and only its hash is shown.
    let second = with_extra(1, "pets");
    assert_ne!(second.hash, first.hash);
    std::fs::write(&path, serde_json::to_vec(&second).unwrap()).unwrap();
    let s = scrape_until(&url, "the reload", |s| reloads(s, "success") == 2.0).await;
    assert_eq!(
        s.label_values("toolgate_catalog_info", "hash"),
        vec![second.hash.clone()]
    );
    assert_eq!(
        s.value("toolgate_catalog_info", &[("hash", &second.hash)]),
        1.0
    );
    assert_eq!(
        s.value("toolgate_catalog_tools", &[]),
        second.tool_count() as f64
    );

    // A file that does not parse: a failure; the catalog stays.
    std::fs::write(&path, b"{ not a catalog").unwrap();
    let s = scrape_until(&url, "the failed reload", |s| reloads(s, "failure") == 1.0).await;
    assert_eq!(reloads(&s, "success"), 2.0);
    assert_eq!(
        s.label_values("toolgate_catalog_info", "hash"),
        vec![second.hash.clone()]
    );
    served.terminate().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_addr_off_serves_no_metrics() {
    let dir = tempdir("metrics-off");
    let (path, config) = write_slow_catalog_files(&dir, "http://127.0.0.1:9");
    let served = serve(&[
        "--catalog",
        path.to_str().unwrap(),
        "--config",
        config.to_str().unwrap(),
        "--metrics-addr",
        "off",
    ]);
    let client = connect(&format!("{}/mcp", served.url)).await;
    client.list_all_tools().await.unwrap();
    assert!(served
        .logs
        .lock()
        .unwrap()
        .iter()
        .all(|l| !l.contains("metrics served")));
    client.cancel().await.unwrap();
    served.terminate().await;
}

const DOC: &str = "openapi: 3.0.3
info: {title: alpha, version: '1'}
paths:
  /things:
    get:
      operationId: listThings
      responses: {'200': {description: ok}}
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn config_reloads_count_once_each_and_a_broken_document_is_a_failure() {
    let dir = tempdir("metrics-local");
    let (config, doc) = (dir.join("toolgate.yaml"), dir.join("alpha.yaml"));
    std::fs::write(
        &config,
        "upstreams:\n  alpha:\n    openapi: {file: alpha.yaml}\n    baseUrl: http://127.0.0.1:9\n",
    )
    .unwrap();
    std::fs::write(&doc, DOC).unwrap();
    let store = CatalogStore::new(Default::default(), Overrides::default());
    let url = metrics_url(store.metrics().clone()).await;
    let mut sources = gateway::serving::local::Sources::new(config, false);
    sources.start_counted(&store).await.unwrap();
    let reloads =
        |s: &Scraped, result| s.value("toolgate_catalog_reloads_total", &[("result", result)]);
    let s = scrape(&url).await;
    assert_eq!((reloads(&s, "success"), reloads(&s, "failure")), (1.0, 0.0));
    assert_eq!(s.value("toolgate_catalog_tools", &[]), 1.0);
    let first = s.label_values("toolgate_catalog_info", "hash");

    // The document breaks: alpha keeps its last good version; a failure.
    std::fs::write(&doc, "openapi: [").unwrap();
    sources.reload(&store).await;
    let s = scrape(&url).await;
    assert_eq!((reloads(&s, "success"), reloads(&s, "failure")), (1.0, 1.0));
    assert_eq!(s.label_values("toolgate_catalog_info", "hash"), first);

    // Fixed, with one more operation: one success, the new hash alone.
    let more = format!(
        "{DOC}  /things/{{id}}:\n    get:\n      operationId: getThing\n      parameters: [{{name: id, in: path, required: true, schema: {{type: string}}}}]\n      responses: {{'200': {{description: ok}}}}\n"
    );
    std::fs::write(&doc, more).unwrap();
    sources.reload(&store).await;
    let s = scrape(&url).await;
    assert_eq!((reloads(&s, "success"), reloads(&s, "failure")), (2.0, 1.0));
    assert_eq!(s.value("toolgate_catalog_tools", &[]), 2.0);
    let second = s.label_values("toolgate_catalog_info", "hash");
    assert_eq!(second.len(), 1);
    assert_ne!(second, first);
}
