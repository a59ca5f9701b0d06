//! The compile step and its cache.
//!
//! Compiling is the only expensive step of a reconcile, so results are
//! cached per upstream by a hash of every input: a change elsewhere in the
//! cluster, or a restart that finds everything as it was, compiles at most
//! once.
//!
//! **Memory.** A compile's peak is not its document's size: schemas
//! amplified by `$ref`s and `allOf` measured ~240 MB (release build) for a
//! 1.1 MB document, and two of those at once took the operator past its
//! 512Mi limit. Each compile therefore reserves an estimate of its peak
//! ([`estimate_bytes`]) from a budget of the operator's memory
//! (`--compile-memory-bytes`, by default 60% of the container's limit)
//! before it starts; compiles that do not fit wait, in order, until
//! running ones give theirs back. One compile is always admitted, however
//! large its estimate, so that every upstream compiles eventually.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use crds::conditions::Reason;
use crds::{McpUpstream, McpUpstreamStatus};
use tokio::sync::Semaphore;

use crate::error::Failure;
use crate::metrics::Metrics;
use crate::sources::SpecBytes;
use crate::sync::lock;

/// Compiles upstreams, a few at a time, remembering the last result of
/// each.
pub struct Compiler {
    /// Keyed by `namespace/name`.
    cache: Mutex<HashMap<String, Compiled>>,
    /// Compiles running at once (each is CPU-bound).
    slots: Semaphore,
    /// The compile memory budget, in MiB permits.
    memory: Semaphore,
    memory_mib: u32,
    /// MiB reserved now, and the most at once.
    reserved_mib: AtomicU64,
    peak_mib: AtomicU64,
    metrics: Arc<Metrics>,
}

/// Default compile memory budget without a container memory limit.
pub const DEFAULT_COMPILE_MEMORY_BYTES: u64 = 320 << 20;

/// What any compile reserves at least: the compiler's own tables, the
/// parsed options and overlays, the catalog's skeleton.
pub const BASE_COMPILE_BYTES: u64 = 16 << 20;

/// Estimated peak per byte of input (document plus overlays): the 1.1 MB
/// schema-amplifying document of issue 26 peaked at ~240 MB in a release
/// build, 220x. Ordinary documents need far less (the 8.9 MB Argo
/// Workflows document: tens of MiB), so this errs on the safe side.
pub const COMPILE_BYTES_PER_INPUT_BYTE: u64 = 224;

/// Most any compile reserves: the compiler's own limits stop a catalog's
/// schemas at 64 MiB, and the worst compile they allow measured ~240 MB.
pub const MAX_COMPILE_BYTES: u64 = 256 << 20;

/// Estimated peak memory of compiling `input_bytes` of document and
/// overlays.
pub fn estimate_bytes(input_bytes: usize) -> u64 {
    (input_bytes as u64)
        .saturating_mul(COMPILE_BYTES_PER_INPUT_BYTE)
        .saturating_add(BASE_COMPILE_BYTES)
        .min(MAX_COMPILE_BYTES)
}

/// The default compile memory budget and where it came from: 60% of the
/// container's memory limit (the rest is the operator's own, 155 MiB at
/// peak with 300 upstreams on a 512Mi limit), else
/// [`DEFAULT_COMPILE_MEMORY_BYTES`].
pub fn default_compile_memory_bytes() -> (u64, &'static str) {
    match host::cgroup_memory_limit() {
        Some(limit) => (limit / 5 * 3, "60% of the cgroup memory limit"),
        None => (DEFAULT_COMPILE_MEMORY_BYTES, "default"),
    }
}

const MIB: u64 = 1 << 20;

/// A compile result kept per upstream, keyed by the hash of every input.
///
/// Only a summary is kept, not the catalog: catalogs of large APIs take tens
/// of megabytes in memory, and the published copy is the durable one. The
/// rare reconcile that must publish from a cached result (a promoted prefix,
/// a changed Secret) compiles again.
#[derive(Clone)]
pub struct Compiled {
    pub input_hash: String,
    pub result: Result<Arc<Summary>, Failure>,
}

/// What status needs to know about a compiled catalog.
#[derive(Debug, Clone)]
pub struct Summary {
    pub catalog_hash: String,
    pub prefix: String,
    pub tools: usize,
    pub operations: usize,
    pub rejected: usize,
    pub warnings: usize,
    /// `status` fields as `McpUpstreamStatus::record_catalog` fills them.
    pub recorded: crds::McpUpstreamStatus,
    /// Estimated `tools/list` size without output schemas, and with them
    /// where tools list them: which applies is the gateway's response
    /// validation (`spec.validation`), not the compile's.
    pub listing: [catalog::listing::ListingSize; 2],
    /// `(overlay namespace/name, action index)` of targets that matched nothing.
    pub unmatched: Vec<(String, u32)>,
    /// Published (uncompressed JSON) size, once encoded: a catalog over the
    /// cap is not compiled again just to find out again.
    pub encoded_size: OnceLock<usize>,
}

