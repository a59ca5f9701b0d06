//! The gateway's Prometheus metrics, served as text on `GET /metrics` of
//! a listener of their own (`toolgate serve --metrics-addr`), never on the
//! MCP port: the ingress exposes that one to agents, and the metrics name
//! every upstream and tool.
//!
//! One [`Metrics`] per gateway (held by its [`crate::CatalogStore`] and
//! [`crate::mcp::shared::Shared`]), not a process global, so several gateways in
//! one process (tests) count apart.
//!
//! **Cardinality.** Every label value comes from a closed set: enums here,
//! upstream prefixes and tool names of the served catalog. Tool names are
//! recorded only while the catalog has at most
//! [`ToolLabelSettings::limit`] tools (`--metrics-tool-labels auto`), so a
//! 10,000-tool catalog cannot make 10,000 × methods × errors series; a
//! name a client sends that is not in the catalog is never a label.
//!
//! Names follow the OpenTelemetry semantic conventions where they exist
//! (`mcp.server.operation.duration`, `mcp.server.session.*`,
//! `http.request.method`, `error.type`, `gen_ai.tool.name`) and
//! `toolgate_*` otherwise.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use tokio_util::sync::CancellationToken;

use crate::outcome::CallReport;
use crate::outcome::ErrorType;

pub(crate) use super::labels::DenialReason;
use super::labels::{
    CatalogInfoLabels, DenialLabels, Direction, OperationLabels, ReloadLabels, SessionReason,
    SessionReasonLabels, StatusClass, UpstreamLabels, UpstreamRequestLabels, ValidationLabels,
};
pub use super::labels::{McpMethod, ReloadResult};

/// `serve --metrics-addr` default.
pub const DEFAULT_METRICS_ADDR: &str = "0.0.0.0:9090";
/// `--metrics-tool-label-limit` default: catalogs up to this many tools
/// get per-tool series under `auto`.
pub(crate) const DEFAULT_TOOL_LABEL_LIMIT: usize = 1000;

/// Upper bounds (seconds) of the duration histograms: MCP operations and
/// upstream calls, from a cached millisecond to the 30 s default timeout.
const DURATION_BUCKETS: [f64; 14] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
];

/// Whether `mcp_server_operation_duration_seconds` has per-tool series.
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    clap::ValueEnum,
    serde::Serialize,
    serde::Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum ToolLabels {
    /// Per tool while the served catalog has at most the limit of tools.
    #[default]
    Auto,
    /// Always per tool (only for catalogs known to stay small).
    On,
    /// Never: `gen_ai_tool_name` is empty.
    Off,
}

/// How tool names become labels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ToolLabelSettings {
    pub mode: ToolLabels,
    /// Most tools a catalog may have for `auto` to label by tool.
    pub limit: usize,
}

impl Default for ToolLabelSettings {
    fn default() -> Self {
        ToolLabelSettings {
            mode: ToolLabels::Auto,
            limit: DEFAULT_TOOL_LABEL_LIMIT,
        }
    }
}

impl ToolLabelSettings {
    /// Whether tools of a catalog of `tools` tools get their own series.
    pub(crate) fn per_tool(&self, tools: usize) -> bool {
        match self.mode {
            ToolLabels::On => true,
            ToolLabels::Off => false,
            ToolLabels::Auto => tools <= self.limit,
        }
    }
}
type Histograms<L> = Family<L, Histogram, fn() -> Histogram>;

fn duration_histogram() -> Histogram {
    Histogram::new(DURATION_BUCKETS)
}

/// The metrics of one gateway.
pub struct Metrics {
    registry: Registry,
    tool_labels: ToolLabelSettings,
    operations: Histograms<OperationLabels>,
    sessions: Gauge,
    upstream_requests: Histograms<UpstreamRequestLabels>,
    validation_failures: Family<ValidationLabels, Counter>,
    reloads: Family<ReloadLabels, Counter>,
    catalog_tools: Gauge,
    catalog_info: Family<CatalogInfoLabels, Gauge>,
    /// The hash `catalog_info` shows; replaced under this lock so only
    /// one hash is ever 1.
    catalog_hash: Mutex<Option<String>>,
    auth_denials: Family<DenialLabels, Counter>,
    rate_limited: Family<UpstreamLabels, Counter>,
    sessions_refused: Family<SessionReasonLabels, Counter>,
    sessions_evicted: Family<SessionReasonLabels, Counter>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics")
            .field("tool_labels", &self.tool_labels)
            .finish_non_exhaustive()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new(ToolLabelSettings::default())
    }
}

