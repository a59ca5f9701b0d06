//! JSON log lines: tracing-subscriber's shape (`timestamp`, `level`,
//! `target`, `fields`) plus the fields of every span the event is in
//! (under `span`, the innermost's value winning, with the innermost span's
//! exported name as `name`) and the trace context
//! (`trace_id`, `span_id`) when the event belongs to a sampled or
//! propagated trace. Every value is bounded ([`crate::bound`]).

use std::fmt::{self, Write as _};

use opentelemetry::trace::TraceContextExt;
use serde_json::{Map, Value};
use tracing::field::{Field, Visit};
use tracing::{Event, Subscriber};
use tracing_subscriber::fmt::format::{JsonFields, Writer};
use tracing_subscriber::fmt::time::{FormatTime, SystemTime};
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormattedFields};
use tracing_subscriber::registry::LookupSpan;

use crate::bound::{capped, MAX_FIELD_BYTES};

pub(crate) struct JsonLines;

impl<S> FormatEvent<S, JsonFields> for JsonLines
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, JsonFields>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let meta = event.metadata();
        let mut line = Map::new();
        let mut timestamp = String::new();
        SystemTime.format_time(&mut Writer::new(&mut timestamp))?;
        line.insert("timestamp".into(), timestamp.into());
        line.insert("level".into(), meta.level().as_str().into());
        line.insert("target".into(), meta.target().into());
        let mut fields = Map::new();
        event.record(&mut Fields(&mut fields));
        line.insert("fields".into(), fields.into());
        if let Some(scope) = ctx.event_scope() {
            let mut span = Map::new();
            let mut name = Value::Null;
            for s in scope.from_root() {
                name = s.name().into();
                let ext = s.extensions();
                let Some(f) = ext.get::<FormattedFields<JsonFields>>() else {
                    continue;
                };
                if let Ok(Value::Object(m)) = serde_json::from_str::<Value>(&f.fields) {
                    for (k, v) in m {
                        let v = match v {
                            Value::String(s) if s.len() > MAX_FIELD_BYTES => {
                                capped(|w| w.write_str(&s)).into()
                            }
                            v => v,
                        };
                        // `otel.*` fields steer the exporter; they are
                        // not attributes, but `otel.name` is the name the
                        // span is exported under.
                        if k == "otel.name" {
                            name = v;
                        } else if !k.starts_with("otel.") {
                            span.insert(k, v);
                        }
                    }
                }
            }
            span.insert("name".into(), name);
            line.insert("span".into(), span.into());
        }
        // The innermost span's OpenTelemetry context (none when traces
        // are off). NB: no span's extensions may be held here: the lookup
        // locks them.
        let id = event
            .parent()
            .cloned()
            .or_else(|| ctx.lookup_current().map(|s| s.id()));
        let cx = id.and_then(|id| {
            tracing::dispatcher::get_default(|d| tracing_opentelemetry::get_otel_context(&id, d))
        });
        if let Some(cx) = cx {
            let span = cx.span();
            let sc = span.span_context();
            if sc.is_valid() {
                line.insert("trace_id".into(), sc.trace_id().to_string().into());
                line.insert("span_id".into(), sc.span_id().to_string().into());
            }
        }
        writeln!(writer, "{}", Value::Object(line))
    }
}

/// An event's fields as JSON values.
struct Fields<'a>(&'a mut Map<String, Value>);

impl Visit for Fields<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0
            .insert(field.name().into(), capped(|w| w.write_str(value)).into());
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.0.insert(field.name().into(), value.into());
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.0.insert(field.name().into(), value.into());
    }
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.0.insert(field.name().into(), value.into());
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.0.insert(field.name().into(), value.into());
    }
    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.0
            .insert(field.name().into(), capped(|w| write!(w, "{value}")).into());
    }
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.0.insert(
            field.name().into(),
            capped(|w| write!(w, "{value:?}")).into(),
        );
    }
}
