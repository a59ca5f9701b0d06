//! The operator's metrics, served at `/metrics` (see [`crate::http`]) in
//! the OpenMetrics text format by `prometheus-client`.
//!
//! Every label value is a closed enum ([`Kind`], [`Outcome`],
//! [`ErrorKind`], [`Reason`]), so the number of series is bounded by the
//! code, never by what users create.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use catalog::Reason;
use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue, LabelValueEncoder};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::{Registry, Unit};

use crate::error::{Error, ErrorKind};
use crate::sync::lock;

/// The content type of [`Metrics::encode`]'s output, which Prometheus asks
/// for first by default.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// What a controller reconciles: the `kind` label.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, EncodeLabelValue)]
pub enum Kind {
    McpUpstream,
    McpOverlay,
    McpToolset,
}

impl Kind {
    pub const ALL: [Kind; 3] = [Kind::McpUpstream, Kind::McpOverlay, Kind::McpToolset];

    pub const fn as_str(self) -> &'static str {
        match self {
            Kind::McpUpstream => "McpUpstream",
            Kind::McpOverlay => "McpOverlay",
            Kind::McpToolset => "McpToolset",
        }
    }
}

/// How a reconcile ended: the `result` label.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Outcome {
    Success,
    /// It returned an [`Error`] and is retried.
    Error,
}

impl Outcome {
    pub fn of<T>(r: &Result<T, Error>) -> Outcome {
        match r {
            Ok(_) => Outcome::Success,
            Err(_) => Outcome::Error,
        }
    }

    pub const fn as_str(self) -> &'static str {
        match self {
            Outcome::Success => "success",
            Outcome::Error => "error",
        }
    }
}

impl EncodeLabelValue for Outcome {
    fn encode(&self, encoder: &mut LabelValueEncoder) -> Result<(), std::fmt::Error> {
        EncodeLabelValue::encode(&self.as_str(), encoder)
    }
}

/// A Ready condition's reason as a label value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ReadyReason(pub Reason);

impl EncodeLabelValue for ReadyReason {
    fn encode(&self, encoder: &mut LabelValueEncoder) -> Result<(), std::fmt::Error> {
        EncodeLabelValue::encode(&self.0.as_str(), encoder)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct ReconcileLabels {
    kind: Kind,
    result: Outcome,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct KindLabels {
    kind: Kind,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct ErrorLabels {
    error: ErrorKind,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct ReasonLabels {
    reason: ReadyReason,
}

type Histograms<S> = Family<S, Histogram, fn() -> Histogram>;

/// 5 ms to about 80 s: a reconcile waiting on the API server, up to one
/// compiling and publishing a catalog of thousands of tools.
fn reconcile_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.005, 2.0, 15))
}

/// 10 ms to about 160 s: the compile of a small document, up to that of
/// the largest public ones on a busy node.
fn compile_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.01, 2.0, 15))
}