impl Metrics {
    pub fn new(tool_labels: ToolLabelSettings) -> Metrics {
        let mut registry = Registry::default();
        let operations: Histograms<OperationLabels> =
            Family::new_with_constructor(duration_histogram);
        registry.register(
            "mcp_server_operation_duration_seconds",
            "Duration of MCP requests, by JSON-RPC method, tool (catalogs within the tool label limit) and error type (empty: success)",
            operations.clone(),
        );
        let sessions = Gauge::default();
        registry.register(
            "mcp_server_sessions_active",
            "MCP sessions (protocol versions with initialize) open on this replica",
            sessions.clone(),
        );
        let upstream_requests: Histograms<UpstreamRequestLabels> =
            Family::new_with_constructor(duration_histogram);
        registry.register(
            "toolgate_upstream_request_duration_seconds",
            "Duration of upstream calls, including the wait for a maxConcurrency slot and reading the whole body; status_class error: no usable response",
            upstream_requests.clone(),
        );
        let validation_failures = Family::<ValidationLabels, Counter>::default();
        registry.register(
            "toolgate_validation_failures",
            "Tool arguments (request) or upstream responses (response, warn and fail modes) that did not match their schema",
            validation_failures.clone(),
        );
        let reloads = Family::<ReloadLabels, Counter>::default();
        registry.register(
            "toolgate_catalog_reloads",
            "Catalog loads (the first included), by result",
            reloads.clone(),
        );
        let catalog_tools = Gauge::default();
        registry.register(
            "toolgate_catalog_tools",
            "Tools in the served catalog",
            catalog_tools.clone(),
        );
        let catalog_info = Family::<CatalogInfoLabels, Gauge>::default();
        registry.register(
            "toolgate_catalog_info",
            "1 for the hash of the served catalog",
            catalog_info.clone(),
        );
        let auth_denials = Family::<DenialLabels, Counter>::default();
        registry.register(
            "toolgate_auth_denials",
            "MCP requests refused by inbound authentication, by reason",
            auth_denials.clone(),
        );
        let rate_limited = Family::<UpstreamLabels, Counter>::default();
        registry.register(
            "toolgate_rate_limited",
            "Tool calls refused by an upstream's per-caller rateLimit",
            rate_limited.clone(),
        );
        let sessions_refused = Family::<SessionReasonLabels, Counter>::default();
        registry.register(
            "toolgate_sessions_refused",
            "New or restored MCP sessions refused (503), by reason: the replica holds --max-sessions, or the caller holds --max-sessions-per-caller with a request running on each",
            sessions_refused.clone(),
        );
        let sessions_evicted = Family::<SessionReasonLabels, Counter>::default();
        registry.register(
            "toolgate_sessions_evicted",
            "MCP sessions closed to make room for another session of the same caller (its least recently used idle one), by reason",
            sessions_evicted.clone(),
        );
        for reason in [SessionReason::ReplicaFull, SessionReason::CallerQuota] {
            let _ = sessions_refused.get_or_create(&SessionReasonLabels { reason });
        }
        let _ = sessions_evicted.get_or_create(&SessionReasonLabels {
            reason: SessionReason::CallerQuota,
        });
        // Counters of a closed label set start at 0, so `rate()` and
        // alerts see them before the first event.
        for result in [ReloadResult::Success, ReloadResult::Failure] {
            let _ = reloads.get_or_create(&ReloadLabels { result });
        }
        for reason in [
            DenialReason::Missing,
            DenialReason::Invalid,
            DenialReason::Expired,
            DenialReason::Unavailable,
            DenialReason::Throttled,
        ] {
            let _ = auth_denials.get_or_create(&DenialLabels { reason });
        }
        Metrics {
            registry,
            tool_labels,
            operations,
            sessions,
            upstream_requests,
            validation_failures,
            reloads,
            catalog_tools,
            catalog_info,
            catalog_hash: Mutex::new(None),
            auth_denials,
            rate_limited,
            sessions_refused,
            sessions_evicted,
        }
    }

