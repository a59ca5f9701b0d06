//! The current snapshot and how it changes: an `ArcSwap<Snapshot>` that a
//! reload replaces atomically, and a watcher for `--catalog FILE`.
//!
//! **Why in-flight calls are safe.** A call `load_full()`s the snapshot once
//! and holds that `Arc` (and the tool's `Arc<ToolEntry>`) until it returns.
//! A swap only changes which snapshot the *next* load sees; the old one is
//! freed when its last call finishes. So a reload never splits a call, and
//! never fails one.
//!
//! **Why a failed load is harmless.** The next snapshot is built completely
//! on the side ([`Snapshot::build`]) before the swap. If anything fails the
//! error is logged with the upstream, tool and field, the previous snapshot
//! keeps serving, and the watcher retries when the file changes again.
//!
//! **Watching.** [`watch_file`] follows the file with
//! [`crate::file_watch`]: polled, debounced, and following Kubernetes'
//! `..data` symlink swaps.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use arc_swap::ArcSwap;
use catalog::toolset::{Toolset, ToolsetName};
use catalog::Catalog;
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

use crate::config::GatewayConfig;
pub use crate::file_watch::WatchOptions;
use crate::file_watch::{FileChange, FileWatch};
use crate::observe::metrics::{Metrics, ReloadResult};
use crate::serving::snapshot::{Overrides, Provenance, RuntimeCache, Snapshot, SnapshotError};

/// What a reload changed, by tool name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolDiff {
    pub added: Vec<String>,
    pub removed: Vec<String>,
    pub modified: Vec<String>,
    /// Prefixes whose access policy changed: what their tools' callers
    /// may see changed, whatever the tools did.
    pub access: Vec<String>,
    /// Prefixes of every added, removed or modified tool, and of `access`.
    pub prefixes: BTreeSet<String>,
    /// Toolsets whose sessions see a change: added, removed or redefined,
    /// gaining or losing a tool, or serving a tool that changed or whose
    /// upstream's access policy did.
    pub toolsets: BTreeSet<ToolsetName>,
}

impl ToolDiff {
    pub fn is_empty(&self) -> bool {
        self.added.is_empty()
            && self.removed.is_empty()
            && self.modified.is_empty()
            && self.access.is_empty()
            && self.toolsets.is_empty()
    }

    /// Whether a session seeing `scope` (`None`: all tools) sees a change.
    pub fn affects(&self, scope: Option<&str>) -> bool {
        match scope {
            None => !self.is_empty(),
            Some(p) => self.prefixes.contains(p),
        }
    }
}

/// Compares two snapshots by tool name and content fingerprint, and by
/// each upstream's access policy.
pub fn diff(old: &Snapshot, new: &Snapshot) -> ToolDiff {
    let access = new.access_changed(old);
    let mut d = ToolDiff {
        prefixes: access.iter().cloned().collect(),
        access,
        ..ToolDiff::default()
    };
    for t in new.tools(None) {
        match old.tool(&t.def.name) {
            None => {
                d.added.push(t.def.name.clone());
                d.prefixes.insert(t.prefix.clone());
            }
            Some(o) if o.fingerprint != t.fingerprint || o.prefix != t.prefix => {
                d.modified.push(t.def.name.clone());
                d.prefixes.insert(t.prefix.clone());
                d.prefixes.insert(o.prefix.clone());
            }
            Some(_) => {}
        }
    }
    for t in old.tools(None) {
        if new.tool(&t.def.name).is_none() {
            d.removed.push(t.def.name.clone());
            d.prefixes.insert(t.prefix.clone());
        }
    }
    d.toolsets = toolsets_changed(old, new, &d);
    d
}

