//! The operator's spans as a subscriber sees them: one `reconcile` span
//! per reconcile with the resource's identity and result, its stages as
//! child spans, and its log lines inside it. (Exporting them over OTLP is
//! the subscriber's business, set up in `main`.)
//!
//! Its own test binary: the spans are captured by a global subscriber,
//! which the operator's tasks on the runtime's worker threads all reach.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crds::McpUpstream;
use kube::api::{Api, Patch, PatchParams, PostParams};
use tokio_util::sync::CancellationToken;
use toolgate_tests::apiserver::ApiServer;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Subscriber};
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::Layer;

const NS: &str = "team-a";

const PETSTORE: &str = r##"
openapi: 3.0.3
info: {title: Pets, version: "1"}
paths:
  /pets:
    get:
      operationId: listPets
      responses: {"200": {description: ok}}
"##;

#[derive(Debug, Clone, Default)]
struct Captured {
    name: String,
    fields: BTreeMap<String, String>,
    /// Names of the enclosing spans, innermost first.
    ancestors: Vec<String>,
}

/// Spans (by id) and events, as recorded.
#[derive(Default)]
struct Log {
    spans: BTreeMap<u64, Captured>,
    events: Vec<Captured>,
}

#[derive(Clone, Default)]
struct Capture(Arc<Mutex<Log>>);

struct Fields<'a>(&'a mut BTreeMap<String, String>);

impl Visit for Fields<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().into(), value.into());
    }
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.insert(field.name().into(), format!("{value:?}"));
    }
}

fn ancestors<S>(scope: Option<tracing_subscriber::registry::SpanRef<'_, S>>) -> Vec<String>
where
    S: for<'a> LookupSpan<'a>,
{
    scope
        .map(|s| s.scope().map(|s| s.name().to_string()).collect())
        .unwrap_or_default()
}

impl<S> Layer<S> for Capture
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let mut c = Captured {
            name: attrs.metadata().name().to_string(),
            ancestors: ancestors(ctx.span(id).and_then(|s| s.parent())),
            ..Default::default()
        };
        attrs.record(&mut Fields(&mut c.fields));
        self.0
            .lock()
            .expect("capture")
            .spans
            .insert(id.into_u64(), c);
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, _ctx: Context<'_, S>) {
        if let Some(c) = self
            .0
            .lock()
            .expect("capture")
            .spans
            .get_mut(&id.into_u64())
        {
            values.record(&mut Fields(&mut c.fields));
        }
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        let mut c = Captured {
            name: event.metadata().name().to_string(),
            ancestors: ancestors(ctx.event_span(event)),
            ..Default::default()
        };
        event.record(&mut Fields(&mut c.fields));
        self.0.lock().expect("capture").events.push(c);
    }
}

fn message(e: &Captured) -> Option<&str> {
    e.fields.get("message").map(String::as_str)
}

/// `toolgate.result`, recorded when a reconcile span ends.
fn result(s: &Captured) -> Option<&str> {
    s.fields.get("toolgate.result").map(String::as_str)
}

/// Polls the captured spans and events until `find` finds something.
async fn wait_for<T>(capture: &Capture, what: &str, find: impl Fn(&Log) -> Option<T>) -> T {
    let started = Instant::now();
    loop {
        if let Some(found) = find(&capture.0.lock().expect("capture")) {
            return found;
        }
        assert!(started.elapsed() < Duration::from_secs(60), "no {what}");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reconcile_is_one_span_with_its_stages_and_logs_inside() {
    let capture = Capture::default();
    tracing::subscriber::set_global_default(
        tracing_subscriber::registry()
            // The operator's default filter: with `kube` at info, the
            // reconcile span would sit under kube-runtime's own.
            .with(tracing_subscriber::EnvFilter::new(
                "info,kube=warn,operator=debug",
            ))
            .with(capture.clone()),
    )
    .expect("the only subscriber of this binary");
    operator::install_crypto_provider();
    let server = ApiServer::builder().serve().await.expect("API server");
    server
        .prepare(&crds::crds(), &["toolgate-system", NS])
        .await
        .expect("CRDs and namespaces");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("health port");
    let options = operator::Options {
        leader_election: false,
        ..Default::default()
    };
    let stop = CancellationToken::new();
    let client = server.client().expect("client");
    let running = tokio::spawn(operator::run_on(
        client.clone(),
        options,
        listener,
        stop.clone(),
    ));

    let upstreams: Api<McpUpstream> = Api::namespaced(client, NS);
    let u: McpUpstream = serde_json::from_value(serde_json::json!({
        "apiVersion": "toolgate.dev/v1alpha1",
        "kind": "McpUpstream",
        "metadata": {"name": "pets", "namespace": NS},
        "spec": {"toolPrefix": "pets", "baseUrl": "http://pets:8080", "openapi": {"inline": PETSTORE}},
    }))
    .expect("valid McpUpstream");
    upstreams
        .create(&PostParams::default(), &u)
        .await
        .expect("create");
    // The reconcile that published, once its span has ended with a result.
    let reconcile = wait_for(&capture, "a reconcile span that published", |log| {
        let published = log.spans.values().any(|p| p.name == "publish")
            && log.events.iter().any(|e| message(e) == Some("published"));
        log.spans
            .values()
            .find(|s| published && s.name == "reconcile" && result(s) == Some("success"))
            .cloned()
    })
    .await;

    // The API server refusing the published index fails the next one.
    server.forbid(|r| {
        r.namespace == "toolgate-system"
            && r.resource == "configmaps"
            && r.name == crds::publish::INDEX_NAME
    });
    upstreams
        .patch(
            "pets",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"metadata": {"labels": {"touched": "yes"}}})),
        )
        .await
        .expect("label pets");
    let failed = wait_for(&capture, "a failed reconcile span", |log| {
        log.spans
            .values()
            .find(|s| s.name == "reconcile" && result(s) == Some("error"))
            .cloned()
    })
    .await;
    stop.cancel();
    let _ = running.await;

    let field = |k: &str| reconcile.fields.get(k).map(String::as_str);
    assert_eq!(field("otel.name"), Some("reconcile McpUpstream"));
    assert_eq!(field("toolgate.resource.kind"), Some("McpUpstream"));
    assert_eq!(field("k8s.namespace.name"), Some(NS));
    assert_eq!(field("toolgate.resource.name"), Some("pets"));
    assert_eq!(field("toolgate.result"), Some("success"));
    assert!(reconcile.ancestors.is_empty(), "a root span");
    assert_eq!(field("error.type"), None);
    assert_eq!(
        failed.fields.get("error.type").map(String::as_str),
        Some("kube")
    );
    assert_eq!(
        failed.fields.get("otel.status_code").map(String::as_str),
        Some("ERROR")
    );

    let log = capture.0.lock().expect("capture");
    for stage in ["fetch", "compile", "publish", "status"] {
        let s = log
            .spans
            .values()
            .find(|s| s.name == stage)
            .unwrap_or_else(|| panic!("no {stage} span"));
        assert_eq!(
            s.ancestors.last().map(String::as_str),
            Some("reconcile"),
            "{stage}: {s:?}"
        );
    }
    let fetch = log
        .spans
        .values()
        .find(|s| s.name == "fetch")
        .expect("fetch");
    assert_eq!(
        fetch
            .fields
            .get("toolgate.openapi.source")
            .map(String::as_str),
        Some("inline")
    );
    let published = log
        .events
        .iter()
        .find(|e| message(e) == Some("published"))
        .expect("a published log line");
    assert!(
        published.ancestors.contains(&"reconcile".to_string()),
        "{published:?}"
    );
}
