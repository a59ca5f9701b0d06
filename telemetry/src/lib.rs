//! Logs, traces and metrics, set up the same way by both binaries.
//!
//! [`init`] installs the one `tracing` subscriber of a process:
//!
//! - an [`EnvFilter`] from `RUST_LOG` (default: the binary's own);
//! - logs on stderr, as text or as JSON lines ([`LogFormat`]); JSON lines
//!   carry the fields of the spans they are logged in and, when the line
//!   belongs to a trace, its `trace_id` and `span_id`; every field value
//!   is bounded ([`bound`]);
//! - an OpenTelemetry layer exporting spans over OTLP/HTTP (protobuf),
//!   **only** when `OTEL_EXPORTER_OTLP_ENDPOINT` or
//!   `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` is set and `OTEL_SDK_DISABLED` is
//!   not `true`. Without it no OpenTelemetry code runs per span.
//!
//! Everything else about the exporter comes from the standard `OTEL_*`
//! variables, read by the OpenTelemetry SDK itself: headers, timeout,
//! compression, the sampler (`OTEL_TRACES_SAMPLER`, `_ARG`), the batch
//! processor (`OTEL_BSP_*`), the resource (`OTEL_RESOURCE_ATTRIBUTES`,
//! `OTEL_SERVICE_NAME`). The only gap filled here is the service name's
//! default, which is the binary's rather than `unknown_service`.
//!
//! [`propagation`] carries W3C trace context in and out of requests.

pub mod bound;
mod json;
pub mod propagation;

use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::Context as _;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::resource::{EnvResourceDetector, ResourceDetector};
use opentelemetry_sdk::trace::SdkTracerProvider;
use opentelemetry_sdk::Resource;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

/// How log lines are written on stderr.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    #[default]
    Text,
    /// One JSON object per line, with the span fields and trace ids.
    Json,
}

/// What differs between the binaries.
#[derive(Debug, Clone, Copy)]
pub struct Settings {
    /// `service.name` unless `OTEL_SERVICE_NAME` or
    /// `OTEL_RESOURCE_ATTRIBUTES` names one.
    pub service_name: &'static str,
    pub log_format: LogFormat,
    /// Filter directives when `RUST_LOG` is unset or invalid.
    pub default_filter: &'static str,
}

/// Kept at WARN whatever `RUST_LOG` says: rmcp's spans of a Streamable
/// HTTP session (INFO, and TRACE for its worker) carry the session id,
/// which in open mode is all it takes to use the session, and would
/// stamp it on every line logged inside them.
const NO_SESSION_IDS: [&str; 2] = [
    "rmcp::transport::streamable_http_server::session::local=warn",
    "rmcp::transport::worker=warn",
];

/// Whether spans are exported (set once, by [`init`]).
static EXPORTING: AtomicBool = AtomicBool::new(false);

/// Whether [`init`] installed the OpenTelemetry layer. When not, the
/// [`propagation`] helpers do nothing.
pub fn exporting() -> bool {
    EXPORTING.load(Ordering::Relaxed)
}

/// Names `span` `name` in its export and in the JSON logs, also after it
/// started: tracing-opentelemetry reads `otel.name` only while a span is
/// still a builder (before it is first entered or asked for its
/// context), so a span renamed later is renamed on the OpenTelemetry span
/// itself. `span` must declare the `otel.name` field.
pub fn rename(span: &tracing::Span, name: String) {
    if span.is_disabled() {
        return;
    }
    span.record("otel.name", name.as_str());
    if exporting() {
        use opentelemetry::trace::TraceContextExt as _;
        use tracing_opentelemetry::OpenTelemetrySpanExt as _;
        span.context().span().update_name(name);
    }
}

/// Held until the process exits: dropping it exports the spans still
/// queued and shuts the exporter down.
#[must_use = "dropping the guard shuts the span exporter down"]
pub struct Guard {
    provider: Option<SdkTracerProvider>,
}

impl Drop for Guard {
    fn drop(&mut self) {
        if let Some(provider) = self.provider.take() {
            if let Err(e) = provider.force_flush() {
                eprintln!("telemetry: cannot export the last spans: {e}");
            }
            if let Err(e) = provider.shutdown() {
                eprintln!("telemetry: span exporter shutdown: {e}");
            }
        }
    }
}

/// Installs the process's subscriber (see the crate docs). Fails when
/// the OTLP exporter is asked for but cannot be built (a malformed
/// endpoint), or when a subscriber is already installed.
pub fn init(settings: Settings) -> anyhow::Result<Guard> {
    let mut filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new(settings.default_filter));
    for directive in NO_SESSION_IDS {
        if let Ok(d) = directive.parse() {
            filter = filter.add_directive(d);
        }
    }
    let fmt = match settings.log_format {
        LogFormat::Text => tracing_subscriber::fmt::layer()
            .with_writer(std::io::stderr)
            .fmt_fields(bound::BoundedFields)
            .boxed(),
        LogFormat::Json => tracing_subscriber::fmt::layer()
            .with_writer(std::io::stderr)
            .fmt_fields(tracing_subscriber::fmt::format::JsonFields::new())
            .event_format(json::JsonLines)
            .boxed(),
    };
    let provider = if exporter_configured() {
        Some(provider(settings.service_name)?)
    } else {
        None
    };
    let otel = provider.as_ref().map(|p| {
        // Each of these costs work on every span, or on every poll of an
        // instrumented future, and says nothing a trace reader needs:
        // thread ids (tasks move between Tokio's workers), source
        // locations and targets (the span names say where), busy/idle
        // times, and making each entered span the current OpenTelemetry
        // context (parents come from the `tracing` span tree; JSON logs
        // look the ids up themselves).
        tracing_opentelemetry::layer()
            .with_tracer(p.tracer("toolgate"))
            .with_threads(false)
            .with_location(false)
            .with_target(false)
            .with_tracked_inactivity(false)
            .with_context_activation(false)
    });
    tracing_subscriber::registry()
        .with(filter)
        .with(fmt)
        .with(otel)
        .try_init()
        .context("installing the tracing subscriber")?;
    if let Some(p) = &provider {
        opentelemetry::global::set_tracer_provider(p.clone());
        EXPORTING.store(true, Ordering::Relaxed);
    }
    Ok(Guard { provider })
}

/// Whether the environment asks for span export.
fn exporter_configured() -> bool {
    let set = |name: &str| std::env::var_os(name).is_some_and(|v| !v.is_empty());
    let disabled =
        std::env::var("OTEL_SDK_DISABLED").is_ok_and(|v| v.trim().eq_ignore_ascii_case("true"));
    !disabled && (set("OTEL_EXPORTER_OTLP_ENDPOINT") || set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))
}

fn provider(default_service_name: &'static str) -> anyhow::Result<SdkTracerProvider> {
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .build()
        .context("building the OTLP span exporter from the OTEL_EXPORTER_OTLP_* variables")?;
    Ok(SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(resource(default_service_name))
        .build())
}

/// The SDK's resource (from `OTEL_SERVICE_NAME` and
/// `OTEL_RESOURCE_ATTRIBUTES`), with the binary's name when neither names
/// the service.
fn resource(default_service_name: &'static str) -> Resource {
    let named = std::env::var("OTEL_SERVICE_NAME").is_ok_and(|s| !s.is_empty())
        || EnvResourceDetector::new()
            .detect()
            .get(&opentelemetry::Key::from_static_str("service.name"))
            .is_some();
    let builder = Resource::builder();
    if named {
        builder.build()
    } else {
        builder.with_service_name(default_service_name).build()
    }
}
