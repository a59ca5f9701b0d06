//! An OTLP/HTTP trace receiver on loopback: what an OpenTelemetry
//! collector would get from the gateway or the operator. Accepts
//! `POST /v1/traces` with `application/x-protobuf` bodies, decodes them
//! with the protocol's own types and keeps every span, which tests wait
//! for ([`Receiver::wait_for`]).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use axum::Router;
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;
use opentelemetry_proto::tonic::common::v1::KeyValue;
use prost::Message;
use tokio::sync::watch;

pub use opentelemetry_proto::tonic::trace::v1::span::SpanKind;

/// How long [`Receiver::wait_for`] waits: generous, as batch exporters
/// send on their own schedule and CI machines are loaded. Only a failing
/// test waits this long.
pub const DEADLINE: Duration = Duration::from_secs(60);

/// An attribute value as exported.
#[derive(Debug, Clone, PartialEq)]
pub enum Attr {
    Str(String),
    Int(i64),
    Double(f64),
    Bool(bool),
    /// Arrays, maps and bytes, which no test here reads.
    Other,
}

/// One exported span, ids in lowercase hex as in `traceparent`.
#[derive(Debug, Clone)]
pub struct ReceivedSpan {
    /// `service.name` of the exporting resource.
    pub service: String,
    pub name: String,
    pub kind: SpanKind,
    pub trace_id: String,
    pub span_id: String,
    /// Empty for a root span.
    pub parent_span_id: String,
    pub attributes: BTreeMap<String, Attr>,
}

impl ReceivedSpan {
    pub fn attr(&self, key: &str) -> Option<&Attr> {
        self.attributes.get(key)
    }

    /// A string attribute.
    pub fn str(&self, key: &str) -> Option<&str> {
        match self.attr(key) {
            Some(Attr::Str(s)) => Some(s),
            _ => None,
        }
    }

    /// An integer attribute.
    pub fn int(&self, key: &str) -> Option<i64> {
        match self.attr(key) {
            Some(Attr::Int(i)) => Some(*i),
            _ => None,
        }
    }

    /// Whether `parent` is this span's parent (same trace, parent id).
    pub fn is_child_of(&self, parent: &ReceivedSpan) -> bool {
        self.trace_id == parent.trace_id && self.parent_span_id == parent.span_id
    }
}

#[derive(Default)]
struct Store {
    /// Answers without decoding ([`Receiver::start_discarding`]).
    discard: bool,
    /// Export requests received.
    exports: std::sync::atomic::AtomicUsize,
    spans: Mutex<Vec<ReceivedSpan>>,
    /// Every span ever received, [`Receiver::clear`] or not.
    received: std::sync::atomic::AtomicUsize,
}