/// The toolsets whose sessions see a change between `old` and `new`,
/// given the tool-level diff `d`.
fn toolsets_changed(old: &Snapshot, new: &Snapshot, d: &ToolDiff) -> BTreeSet<ToolsetName> {
    let names: BTreeSet<&ToolsetName> = old
        .toolsets()
        .chain(new.toolsets())
        .map(|t| &t.def.id)
        .collect();
    names
        .into_iter()
        .filter(|name| {
            let (before, after) = (old.toolset(name), new.toolset(name));
            if before.map(|t| &t.def) != after.map(|t| &t.def) {
                return true;
            }
            let in_new = |tool: &String| new.tool(tool).is_some_and(|t| t.in_toolset(name));
            let in_old = |tool: &String| old.tool(tool).is_some_and(|t| t.in_toolset(name));
            d.added.iter().any(in_new)
                || d.removed.iter().any(in_old)
                || d.modified.iter().any(|t| in_new(t) || in_old(t))
                || after.is_some_and(|t| d.access.iter().any(|p| t.def.upstreams.contains(p)))
        })
        .cloned()
        .collect()
}

/// The served snapshot plus what is needed to build the next one.
pub struct CatalogStore {
    current: ArcSwap<Snapshot>,
    overrides: Overrides,
    /// Also serialises installs, so diffs are computed against the
    /// snapshot actually replaced.
    build: Mutex<BuildState>,
    changes: broadcast::Sender<Arc<ToolDiff>>,
    /// This gateway's metrics: the served catalog's size and hash, and
    /// every load.
    metrics: Arc<Metrics>,
}

/// What the next snapshot is built with. The config lives here, not next
/// to `current`, because in Kubernetes mode it changes with the catalog
/// and both must be replaced by one install.
struct BuildState {
    config: GatewayConfig,
    cache: RuntimeCache,
}

/// A catalog file that cannot be read or parsed.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("catalog {path}: {message}")]
    Read { path: String, message: String },
    #[error("catalog {path}: {message}")]
    Parse { path: String, message: String },
    #[error("catalog {path}: {source}")]
    Snapshot {
        path: String,
        // NB: boxed, or every `Result<_, LoadError>` carries its size.
        #[source]
        source: Box<SnapshotError>,
    },
}

impl CatalogStore {
    pub fn new(config: GatewayConfig, overrides: Overrides) -> Arc<Self> {
        Self::with_metrics(config, overrides, Arc::new(Metrics::default()))
    }

    /// [`CatalogStore::new`] recording into `metrics`.
    pub fn with_metrics(
        config: GatewayConfig,
        overrides: Overrides,
        metrics: Arc<Metrics>,
    ) -> Arc<Self> {
        let (changes, _) = broadcast::channel(64);
        Arc::new(CatalogStore {
            current: ArcSwap::from_pointee(Snapshot::empty()),
            overrides,
            build: Mutex::new(BuildState {
                config,
                cache: RuntimeCache::default(),
            }),
            changes,
            metrics,
        })
    }

    /// This gateway's metrics.
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    /// Counts one load of a loader that installs through
    /// [`CatalogStore::install_with_config`] or
    /// [`CatalogStore::install_published`], which may install several
    /// times in one load (falling back upstream by upstream) and so do not
    /// count on their own. [`CatalogStore::install`] and
    /// [`CatalogStore::install_file`] count themselves.
    pub(crate) fn count_reload(&self, result: ReloadResult) {
        self.metrics.reload(result);
    }

    fn counted<T, E>(&self, r: Result<T, E>) -> Result<T, E> {
        self.count_reload(match r {
            Ok(_) => ReloadResult::Success,
            Err(_) => ReloadResult::Failure,
        });
        r
    }

    /// The current snapshot; hold it for the whole call.
    pub fn load(&self) -> Arc<Snapshot> {
        self.current.load_full()
    }

    /// Builds a snapshot of `catalog` and swaps it in, returning what
    /// changed. On error the current snapshot stays.
    pub fn install(&self, catalog: &Catalog) -> Result<Arc<ToolDiff>, SnapshotError> {
        let mut guard = self.build.lock().unwrap_or_else(|p| p.into_inner());
        let b = &mut *guard;
        let next = Snapshot::build(catalog, &b.config, &self.overrides, &mut b.cache);
        let next = self.counted(next)?;
        Ok(self.swap_in(next, guard))
    }