    /// How tool names become labels.
    pub fn tool_labels(&self) -> ToolLabelSettings {
        self.tool_labels
    }

    /// One MCP request. `tool` is a name of the served catalog or a
    /// search-mode meta-tool, never one a client made up.
    pub fn operation(
        &self,
        method: McpMethod,
        tool: Option<&str>,
        error: Option<ErrorType>,
        elapsed: Duration,
    ) {
        let served = usize::try_from(self.catalog_tools.get()).unwrap_or(0);
        let tool = match tool {
            Some(t) if self.tool_labels.per_tool(served) => t.to_string(),
            _ => String::new(),
        };
        self.operations
            .get_or_create(&OperationLabels {
                mcp_method_name: method,
                gen_ai_tool_name: tool,
                error_type: error,
            })
            .observe(elapsed.as_secs_f64());
    }

    /// A session opened (`true`) or closed.
    pub fn session(&self, opened: bool) {
        if opened {
            self.sessions.inc();
        } else {
            self.sessions.dec();
        }
    }

    /// One upstream call; `status` is `None` when no usable response came.
    pub(crate) fn upstream_request(
        &self,
        upstream: &str,
        method: &http::Method,
        status: Option<u16>,
        elapsed: Duration,
    ) {
        self.upstream_requests
            .get_or_create(&UpstreamRequestLabels {
                upstream: upstream.to_string(),
                http_request_method: method.into(),
                status_class: StatusClass::of(status),
            })
            .observe(elapsed.as_secs_f64());
    }

    /// What one tool call of `upstream` did.
    pub fn call(&self, upstream: &str, report: &CallReport) {
        if let Some(u) = &report.upstream {
            self.upstream_request(upstream, &u.method, u.status, u.elapsed);
        }
        if report.invalid_arguments {
            self.validation_failure(Direction::Request, upstream);
        }
        if report.invalid_response {
            self.validation_failure(Direction::Response, upstream);
        }
        if report.error == Some(ErrorType::RateLimited) {
            self.rate_limited(upstream);
        }
    }

    /// Arguments or a response that did not match their schema.
    pub(crate) fn validation_failure(&self, direction: Direction, upstream: &str) {
        self.validation_failures
            .get_or_create(&ValidationLabels {
                direction,
                upstream: upstream.to_string(),
            })
            .inc();
    }

    /// A session refused: the caller at its quota (`caller_quota`), else
    /// the replica full.
    pub(crate) fn session_refused(&self, caller_quota: bool) {
        let reason = if caller_quota {
            SessionReason::CallerQuota
        } else {
            SessionReason::ReplicaFull
        };
        self.sessions_refused
            .get_or_create(&SessionReasonLabels { reason })
            .inc();
    }

    /// A session closed for another of its caller's (`caller_quota`).
    pub(crate) fn session_evicted(&self) {
        self.sessions_evicted
            .get_or_create(&SessionReasonLabels {
                reason: SessionReason::CallerQuota,
            })
            .inc();
    }

    /// A call refused by `upstream`'s rate limit.
    pub fn rate_limited(&self, upstream: &str) {
        self.rate_limited
            .get_or_create(&UpstreamLabels {
                upstream: upstream.to_string(),
            })
            .inc();
    }

    /// A request refused by inbound authentication.
    pub(crate) fn auth_denial(&self, reason: DenialReason) {
        self.auth_denials
            .get_or_create(&DenialLabels { reason })
            .inc();
    }

    /// A catalog load attempt.
    pub fn reload(&self, result: ReloadResult) {
        self.reloads.get_or_create(&ReloadLabels { result }).inc();
    }