#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    reconciles: Family<ReconcileLabels, Counter>,
    reconcile_duration: Histograms<KindLabels>,
    reconcile_errors: Family<ErrorLabels, Counter>,
    compiles: Counter,
    compile_duration: Histogram,
    publishes: Counter,
    published_bytes: Counter,
    status_writes: Counter,
    upstreams: Family<ReasonLabels, Gauge>,
    prefix_conflicts: Gauge,
    leader: Gauge,
    document_cache_entries: Gauge,
    document_cache_bytes: Gauge,
    compile_memory_budget: Gauge,
    compile_memory_reserved: Gauge,
    compile_memory_peak: Gauge,
    compile_memory_waits: Counter,
    /// What the last reconcile of each upstream (`namespace/name`)
    /// concluded: the two gauges above are counted from it.
    held: Mutex<HashMap<String, Held>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Held {
    ready: Reason,
    prefix_conflict: bool,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        let m = Metrics {
            registry: Registry::default(),
            reconciles: Family::default(),
            reconcile_duration: Family::new_with_constructor(reconcile_histogram),
            reconcile_errors: Family::default(),
            compiles: Counter::default(),
            compile_duration: compile_histogram(),
            publishes: Counter::default(),
            published_bytes: Counter::default(),
            status_writes: Counter::default(),
            upstreams: Family::default(),
            prefix_conflicts: Gauge::default(),
            leader: Gauge::default(),
            document_cache_entries: Gauge::default(),
            document_cache_bytes: Gauge::default(),
            compile_memory_budget: Gauge::default(),
            compile_memory_reserved: Gauge::default(),
            compile_memory_peak: Gauge::default(),
            compile_memory_waits: Counter::default(),
            held: Mutex::default(),
        };
        // Series that exist from the start, at 0: `rate()` and alerts see
        // the first increment, and every name is in the first scrape.
        for kind in Kind::ALL {
            for result in [Outcome::Success, Outcome::Error] {
                let _ = m
                    .reconciles
                    .get_or_create(&ReconcileLabels { kind, result });
            }
            let _ = m.reconcile_duration.get_or_create(&KindLabels { kind });
        }
        for error in ErrorKind::ALL {
            let _ = m.reconcile_errors.get_or_create(&ErrorLabels { error });
        }
        let _ = m.upstreams.get_or_create(&ReasonLabels {
            reason: ReadyReason(Reason::Published),
        });
        m.register()
    }

    fn register(mut self) -> Self {
        let r = &mut self.registry;
        r.register(
            "toolgate_operator_reconciles",
            "Reconciles run, by kind and result (error: retried)",
            self.reconciles.clone(),
        );
        r.register_with_unit(
            "toolgate_operator_reconcile_duration",
            "Time one reconcile took, by kind",
            Unit::Seconds,
            self.reconcile_duration.clone(),
        );
        r.register(
            "toolgate_operator_reconcile_errors",
            "Reconciles that failed and were retried, by error",
            self.reconcile_errors.clone(),
        );
        r.register(
            "toolgate_operator_compiles",
            "Catalog compiles (cache misses)",
            self.compiles.clone(),
        );
        r.register_with_unit(
            "toolgate_operator_compile_duration",
            "Time one catalog compile took (cache misses)",
            Unit::Seconds,
            self.compile_duration.clone(),
        );
        r.register(
            "toolgate_operator_publishes",
            "Index writes for an upstream or a toolset",
            self.publishes.clone(),
        );
        r.register_with_unit(
            "toolgate_operator_published",
            "Bytes of catalog chunks written (gzip, as stored in ConfigMaps)",
            Unit::Bytes,
            self.published_bytes.clone(),
        );
        r.register(
            "toolgate_operator_status_writes",
            "Status patches",
            self.status_writes.clone(),
        );
        r.register(
            "toolgate_operator_upstreams",
            "McpUpstreams by the reason of their Ready condition (leader only; reasons no longer held are 0)",
            self.upstreams.clone(),
        );
        r.register(
            "toolgate_operator_prefix_conflicts",
            "McpUpstreams refused because an older one holds their toolPrefix (leader only)",
            self.prefix_conflicts.clone(),
        );
        r.register(
            "toolgate_operator_leader",
            "1 while this replica holds the lease",
            self.leader.clone(),
        );
        r.register(
            "toolgate_operator_document_cache_entries",
            "OpenAPI documents kept for conditional GETs (one per upstream reading a URL)",
            self.document_cache_entries.clone(),
        );
        r.register_with_unit(
            "toolgate_operator_document_cache",
            "Bytes of those documents",
            Unit::Bytes,
            self.document_cache_bytes.clone(),
        );
        r.register_with_unit(
            "toolgate_operator_compile_memory_budget",
            "Memory compiles are admitted against (--compile-memory-bytes)",
            Unit::Bytes,
            self.compile_memory_budget.clone(),
        );
        r.register_with_unit(
            "toolgate_operator_compile_memory_reserved",
            "Memory reserved by the compiles running now (their estimates)",
            Unit::Bytes,
            self.compile_memory_reserved.clone(),
        );
        r.register_with_unit(
            "toolgate_operator_compile_memory_peak",
            "Most memory reserved by compiles at once since the operator started",
            Unit::Bytes,
            self.compile_memory_peak.clone(),
        );
        r.register(
            "toolgate_operator_compile_memory_waits",
            "Compiles that waited for others to give memory back before they ran",
            self.compile_memory_waits.clone(),
        );
        self
    }

    /// The OpenMetrics text exposition ([`CONTENT_TYPE`]).
    pub fn encode(&self) -> Result<String, std::fmt::Error> {
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry)?;
        Ok(out)
    }

    /// Losing the lease also drops what this replica knew of upstreams:
    /// the new leader reports them, and a standby reports none.
    pub fn set_leader(&self, v: bool) {
        self.leader.set(i64::from(v));
        if !v {
            let mut held = lock(&self.held);
            held.clear();
            self.count_upstreams(&held);
        }
    }

    pub fn set_document_cache(&self, entries: usize, bytes: usize) {
        self.document_cache_entries.set(saturating_i64(entries));
        self.document_cache_bytes.set(saturating_i64(bytes));
    }

    pub fn reconciled(&self, kind: Kind, result: Outcome, took: Duration) {
        self.reconciles
            .get_or_create(&ReconcileLabels { kind, result })
            .inc();
        self.reconcile_duration
            .get_or_create(&KindLabels { kind })
            .observe(took.as_secs_f64());
    }

    pub fn reconcile_failed(&self, e: &Error) {
        self.reconcile_errors
            .get_or_create(&ErrorLabels {
                error: e.metric_label(),
            })
            .inc();
    }

    /// A compile that ran (not a cache hit).
    pub fn compiled(&self, took: Duration) {
        self.compiles.inc();
        self.compile_duration.observe(took.as_secs_f64());
    }

    /// The compile memory budget, reserved now and the most reserved at
    /// once, in bytes.
    pub fn set_compile_memory(&self, budget: u64, reserved: u64, peak: u64) {
        let g = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
        self.compile_memory_budget.set(g(budget));
        self.compile_memory_reserved.set(g(reserved));
        self.compile_memory_peak.set(g(peak));
    }

    /// A compile that had to wait for memory.
    pub fn compile_waited_for_memory(&self) {
        self.compile_memory_waits.inc();
    }

    /// An index write, with the bytes of the chunks it created.
    pub fn published(&self, chunk_bytes: usize) {
        self.publishes.inc();
        self.published_bytes.inc_by(chunk_bytes as u64);
    }

    pub fn status_written(&self) {
        self.status_writes.inc();
    }

    /// What an upstream's reconcile concluded: its Ready reason, and
    /// whether an older upstream holds its prefix.
    pub fn upstream_reported(&self, upstream: &str, ready: Reason, prefix_conflict: bool) {
        let mut held = lock(&self.held);
        let new = Held {
            ready,
            prefix_conflict,
        };
        if held.insert(upstream.to_string(), new) != Some(new) {
            self.count_upstreams(&held);
        }
    }

    /// The upstream is gone (deleted, or finalized by this replica).
    pub fn upstream_gone(&self, upstream: &str) {
        let mut held = lock(&self.held);
        if held.remove(upstream).is_some() {
            self.count_upstreams(&held);
        }
    }

    /// Sets every reason's gauge from `held`. A reason no longer held
    /// drops to 0 rather than disappearing, so a query sees it go to 0
    /// instead of going stale. Called with the lock held, so counts from
    /// two changes never interleave.
    fn count_upstreams(&self, held: &HashMap<String, Held>) {
        let mut by_reason: HashMap<Reason, i64> = HashMap::new();
        for h in held.values() {
            *by_reason.entry(h.ready).or_default() += 1;
        }
        for &reason in Reason::ALL {
            let labels = ReasonLabels {
                reason: ReadyReason(reason),
            };
            match by_reason.get(&reason) {
                Some(&n) => {
                    self.upstreams.get_or_create(&labels).set(n);
                }
                None => {
                    if let Some(g) = self.upstreams.get(&labels) {
                        g.set(0);
                    }
                }
            }
        }
        let conflicts = held.values().filter(|h| h.prefix_conflict).count();
        self.prefix_conflicts.set(saturating_i64(conflicts));
    }
}