    /// Parses and installs `catalog`, freeing the parsed form before the
    /// snapshot goes live; see [`Snapshot::compacted`].
    fn install_owned(
        &self,
        catalog: Catalog,
        source: &str,
    ) -> Result<Arc<ToolDiff>, SnapshotError> {
        let provenance = Provenance::of(&catalog, source);
        let mut guard = self.build.lock().unwrap_or_else(|p| p.into_inner());
        let b = &mut *guard;
        let built = Snapshot::build(&catalog, &b.config, &self.overrides, &mut b.cache)?;
        drop(catalog);
        let mut next = built.compacted();
        drop(built);
        next.provenance = Arc::new(provenance);
        Ok(self.swap_in(next, guard))
    }

    /// Installs a catalog together with the config to serve it with (both
    /// or neither), recording `provenance` for `/status`. This is how
    /// Kubernetes mode installs: there the config comes with the catalog.
    /// On error the current snapshot and config stay.
    pub fn install_with_config(
        &self,
        catalog: Catalog,
        config: GatewayConfig,
        provenance: Provenance,
    ) -> Result<Arc<ToolDiff>, SnapshotError> {
        self.install_published(catalog, config, Vec::new(), provenance)
    }

    /// [`CatalogStore::install_with_config`] with the toolsets to serve from
    /// the catalog, as Kubernetes mode publishes them: upstreams and
    /// toolsets change in one swap.
    pub fn install_published(
        &self,
        catalog: Catalog,
        config: GatewayConfig,
        toolsets: Vec<Toolset>,
        provenance: Provenance,
    ) -> Result<Arc<ToolDiff>, SnapshotError> {
        let mut guard = self.build.lock().unwrap_or_else(|p| p.into_inner());
        let b = &mut *guard;
        let mut built = Snapshot::build(&catalog, &config, &self.overrides, &mut b.cache)?;
        built.select_toolsets(&catalog, toolsets);
        b.config = config;
        drop(catalog);
        let mut next = built.compacted();
        drop(built);
        next.provenance = Arc::new(provenance);
        Ok(self.swap_in(next, guard))
    }

    fn swap_in(
        &self,
        next: Snapshot,
        build: std::sync::MutexGuard<'_, BuildState>,
    ) -> Arc<ToolDiff> {
        // The hash `/status` shows (in Kubernetes mode the published
        // index's). Under the build lock, like the swap: the last wins.
        let hash = match next.provenance.catalog_hash.as_str() {
            "" => next.hash.as_str(),
            h => h,
        };
        self.metrics.catalog_served(next.tool_count(), hash);
        let old = self.current.swap(Arc::new(next));
        let d = Arc::new(diff(&old, &self.current.load()));
        drop(old);
        drop(build);
        catalog::release_freed_memory();
        if !d.is_empty() {
            tracing::info!(
                added = d.added.len(),
                removed = d.removed.len(),
                modified = d.modified.len(),
                access_changed = ?d.access,
                toolsets_changed = d.toolsets.len(),
                added_tools = ?first(&d.added),
                removed_tools = ?first(&d.removed),
                modified_tools = ?first(&d.modified),
                "catalog reloaded"
            );
            let _ = self.changes.send(d.clone());
        }
        d
    }

    /// Reads, parses and installs a catalog file.
    pub fn install_file(&self, path: &Path) -> Result<Arc<ToolDiff>, LoadError> {
        let bytes = match std::fs::read(path) {
            Ok(b) => b,
            Err(e) => {
                self.count_reload(ReloadResult::Failure);
                return Err(LoadError::Read {
                    path: path.display().to_string(),
                    message: e.to_string(),
                });
            }
        };
        self.install_bytes(path, &bytes)
    }

    /// Parses and installs a catalog's bytes; counted as one load.
    fn install_bytes(&self, path: &Path, bytes: &[u8]) -> Result<Arc<ToolDiff>, LoadError> {
        let r = self.install_bytes_uncounted(path, bytes);
        self.counted(r)
    }