    /// The served catalog changed: `tools` tools, hash `hash`. Only the
    /// new hash's `toolgate_catalog_info` series remains.
    pub(crate) fn catalog_served(&self, tools: usize, hash: &str) {
        let mut current = self.catalog_hash.lock().unwrap_or_else(|p| p.into_inner());
        self.catalog_tools
            .set(i64::try_from(tools).unwrap_or(i64::MAX));
        if current.as_deref() == Some(hash) {
            return;
        }
        if let Some(old) = current.take() {
            self.catalog_info.remove(&CatalogInfoLabels { hash: old });
        }
        self.catalog_info
            .get_or_create(&CatalogInfoLabels {
                hash: hash.to_string(),
            })
            .set(1);
        *current = Some(hash.to_string());
    }

    /// Every metric, in `format`.
    pub fn encode(&self, format: Format) -> Result<String, std::fmt::Error> {
        let mut out = String::new();
        match format {
            Format::Prometheus => {
                prometheus_client::encoding::prometheus_text::encode(&mut out, &self.registry)?
            }
            Format::OpenMetrics => {
                prometheus_client::encoding::text::encode(&mut out, &self.registry)?
            }
        }
        Ok(out)
    }
}

/// A text exposition format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Prometheus text 0.0.4: what every scraper and parser reads.
    Prometheus,
    /// OpenMetrics 1.0 text, for scrapers that ask for it (Prometheus
    /// does by default).
    OpenMetrics,
}

impl Format {
    /// OpenMetrics when the `Accept` header names it, else Prometheus text.
    pub(crate) fn negotiate(headers: &HeaderMap) -> Format {
        let openmetrics = headers
            .get_all(header::ACCEPT)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .any(|v| v.trim().starts_with("application/openmetrics-text"));
        if openmetrics {
            Format::OpenMetrics
        } else {
            Format::Prometheus
        }
    }

    pub(crate) fn content_type(self) -> &'static str {
        match self {
            Format::Prometheus => prometheus_client::encoding::prometheus_text::CONTENT_TYPE,
            Format::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
        }
    }
}

/// `GET /metrics`, and nothing else.
pub fn router(metrics: Arc<Metrics>) -> Router {
    Router::new().route(
        "/metrics",
        get(move |headers: HeaderMap| {
            let metrics = metrics.clone();
            async move { scrape(&metrics, &headers) }
        }),
    )
}

fn scrape(metrics: &Metrics, headers: &HeaderMap) -> Response {
    let format = Format::negotiate(headers);
    match metrics.encode(format) {
        Ok(text) => (
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static(format.content_type()),
            )],
            text,
        )
            .into_response(),
        Err(_) => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
    }
}

/// Where the metrics listener binds: `--metrics-addr`; `off` or empty
/// disables it.
pub fn parse_addr(text: &str) -> Result<Option<SocketAddr>, String> {
    let t = text.trim();
    if t.is_empty() || t.eq_ignore_ascii_case("off") {
        return Ok(None);
    }
    t.parse()
        .map(Some)
        .map_err(|_| format!("{t:?} is not an address (IP:PORT) or `off`"))
}