fn saturating_i64(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use toolgate_tests::prometheus::parse;

    /// `docs/reference/metrics-operator.md`: every family, and every value
    /// of every label, from an operator that has seen each.
    #[test]
    fn the_metrics_reference_page_is_current() {
        use toolgate_tests::reference::{check_or_bless, metrics_page, LabelDoc};
        const REGENERATE: &str =
            "TOOLGATE_BLESS=1 cargo test -p toolgate-operator --lib the_metrics_reference_page_is_current";

        // New() starts every kind, result and error at 0.
        let m = Metrics::new();
        for (i, reason) in Reason::ALL.iter().enumerate() {
            m.upstream_reported(&format!("ns/u{i}"), *reason, false);
        }
        let scrape = m.encode().unwrap();
        let labels = [
            LabelDoc {
                name: "kind",
                means: "The kind a controller reconciled.",
                closed: true,
            },
            LabelDoc {
                name: "result",
                means: "How the reconcile ended; `error`: it is retried.",
                closed: true,
            },
            LabelDoc {
                name: "error",
                means: "Why a reconcile failed (and is retried).",
                closed: true,
            },
            LabelDoc {
                name: "reason",
                means: "The reason of an McpUpstream's `Ready` condition \
                        ([conditions](conditions.md)).",
                closed: true,
            },
        ];
        let page = metrics_page(
            "Operator metrics",
            "Served by `toolgate-operator` on `GET /metrics` of its health listener \
             (`--health-addr`) as OpenMetrics text. Every series of a closed label set is \
             there at 0 from the start; the `toolgate_operator_upstreams` gauges are the \
             leader's. How to scrape them and what to alert on: \
             [Metrics](../guide/metrics.md).",
            &scrape,
            &labels,
            REGENERATE,
        );
        check_or_bless("metrics-operator.md", &page, REGENERATE);
    }

    /// The names the chart's dashboard and alerts query: renaming one is
    /// a breaking change.
    #[test]
    fn every_agreed_name_is_in_a_fresh_scrape() {
        let names = parse(&Metrics::new().encode().expect("encodes")).names();
        for name in [
            "toolgate_operator_reconciles_total",
            "toolgate_operator_reconcile_duration_seconds",
            "toolgate_operator_reconcile_duration_seconds_count",
            "toolgate_operator_reconcile_errors_total",
            "toolgate_operator_compiles_total",
            "toolgate_operator_compile_duration_seconds",
            "toolgate_operator_compile_duration_seconds_count",
            "toolgate_operator_publishes_total",
            "toolgate_operator_published_bytes_total",
            "toolgate_operator_status_writes_total",
            "toolgate_operator_upstreams",
            "toolgate_operator_prefix_conflicts",
            "toolgate_operator_leader",
            "toolgate_operator_document_cache_entries",
            "toolgate_operator_document_cache_bytes",
            "toolgate_operator_compile_memory_budget_bytes",
            "toolgate_operator_compile_memory_reserved_bytes",
            "toolgate_operator_compile_memory_peak_bytes",
            "toolgate_operator_compile_memory_waits_total",
        ] {
            assert!(names.contains(name), "{name} missing from {names:?}");
        }
    }

    #[test]
    fn upstreams_by_reason_follow_each_upstreams_latest_report() {
        let m = Metrics::new();
        let reason = |m: &Metrics, r: &str| {
            parse(&m.encode().expect("encodes"))
                .value("toolgate_operator_upstreams", &[("reason", r)])
        };
        let conflicts = |m: &Metrics| {
            parse(&m.encode().expect("encodes")).get("toolgate_operator_prefix_conflicts", &[])
        };
        m.upstream_reported("a/one", Reason::Published, false);
        m.upstream_reported("a/two", Reason::PrefixConflict, true);
        m.upstream_reported("a/three", Reason::SpecInvalid, false);
        assert_eq!(reason(&m, "Published"), Some(1.0));
        assert_eq!(reason(&m, "PrefixConflict"), Some(1.0));
        assert_eq!(reason(&m, "SpecInvalid"), Some(1.0));
        assert_eq!(conflicts(&m), 1.0);

        // Fixed: the reason it no longer holds drops to 0.
        m.upstream_reported("a/three", Reason::Published, false);
        assert_eq!(reason(&m, "Published"), Some(2.0));
        assert_eq!(reason(&m, "SpecInvalid"), Some(0.0));

        m.upstream_gone("a/two");
        assert_eq!(reason(&m, "PrefixConflict"), Some(0.0));
        assert_eq!(conflicts(&m), 0.0);
        // Never held: no series.
        assert_eq!(reason(&m, "SecretNotFound"), None);

        // A replica that loses the lease reports no upstream.
        m.set_leader(true);
        m.set_leader(false);
        assert_eq!(reason(&m, "Published"), Some(0.0));
    }
}