/// The running receiver; stops when dropped.
pub struct Receiver {
    addr: SocketAddr,
    store: Arc<Store>,
    /// Bumped on every export, so waiters re-check.
    changed: watch::Receiver<u64>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Receiver {
    /// Starts a receiver on a free loopback port.
    pub async fn start() -> Receiver {
        Self::start_with(Store::default()).await
    }

    /// A receiver that reads each export and answers it without decoding
    /// (it keeps no spans; [`Receiver::exports`] counts requests): for a
    /// benchmark of the exporting side on a machine the receiver shares.
    pub async fn start_discarding() -> Receiver {
        Self::start_with(Store {
            discard: true,
            ..Store::default()
        })
        .await
    }

    /// Export requests received so far.
    pub fn exports(&self) -> usize {
        self.store.exports.load(std::sync::atomic::Ordering::SeqCst)
    }

    async fn start_with(store: Store) -> Receiver {
        let store = Arc::new(store);
        let (tx, changed) = watch::channel(0u64);
        let app = Router::new()
            .route("/v1/traces", post(export))
            .with_state((store.clone(), Arc::new(tx)));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a loopback port");
        let addr = listener.local_addr().expect("its address");
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Receiver {
            addr,
            store,
            changed,
            task,
        }
    }

    /// `OTEL_EXPORTER_OTLP_ENDPOINT` for an exporter sending here.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Every span received so far.
    pub fn spans(&self) -> Vec<ReceivedSpan> {
        self.store
            .spans
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// How many spans were received so far, including those forgotten
    /// by [`Receiver::clear`].
    pub fn span_count(&self) -> usize {
        self.store
            .received
            .load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Forgets the spans received so far (a long benchmark would
    /// otherwise keep them all).
    pub fn clear(&self) {
        self.store
            .spans
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
    }

    /// Waits for a span matching `matches` (described by `what` if none
    /// comes before [`DEADLINE`], which fails the test) and returns it.
    pub async fn wait_for(
        &self,
        what: &str,
        matches: impl Fn(&ReceivedSpan) -> bool,
    ) -> ReceivedSpan {
        let mut changed = self.changed.clone();
        let found = tokio::time::timeout(DEADLINE, async {
            loop {
                changed.borrow_and_update();
                if let Some(s) = self.spans().into_iter().find(|s| matches(s)) {
                    return s;
                }
                if changed.changed().await.is_err() {
                    std::future::pending::<()>().await;
                }
            }
        })
        .await;
        match found {
            Ok(s) => s,
            Err(_) => panic!(
                "no exported span is {what} within {DEADLINE:?}; received: {:#?}",
                self.spans()
                    .iter()
                    .map(|s| (
                        &s.service,
                        &s.name,
                        &s.trace_id,
                        &s.span_id,
                        &s.parent_span_id
                    ))
                    .collect::<Vec<_>>()
            ),
        }
    }
}

type AppState = (Arc<Store>, Arc<watch::Sender<u64>>);

async fn export(
    State((store, tx)): State<AppState>,
    headers: HeaderMap,
    body: Bytes,
) -> (StatusCode, HeaderMap, Vec<u8>) {
    let mut out = HeaderMap::new();
    out.insert(
        axum::http::header::CONTENT_TYPE,
        axum::http::HeaderValue::from_static("application/x-protobuf"),
    );
    let protobuf = headers
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/x-protobuf"));
    if !protobuf {
        return (StatusCode::UNSUPPORTED_MEDIA_TYPE, out, Vec::new());
    }
    store
        .exports
        .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    if store.discard {
        tx.send_modify(|n| *n += 1);
        return (
            StatusCode::OK,
            out,
            ExportTraceServiceResponse::default().encode_to_vec(),
        );
    }
    let Ok(request) = ExportTraceServiceRequest::decode(body) else {
        return (StatusCode::BAD_REQUEST, out, Vec::new());
    };
    let mut received = Vec::new();
    for rs in request.resource_spans {
        let service = rs
            .resource
            .as_ref()
            .and_then(|r| attributes(&r.attributes).remove("service.name"))
            .and_then(|a| match a {
                Attr::Str(s) => Some(s),
                _ => None,
            })
            .unwrap_or_default();
        for ss in rs.scope_spans {
            for s in ss.spans {
                received.push(ReceivedSpan {
                    service: service.clone(),
                    kind: SpanKind::try_from(s.kind).unwrap_or(SpanKind::Unspecified),
                    name: s.name,
                    trace_id: hex::encode(&s.trace_id),
                    span_id: hex::encode(&s.span_id),
                    parent_span_id: hex::encode(&s.parent_span_id),
                    attributes: attributes(&s.attributes),
                });
            }
        }
    }
    store
        .received
        .fetch_add(received.len(), std::sync::atomic::Ordering::SeqCst);
    store
        .spans
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .extend(received);
    tx.send_modify(|n| *n += 1);
    (
        StatusCode::OK,
        out,
        ExportTraceServiceResponse::default().encode_to_vec(),
    )
}

fn attributes(kvs: &[KeyValue]) -> BTreeMap<String, Attr> {
    kvs.iter()
        .map(|kv| {
            let v = match kv.value.as_ref().and_then(|v| v.value.as_ref()) {
                Some(AnyValue::StringValue(s)) => Attr::Str(s.clone()),
                Some(AnyValue::IntValue(i)) => Attr::Int(*i),
                Some(AnyValue::DoubleValue(d)) => Attr::Double(*d),
                Some(AnyValue::BoolValue(b)) => Attr::Bool(*b),
                _ => Attr::Other,
            };
            (kv.key.clone(), v)
        })
        .collect()
}
