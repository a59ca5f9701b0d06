//! W3C Trace Context (`traceparent`, `tracestate`) in and out of
//! requests: from HTTP headers, from an MCP request's `params._meta` (the
//! MCP convention: the same keys in the `_meta` object), and into the
//! headers of an outgoing request.
//!
//! Each helper does nothing when spans are not exported
//! ([`crate::exporting`]), so a gateway without tracing pays nothing.

use http::{HeaderMap, HeaderName, HeaderValue};
use opentelemetry::propagation::{Extractor, Injector, TextMapPropagator};
use opentelemetry::trace::TraceContextExt;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use serde_json::{Map, Value};
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// A remote parent: the span context a caller sent.
#[derive(Debug, Clone)]
pub struct RemoteParent(opentelemetry::Context);

impl RemoteParent {
    /// The caller's trace id (32 lowercase hex digits).
    pub fn trace_id(&self) -> String {
        self.0.span().span_context().trace_id().to_string()
    }
}

/// The parent named by the `traceparent` (and `tracestate`) headers.
pub fn from_headers(headers: &HeaderMap) -> Option<RemoteParent> {
    if !crate::exporting() || !headers.contains_key("traceparent") {
        return None;
    }
    extract(&Headers(headers))
}

/// The parent named by `traceparent` (and `tracestate`) in an MCP
/// request's `_meta`.
pub fn from_meta(meta: &Map<String, Value>) -> Option<RemoteParent> {
    if !crate::exporting() || !meta.contains_key("traceparent") {
        return None;
    }
    extract(&Meta(meta))
}

fn extract(carrier: &dyn Extractor) -> Option<RemoteParent> {
    let cx = TraceContextPropagator::new().extract(carrier);
    cx.span()
        .span_context()
        .is_valid()
        .then_some(RemoteParent(cx))
}

/// Makes `parent` the parent of `span`. Only a span not yet entered can
/// take a parent; a later call changes nothing.
pub fn set_parent(span: &tracing::Span, parent: RemoteParent) {
    if let Err(e) = span.set_parent(parent.0) {
        tracing::debug!(error = %e, "cannot set a remote parent");
    }
}

/// Writes `span`'s context into `headers` (`traceparent`, and
/// `tracestate` when the trace has one), so the receiver continues the
/// trace under `span`.
pub fn inject(span: &tracing::Span, headers: &mut HeaderMap) {
    if !crate::exporting() || span.is_disabled() {
        return;
    }
    let cx = span.context();
    TraceContextPropagator::new().inject_context(&cx, &mut HeadersMut(headers));
}

struct Headers<'a>(&'a HeaderMap);

impl Extractor for Headers<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|v| v.to_str().ok())
    }
    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(HeaderName::as_str).collect()
    }
}

struct Meta<'a>(&'a Map<String, Value>);

impl Extractor for Meta<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(Value::as_str)
    }
    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(String::as_str).collect()
    }
}

struct HeadersMut<'a>(&'a mut HeaderMap);

impl Injector for HeadersMut<'_> {
    fn set(&mut self, key: &str, value: String) {
        if let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(key.as_bytes()),
            HeaderValue::from_str(&value),
        ) {
            self.0.insert(name, value);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn meta_and_headers_name_the_same_parent() {
        let cx = TraceContextPropagator::new().extract(&Meta(
            serde_json::json!({"traceparent": PARENT})
                .as_object()
                .expect("object"),
        ));
        assert_eq!(
            cx.span().span_context().trace_id().to_string(),
            "4bf92f3577b34da6a3ce929d0e0e4736"
        );
        let mut h = HeaderMap::new();
        h.insert("traceparent", HeaderValue::from_static(PARENT));
        let cx = TraceContextPropagator::new().extract(&Headers(&h));
        assert_eq!(
            cx.span().span_context().span_id().to_string(),
            "00f067aa0ba902b7"
        );
    }
}