    fn install_bytes_uncounted(
        &self,
        path: &Path,
        bytes: &[u8],
    ) -> Result<Arc<ToolDiff>, LoadError> {
        let catalog = parse_catalog(bytes).map_err(|message| LoadError::Parse {
            path: path.display().to_string(),
            message,
        })?;
        if self.load().loaded && self.load().hash == catalog.hash && !catalog.hash.is_empty() {
            return Ok(Arc::new(ToolDiff::default()));
        }
        let result = self
            .install_owned(catalog, &path.display().to_string())
            .map_err(|source| LoadError::Snapshot {
                path: path.display().to_string(),
                source: Box::new(source),
            });
        catalog::release_freed_memory();
        result
    }

    /// Reload notifications (only non-empty diffs are sent).
    pub fn subscribe(&self) -> broadcast::Receiver<Arc<ToolDiff>> {
        self.changes.subscribe()
    }
}

/// Schedules [`catalog::release_freed_memory`] shortly, once for any number of
/// requests meanwhile. For work whose garbage outlives the handler: a
/// `tools/list` page is serialised and sent after the handler returns, and
/// a full page of a large catalog is tens of megabytes of transient JSON
/// that glibc would otherwise keep.
pub(crate) fn release_freed_memory_soon() {
    static PENDING: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    if PENDING.swap(true, std::sync::atomic::Ordering::AcqRel) {
        return;
    }
    let Ok(rt) = tokio::runtime::Handle::try_current() else {
        PENDING.store(false, std::sync::atomic::Ordering::Release);
        return;
    };
    rt.spawn(async {
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        PENDING.store(false, std::sync::atomic::Ordering::Release);
        let _ = tokio::task::spawn_blocking(catalog::release_freed_memory).await;
    });
}

fn first(names: &[String]) -> Vec<&str> {
    names.iter().take(10).map(String::as_str).collect()
}

/// Parses a catalog (JSON, or YAML) and checks its format marker.
pub fn parse_catalog(bytes: &[u8]) -> Result<Catalog, String> {
    let catalog: Catalog = match serde_json::from_slice(bytes) {
        Ok(c) => c,
        Err(json_err) => match std::str::from_utf8(bytes)
            .ok()
            .and_then(|s| yaml_serde::from_str::<Catalog>(s).ok())
        {
            Some(c) => c,
            None => return Err(json_err.to_string()),
        },
    };
    if catalog.format != catalog::CATALOG_FORMAT {
        return Err(format!(
            "format is {:?}, expected {:?}",
            catalog.format,
            catalog::CATALOG_FORMAT
        ));
    }
    Ok(catalog)
}

/// Polls `path` until `shutdown`, installing each new stable content
/// ([`crate::file_watch`]). The file's content at start is assumed
/// already installed (or failed).
pub async fn watch_file(
    store: Arc<CatalogStore>,
    path: PathBuf,
    opts: WatchOptions,
    shutdown: CancellationToken,
) {
    let watch = FileWatch::from_now(path.clone(), opts);
    watch
        .run(shutdown, |change| {
            let store = store.clone();
            let path = path.clone();
            async move {
                match change {
                    FileChange::Content(bytes) => {
                        // Building compiles every schema: keep it off the
                        // async workers.
                        let result =
                            tokio::task::spawn_blocking(move || store.install_bytes(&path, &bytes))
                                .await;
                        match result {
                            Ok(Ok(_)) => {}
                            Ok(Err(e)) => {
                                tracing::error!(error = %e, "catalog not loaded; the previous catalog keeps serving and the file will be loaded when it becomes valid")
                            }
                            Err(e) => tracing::error!(error = %e, "catalog load aborted"),
                        }
                    }
                    FileChange::Gone => {
                        tracing::warn!(path = %path.display(), "catalog file removed; the loaded catalog keeps serving")
                    }
                    FileChange::Unreadable(e) => {
                        store.count_reload(ReloadResult::Failure);
                        tracing::error!(path = %path.display(), error = %e, "cannot read the catalog file; the loaded catalog keeps serving")
                    }
                }
            }
        })
        .await;
}