/// An overlay read and parsed, ready to apply.
pub struct LoadedOverlay {
    /// `namespace/name`.
    pub name: String,
    pub bytes: Vec<u8>,
    pub strict: bool,
    pub parsed: catalog::Overlay,
    /// `actions[i].target`, to report unmatched targets by text.
    pub targets: Vec<String>,
}

impl LoadedOverlay {
    pub fn new(name: String, bytes: Vec<u8>, strict: bool, parsed: catalog::Overlay) -> Self {
        let targets = action_targets(&bytes);
        LoadedOverlay {
            name,
            bytes,
            strict,
            parsed,
            targets,
        }
    }
}

fn action_targets(bytes: &[u8]) -> Vec<String> {
    catalog::spec::parse_value("overlay", bytes)
        .ok()
        .and_then(|v| {
            v.get("actions").and_then(|a| a.as_array()).map(|a| {
                a.iter()
                    .map(|x| {
                        x.get("target")
                            .and_then(|t| t.as_str())
                            .unwrap_or_default()
                            .to_string()
                    })
                    .collect()
            })
        })
        .unwrap_or_default()
}

impl Compiler {
    /// `memory_bytes`: the compile memory budget (`None`: the default).
    pub fn new(concurrency: usize, memory_bytes: Option<u64>, metrics: Arc<Metrics>) -> Self {
        let (bytes, from) = match memory_bytes {
            Some(b) => (b, "--compile-memory-bytes"),
            None => default_compile_memory_bytes(),
        };
        let memory_mib = u32::try_from(bytes / MIB).unwrap_or(u32::MAX).max(1);
        tracing::info!(bytes, from, "compile memory budget");
        metrics.set_compile_memory(u64::from(memory_mib) * MIB, 0, 0);
        Compiler {
            cache: Mutex::default(),
            slots: Semaphore::new(concurrency.max(1)),
            memory: Semaphore::new(memory_mib as usize),
            memory_mib,
            reserved_mib: AtomicU64::new(0),
            peak_mib: AtomicU64::new(0),
            metrics,
        }
    }

