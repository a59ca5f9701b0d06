//! The compile step and its cache.
//!
//! Compiling is the only expensive step of a reconcile, so results are
//! cached per upstream by a hash of every input: a change elsewhere in the
//! cluster, or a restart that finds everything as it was, compiles at most
//! once.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use crds::conditions::Reason;
use crds::{McpUpstream, McpUpstreamStatus};
use sha2::{Digest, Sha256};
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
    metrics: Arc<Metrics>,
}

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
    pub fn new(concurrency: usize, metrics: Arc<Metrics>) -> Self {
        Compiler {
            cache: Mutex::default(),
            slots: Semaphore::new(concurrency.max(1)),
            metrics,
        }
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

/// sha256 of everything the catalog depends on.
fn input_hash(
    u: &McpUpstream,
    spec: &SpecBytes,
    overlays: &[LoadedOverlay],
    options: &catalog::CompileOptions,
) -> String {
    let mut h = Sha256::new();
    h.update(u.spec.tool_prefix.as_bytes());
    h.update([0]);
    h.update(spec.document.as_bytes());
    h.update([0]);
    h.update(&spec.bytes);
    for o in overlays {
        h.update([0]);
        h.update(o.name.as_bytes());
        h.update([u8::from(o.strict)]);
        h.update(&o.bytes);
    }
    h.update(serde_json::to_vec(options).unwrap_or_default());
    format!("{:x}", h.finalize())
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