/// Serves [`router`] on `listener` until `shutdown`.
pub async fn serve(
    listener: tokio::net::TcpListener,
    metrics: Arc<Metrics>,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    axum::serve(listener, router(metrics))
        .with_graceful_shutdown(async move { shutdown.cancelled().await })
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `docs/reference/metrics-gateway.md`: every family, and every value
    /// of every closed label, from a gateway that has seen each.
    #[test]
    fn the_metrics_reference_page_is_current() {
        use super::super::labels::HttpMethod;
        use toolgate_tests::reference::{check_or_bless, metrics_page, LabelDoc};
        const REGENERATE: &str =
            "TOOLGATE_BLESS=1 cargo test -p gateway --lib the_metrics_reference_page_is_current";

        let m = Metrics::new(ToolLabelSettings {
            mode: ToolLabels::On,
            limit: DEFAULT_TOOL_LABEL_LIMIT,
        });
        m.catalog_served(1, "sha256:…");
        m.session(true);
        m.reload(ReloadResult::Success);
        for method in McpMethod::ALL {
            let errors = ErrorType::ALL.iter().copied().map(Some).chain([None]);
            for error in errors {
                m.operation(*method, Some("pets__get_pet"), error, Duration::ZERO);
            }
        }
        for method in HttpMethod::ALL {
            for status_class in StatusClass::ALL {
                m.upstream_requests
                    .get_or_create(&UpstreamRequestLabels {
                        upstream: "pets".into(),
                        http_request_method: *method,
                        status_class: *status_class,
                    })
                    .observe(0.0);
            }
        }
        for direction in Direction::ALL {
            m.validation_failure(*direction, "pets");
        }
        m.rate_limited("pets");
        m.session_refused(true);
        m.session_evicted();
        let scrape = m.encode(Format::Prometheus).unwrap();
        let labels = [
            LabelDoc {
                name: "mcp_method_name",
                means: "The JSON-RPC method of the MCP request.",
                closed: true,
            },
            LabelDoc {
                name: "gen_ai_tool_name",
                means: "The tool of a `tools/call`: empty for other methods, and for every \
                        call while tool labels are off (`--metrics-tool-labels`, \
                        `--metrics-tool-label-limit`).",
                closed: false,
            },
            LabelDoc {
                name: "error_type",
                means: "Why the request or the call failed; empty for a success.",
                closed: true,
            },
            LabelDoc {
                name: "upstream",
                means: "The upstream's tool prefix.",
                closed: false,
            },
            LabelDoc {
                name: "http_request_method",
                means: "The method of the request to the upstream (`_OTHER` for one not \
                        listed).",
                closed: true,
            },
            LabelDoc {
                name: "status_class",
                means: "What the upstream answered; `error`: no usable response \
                        (unreachable, timed out, too large).",
                closed: true,
            },
            LabelDoc {
                name: "direction",
                means: "`request`: the tool's arguments; `response`: the upstream's \
                        response.",
                closed: true,
            },
            LabelDoc {
                name: "result",
                means: "Whether the catalog loaded.",
                closed: true,
            },
            LabelDoc {
                name: "hash",
                means: "The served catalog's hash, as `/status` and the replica's \
                        McpGatewayReplica show it.",
                closed: false,
            },
            LabelDoc {
                name: "reason",
                means: "Why a request was refused (`toolgate_auth_denials`), or a session \
                        refused or closed (`toolgate_sessions_*`).",
                closed: true,
            },
        ];
        let page = metrics_page(
            "Gateway metrics",
            "Served by `toolgate serve` on `GET /metrics` of its metrics listener \
             (`--metrics-addr`, default `0.0.0.0:9090`; never the MCP port) as Prometheus \
             text, or OpenMetrics when the scraper asks for it. Counters of a closed label \
             set are there at 0 from the start. How to scrape them and what to alert on: \
             [Metrics](../guide/metrics.md).",
            &scrape,
            &labels,
            REGENERATE,
        );
        check_or_bless("metrics-gateway.md", &page, REGENERATE);
    }

    #[test]
    fn auto_labels_tools_up_to_the_limit() {
        let s = ToolLabelSettings {
            mode: ToolLabels::Auto,
            limit: 2,
        };
        assert!(s.per_tool(2));
        assert!(!s.per_tool(3));
        let off = ToolLabelSettings {
            mode: ToolLabels::Off,
            ..s
        };
        assert!(!off.per_tool(0));
        let on = ToolLabelSettings {
            mode: ToolLabels::On,
            ..s
        };
        assert!(on.per_tool(10_000));
    }

    #[test]
    fn addr_off_or_empty_disables() {
        assert_eq!(parse_addr("off"), Ok(None));
        assert_eq!(parse_addr(""), Ok(None));
        assert_eq!(
            parse_addr("127.0.0.1:9090"),
            Ok(Some("127.0.0.1:9090".parse().unwrap()))
        );
        assert!(parse_addr("nowhere").is_err());
    }

    #[test]
    fn only_the_current_catalog_hash_is_shown() {
        let m = Metrics::default();
        m.catalog_served(3, "aaa");
        m.catalog_served(4, "bbb");
        let text = m.encode(Format::Prometheus).unwrap();
        assert!(
            text.contains("toolgate_catalog_info{hash=\"bbb\"} 1"),
            "{text}"
        );
        assert!(!text.contains("aaa"), "{text}");
        assert!(text.contains("toolgate_catalog_tools 4"), "{text}");
    }
}