    /// Reserves the estimate of a compile of `input_bytes` from the memory
    /// budget (all of it, if the estimate is larger), waiting while
    /// running compiles hold too much.
    async fn reserve_memory(&self, source: &str, input_bytes: usize) -> MemoryReservation<'_> {
        let estimate = estimate_bytes(input_bytes);
        let mib = u32::try_from(estimate.div_ceil(MIB))
            .unwrap_or(u32::MAX)
            .min(self.memory_mib);
        let permit = match self.memory.try_acquire_many(mib) {
            Ok(p) => Some(p),
            Err(_) => {
                self.metrics.compile_waited_for_memory();
                tracing::info!(
                    upstream = %source,
                    estimate,
                    budget = u64::from(self.memory_mib) * MIB,
                    "compile waits for memory held by running compiles"
                );
                // The semaphore is never closed.
                self.memory.acquire_many(mib).await.ok()
            }
        };
        let now = self
            .reserved_mib
            .fetch_add(u64::from(mib), Ordering::SeqCst)
            + u64::from(mib);
        let peak = self.peak_mib.fetch_max(now, Ordering::SeqCst).max(now);
        self.report_memory(now, peak);
        MemoryReservation {
            compiler: self,
            mib,
            _permit: permit,
        }
    }

    fn report_memory(&self, reserved_mib: u64, peak_mib: u64) {
        self.metrics.set_compile_memory(
            u64::from(self.memory_mib) * MIB,
            reserved_mib * MIB,
            peak_mib * MIB,
        );
    }

    /// Drops what is remembered of `source` (`namespace/name`).
    pub fn forget(&self, source: &str) {
        lock(&self.cache).remove(source);
    }

    /// Compiles, or reuses the last result when no input changed (unless
    /// `force`: the catalog itself is needed). Returns the catalog when it
    /// compiled one.
    #[tracing::instrument(name = "compile", skip_all, fields(toolgate.compile.cached = false))]
    pub async fn compile(
        &self,
        source: &str,
        u: &McpUpstream,
        spec: &SpecBytes,
        overlays: &[LoadedOverlay],
        force: bool,
    ) -> (Compiled, Option<Arc<catalog::UpstreamCatalog>>) {
        let options = u.spec.compile_options();
        // Objects stored before the CRD enforced these (or written around it)
        // must not publish names another upstream's prefix owns.
        if let Err(e) =
            catalog::prefix::check_shared(&u.spec.tool_prefix, &options.naming.separator)
        {
            let message = match &e {
                catalog::CompileError::Options { field, message } => {
                    format!("spec.{field}: {message}")
                }
                other => other.to_string(),
            };
            let result = Err(Failure::new(e.reason(), message));
            return (
                Compiled {
                    input_hash: String::new(),
                    result,
                },
                None,
            );
        }
        let input_hash = input_hash(u, spec, overlays, &options);
        if !force {
            if let Some(c) = lock(&self.cache).get(source) {
                if c.input_hash == input_hash {
                    tracing::Span::current().record("toolgate.compile.cached", true);
                    return (c.clone(), None);
                }
            }
        }
        let input_bytes = spec.bytes.len() + overlays.iter().map(|o| o.bytes.len()).sum::<usize>();
        // Memory first: a compile waiting for memory must not hold a slot
        // that a small compile could use.
        let _memory = self.reserve_memory(source, input_bytes).await;
        let _permit = self.slots.acquire().await;
        let prefix = u.spec.tool_prefix.clone();
        let document = spec.document.clone();
        let bytes = spec.bytes.clone();
        let parsed: Vec<catalog::Overlay> = overlays.iter().map(|o| o.parsed.clone()).collect();
        let started = std::time::Instant::now();
        let span = tracing::Span::current();
        let result = tokio::task::spawn_blocking(move || {
            span.in_scope(|| {
                catalog::compile_upstream(&catalog::UpstreamSource {
                    prefix: &prefix,
                    document: &document,
                    spec: &bytes,
                    overlays: &parsed,
                    options: &options,
                })
            })
        })
        .await;
        self.metrics.compiled(started.elapsed());
        tracing::debug!(upstream = %source, ms = started.elapsed().as_millis() as u64, "compiled");
        let mut catalog = None;
        let result = match result {
            Ok(Ok(cat)) => match cat.transform_failure() {
                Some(message) => Err(Failure::new(Reason::TransformInvalid, message)),
                None => {
                    let summary = summarize(&cat);
                    catalog = Some(Arc::new(cat));
                    Ok(Arc::new(summary))
                }
            },
            Ok(Err(e)) => Err(Failure::compile(&e)),
            Err(join) => Err(Failure::new(
                Reason::SpecInvalid,
                format!("the compiler failed on this document: {join}"),
            )),
        };
        let compiled = Compiled { input_hash, result };
        lock(&self.cache).insert(source.to_string(), compiled.clone());
        if catalog.is_none() {
            catalog::release_freed_memory();
        }
        (compiled, catalog)
    }
}

/// A compile's share of the memory budget, given back when dropped.
struct MemoryReservation<'a> {
    compiler: &'a Compiler,
    mib: u32,
    _permit: Option<tokio::sync::SemaphorePermit<'a>>,
}

impl Drop for MemoryReservation<'_> {
    fn drop(&mut self) {
        let c = self.compiler;
        let now = c
            .reserved_mib
            .fetch_sub(u64::from(self.mib), Ordering::SeqCst)
            .saturating_sub(u64::from(self.mib));
        c.report_memory(now, c.peak_mib.load(Ordering::SeqCst));
    }
}

/// The compile's key ([`catalog::input_hash`]).
fn input_hash(
    u: &McpUpstream,
    spec: &SpecBytes,
    overlays: &[LoadedOverlay],
    options: &catalog::CompileOptions,
) -> String {
    let overlays: Vec<_> = overlays
        .iter()
        .map(|o| catalog::OverlayInput {
            name: &o.name,
            bytes: &o.bytes,
            strict: o.strict,
        })
        .collect();
    catalog::input_hash(
        &u.spec.tool_prefix,
        &spec.document,
        &spec.bytes,
        &overlays,
        options,
    )
}

fn summarize(cat: &catalog::UpstreamCatalog) -> Summary {
    let mut recorded = McpUpstreamStatus::default();
    recorded.record_catalog(cat);
    // Only the overlays given to the compiler can be named here.
    let unmatched = cat
        .warnings
        .iter()
        .filter(|w| w.code == catalog::WarningCode::OverlayTargetUnmatched)
        .filter_map(|w| match &w.at {
            Some(catalog::Location::Overlay { name, action }) => Some((name.clone(), *action)),
            _ => None,
        })
        .collect();
    Summary {
        catalog_hash: cat.hash.clone(),
        prefix: cat.prefix.clone(),
        tools: cat.tools.len(),
        operations: cat.source.operation_count,
        rejected: cat.rejected.len(),
        warnings: cat.warnings.len(),
        recorded,
        listing: [false, true].map(|output| catalog::listing::size_of(&cat.tools, output)),
        unmatched,
        encoded_size: OnceLock::new(),
    }
}
