//! Several upstreams without Kubernetes: a gateway that compiles its own
//! catalog from the config file (`toolgate serve --config` without
//! `--catalog`, and `toolgate compile --config`).
//!
//! **Loading.** [`Sources`] reads the config file, then for each upstream
//! its OpenAPI document (a file, or a URL fetched within a size cap and a
//! timeout) and overlays, and compiles it as the operator compiles an
//! McpUpstream: the same options ([`UpstreamEntry::compile_options`]) and
//! prefix rules (checked when the config is parsed). Relative paths
//! resolve against the config file's directory. An upstream whose inputs
//! did not change is not compiled again.
//!
//! **Reloading.** [`watch`] follows the config file and every document and
//! overlay file it names ([`crate::file_watch`]), and fetches URLs again
//! (conditional GETs) on every reload and every `refreshInterval`. A
//! reload installs each upstream whole (its tools with its settings) or
//! not at all: one that fails — a file that does not parse, a compile
//! error, an unreachable URL, settings the gateway cannot use — keeps
//! serving its last good version while the others update, and the error
//! is logged naming the upstream and the file. A config file that does
//! not parse changes nothing. At start-up every failure is fatal instead.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use catalog::{Catalog, UpstreamCatalog};
use futures::StreamExt;
use host::documents::{self, FetchError, Fetched, Validators};

use crate::config::{ConfigError, GatewayConfig, GatewayFile, UpstreamEntry};
use crate::identity::inbound::config::InboundConfig;
use crate::observe::metrics::ReloadResult;
use crate::serving::reload::CatalogStore;
use crate::serving::snapshot::{now_rfc3339, Provenance, SnapshotError, UpstreamProvenance};

mod version;
mod watch;

use version::{set_hash, version, Inputs, Version};
pub use watch::watch;

/// Largest OpenAPI document fetched from a URL (the operator's default
/// `--max-spec-bytes`): the largest public descriptions, about 11 MB, fit.
pub(crate) const MAX_SPEC_BYTES: usize = 16 << 20;
/// The whole GET of a document, body included.
pub(crate) const FETCH_TIMEOUT: Duration = Duration::from_secs(30);

/// Why the upstreams could not be loaded (at start-up, or by
/// `toolgate compile --config`).
#[derive(Debug, thiserror::Error)]
pub enum LocalError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(
        "config {path}: no upstream says where its tools come from \
         (`openapi: {{file: ...}}` or `{{url: ...}}`)"
    )]
    NoSources { path: String },
    /// One upstream: its document, overlays or compile.
    #[error("upstream {prefix}: {message}")]
    Upstream { prefix: String, message: String },
    /// The catalog compiled but cannot be served (say, a base URL that
    /// does not parse, or a credentials file that is missing).
    #[error("config {path}: {source}")]
    Serve {
        path: String,
        #[source]
        source: Box<SnapshotError>,
    },
}

/// One compiled upstream.
#[derive(Debug, Clone)]
pub struct Compiled {
    pub prefix: String,
    /// The document: its path or URL.
    pub document: String,
    pub catalog: UpstreamCatalog,
    /// For a lint ([`Sources::for_lint`]): the name conflicts
    /// `conflictResolution: error` refused the document for; `catalog` is
    /// then compiled with `qualify`.
    pub refused: Option<catalog::NameConflicts>,
}

/// A document fetched from a URL, kept for conditional GETs.
struct Kept {
    validators: Validators,
    body: Vec<u8>,
}

/// The config file's upstreams: read, compiled and, for `serve`, what is
/// served of them.
pub struct Sources {
    path: PathBuf,
    dir: PathBuf,
    /// Overlay targets that match nothing are errors (`compile --strict`).
    strict: bool,
    http: reqwest::Client,
    fetched: BTreeMap<String, Kept>,
    /// What is served, by prefix.
    served: BTreeMap<String, Version>,
    /// Hash of the served set, to skip installs that change nothing.
    installed: Option<String>,
    /// The inbound settings the process started with: they are not
    /// reloaded, so a change is only worth a warning.
    inbound: Option<InboundConfig>,
    /// Files read by the last load (`None`: could not be read), with
    /// what was read: what the watches start from.
    read: BTreeMap<PathBuf, Option<Vec<u8>>>,
    /// Whether the last load parsed the config, so `read` holds every
    /// file it names.
    read_all: bool,
    /// When the next URL refresh is due.
    refresh_at: Option<Instant>,
    /// Compiling for `toolgate lint`: see [`Sources::for_lint`].
    lint: bool,
}

impl Sources {
    /// Upstreams of the config file at `path`.
    pub fn new(path: PathBuf, strict: bool) -> Self {
        crate::net::install_crypto_provider();
        let dir = path
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_else(|| PathBuf::from("."));
        let http = reqwest::Client::builder()
            .user_agent(concat!("toolgate/", env!("CARGO_PKG_VERSION")))
            .connect_timeout(Duration::from_secs(10))
            .redirect(host::documents::redirect_policy())
            .build()
            .unwrap_or_default();
        Sources {
            path,
            dir,
            strict,
            http,
            fetched: BTreeMap::new(),
            served: BTreeMap::new(),
            installed: None,
            inbound: None,
            read: BTreeMap::new(),
            read_all: false,
            refresh_at: None,
            lint: false,
        }
    }

    /// Upstreams of the config file at `path`, for `toolgate lint`: name
    /// conflicts that `conflictResolution: error` refuses are reported in
    /// [`Compiled::refused`] rather than failing the upstream.
    pub fn for_lint(path: PathBuf, strict: bool) -> Self {
        Sources {
            lint: true,
            ..Self::new(path, strict)
        }
    }

    /// Reads the config and compiles every upstream; the first failure
    /// is the error (`toolgate compile --config`).
    pub async fn compile_all(&mut self) -> Result<Vec<Compiled>, LocalError> {
        let file = self.read_config()?;
        let mut out = Vec::new();
        for result in self.compile_each(&file).await {
            let (prefix, version) = result?;
            out.push(Compiled {
                prefix,
                document: version.document,
                catalog: Arc::unwrap_or_clone(version.catalog),
                refused: version.refused,
            });
        }
        Ok(out)
    }

    /// Loads everything and installs it; any failure is the error, and
    /// nothing is installed.
    pub async fn start(&mut self, store: &CatalogStore) -> Result<(), LocalError> {
        let file = self.read_config()?;
        self.inbound = Some(file.inbound.clone());
        let mut candidates = BTreeMap::new();
        for result in self.compile_each(&file).await {
            let (prefix, version) = result?;
            candidates.insert(prefix, version);
        }
        self.install(candidates, store, true).map(|_| ())
    }

    /// [`Sources::start`], counted as a catalog load.
    pub async fn start_counted(&mut self, store: &CatalogStore) -> Result<(), LocalError> {
        let r = self.start(store).await;
        store.count_reload(match r {
            Ok(()) => ReloadResult::Success,
            Err(_) => ReloadResult::Failure,
        });
        r
    }

    /// Loads again and installs what loads, each upstream falling back to
    /// its last good version; errors are logged.
    pub async fn reload(&mut self, store: &CatalogStore) {
        // A load that left any upstream behind what its files say failed.
        let result = match self.reload_all(store).await {
            true => ReloadResult::Success,
            false => ReloadResult::Failure,
        };
        store.count_reload(result);
    }

    /// [`Sources::reload`]; false if anything did not load.
    async fn reload_all(&mut self, store: &CatalogStore) -> bool {
        let file = match self.read_config() {
            Ok(f) => f,
            Err(e) => {
                tracing::error!(error = %e, "config not reloaded; every upstream keeps serving its last good version");
                return false;
            }
        };
        let mut loaded = true;
        if self.inbound.as_ref().is_some_and(|i| *i != file.inbound) {
            tracing::warn!(config = %self.path.display(), "`inbound` changed: it takes effect when toolgate restarts");
            self.inbound = Some(file.inbound.clone());
        }
        let mut candidates = BTreeMap::new();
        for result in self.compile_each(&file).await {
            match result {
                Ok((prefix, version)) => {
                    candidates.insert(prefix, version);
                }
                Err(LocalError::Upstream { prefix, message }) => {
                    let tail = match self.served.get(&prefix) {
                        Some(v) => {
                            candidates.insert(prefix.clone(), v.clone());
                            "; its last good version keeps serving"
                        }
                        None => "; not served until it loads",
                    };
                    tracing::error!(upstream = %prefix, "upstream {prefix}: {message}{tail}");
                    loaded = false;
                }
                Err(e) => {
                    tracing::error!(error = %e, "upstream not reloaded");
                    loaded = false;
                }
            }
        }
        match self.install(candidates, store, false) {
            Ok(all) => loaded && all,
            Err(e) => {
                tracing::error!(error = %e, "catalog not reloaded");
                false
            }
        }
    }

    /// Reads and checks the config file, and notes it among the files
    /// read.
    fn read_config(&mut self) -> Result<GatewayFile, LocalError> {
        self.read.clear();
        self.read_all = false;
        self.read
            .insert(self.path.clone(), std::fs::read(&self.path).ok());
        let file = crate::config::load_file(&self.path)?;
        if !file.has_sources() {
            return Err(LocalError::NoSources {
                path: self.path.display().to_string(),
            });
        }
        self.read_all = true;
        self.refresh_at = None;
        Ok(file)
    }

    /// Reads and compiles each upstream of `file` that has a source, a few
    /// at a time; unchanged ones are taken from what is served.
    async fn compile_each(
        &mut self,
        file: &GatewayFile,
    ) -> Vec<Result<(String, Version), LocalError>> {
        let entries: Vec<(&String, &UpstreamEntry)> = file
            .upstreams
            .iter()
            .flatten()
            .filter(|(_, e)| e.openapi.is_some())
            .collect();
        let mut inputs = Vec::with_capacity(entries.len());
        for (_, entry) in &entries {
            inputs.push(self.inputs(entry).await);
        }
        self.forget_unused(&entries);
        let parallel = std::thread::available_parallelism().map_or(1, |n| n.get().min(4));
        let mut jobs = Vec::with_capacity(entries.len());
        for ((prefix, entry), read) in entries.into_iter().zip(inputs) {
            let previous = self.served.get(prefix).cloned();
            jobs.push(version(
                prefix.clone(),
                entry.runtime(),
                read,
                previous,
                self.strict,
                self.lint,
            ));
        }
        futures::stream::iter(jobs)
            .buffered(parallel)
            .collect()
            .await
    }

    /// Reads one upstream's document and overlays; the error names the
    /// field and the file or URL.
    async fn inputs(&mut self, entry: &UpstreamEntry) -> Result<Inputs, String> {
        let Some(openapi) = &entry.openapi else {
            return Err("no openapi".into());
        };
        // Due even when this fetch fails: a URL that is down is retried.
        if let Some(interval) = openapi.refresh() {
            let at = Instant::now() + interval;
            self.refresh_at = Some(self.refresh_at.map_or(at, |t| t.min(at)));
        }
        let (document, spec) = match (&openapi.file, &openapi.url) {
            (Some(file), _) => {
                let path = self.dir.join(file);
                let bytes = self
                    .read_file(&path)
                    .map_err(|e| format!("openapi.file {e}"))?;
                (path.display().to_string(), bytes)
            }
            (None, Some(url)) => {
                let bytes = self
                    .fetch(url)
                    .await
                    .map_err(|e| format!("openapi.url {url}: {e}"))?;
                (url.clone(), bytes)
            }
            (None, None) => return Err("openapi: set exactly one of file and url".into()),
        };
        let mut overlays = Vec::with_capacity(entry.overlays.len());
        for (i, o) in entry.overlays.iter().enumerate() {
            let path = self.dir.join(o);
            let bytes = self
                .read_file(&path)
                .map_err(|e| format!("overlays[{i}] {e}"))?;
            overlays.push((path.display().to_string(), bytes));
        }
        Ok(Inputs {
            document,
            spec,
            overlays,
            options: entry.compile_options(),
        })
    }

    /// Reads a file, noting it among the files to watch.
    fn read_file(&mut self, path: &Path) -> Result<Vec<u8>, String> {
        let result = std::fs::read(path);
        self.read
            .insert(path.to_path_buf(), result.as_ref().ok().cloned());
        result.map_err(|e| format!("{}: {e}", path.display()))
    }

    /// GETs `url`, conditionally on what was fetched before.
    async fn fetch(&mut self, url: &str) -> Result<Vec<u8>, String> {
        let req = self.http.get(url).timeout(FETCH_TIMEOUT);
        let previous = self.fetched.get(url).map(|f| &f.validators);
        match documents::get(req, previous, MAX_SPEC_BYTES).await {
            Ok(Fetched::Document { body, validators }) => {
                self.fetched.insert(
                    url.to_string(),
                    Kept {
                        validators,
                        body: body.clone(),
                    },
                );
                Ok(body)
            }
            Ok(Fetched::NotModified) => self
                .fetched
                .get(url)
                .map(|f| f.body.clone())
                .ok_or_else(|| FetchError::Status(304).to_string()),
            Err(FetchError::Timeout) => {
                Err(format!("timed out after {} s", FETCH_TIMEOUT.as_secs()))
            }
            Err(e) => Err(e.to_string()),
        }
    }

    /// Drops fetched documents no upstream reads any more.
    fn forget_unused(&mut self, entries: &[(&String, &UpstreamEntry)]) {
        let urls: BTreeSet<&str> = entries
            .iter()
            .filter_map(|(_, e)| e.openapi.as_ref()?.url.as_deref())
            .collect();
        self.fetched.retain(|u, _| urls.contains(u.as_str()));
    }

    /// Installs `candidates` with their settings unless that is what is
    /// served. Unless `strict`, an upstream the gateway cannot serve falls
    /// back to its last good version, or is left out, and the others
    /// still load. True if every candidate is served as given.
    fn install(
        &mut self,
        mut candidates: BTreeMap<String, Version>,
        store: &CatalogStore,
        strict: bool,
    ) -> Result<bool, LocalError> {
        let mut all = true;
        // Each failed round replaces or removes one upstream, so this ends.
        for _ in 0..=candidates.len() * 2 + 1 {
            let hash = set_hash(&candidates);
            if self.installed.as_deref() == Some(hash.as_str()) {
                return Ok(all);
            }
            let catalog = Catalog::new(
                candidates
                    .values()
                    .map(|v| UpstreamCatalog::clone(&v.catalog))
                    .collect(),
            );
            let config = GatewayConfig {
                upstreams: candidates
                    .iter()
                    .map(|(p, v)| (p.clone(), v.runtime.clone()))
                    .collect(),
            };
            let provenance = Provenance {
                catalog_hash: catalog.hash.clone(),
                tools: catalog.tool_count(),
                upstreams: candidates
                    .iter()
                    .map(|(p, v)| UpstreamProvenance {
                        prefix: p.clone(),
                        source: v.document.clone(),
                        hash: v.catalog.hash.clone(),
                        tools: v.catalog.tools.len(),
                    })
                    .collect(),
                loaded_at: now_rfc3339(),
            };
            let e = match store.install_with_config(catalog, config, provenance) {
                Ok(_) => {
                    self.served = candidates;
                    self.installed = Some(hash);
                    return Ok(all);
                }
                Err(e) => e,
            };
            let path = self.path.display().to_string();
            let failed = match candidates.get(&e.upstream) {
                Some(failed) if !strict => failed,
                _ => {
                    return Err(LocalError::Serve {
                        path,
                        source: Box::new(e),
                    })
                }
            };
            let prefix = e.upstream.clone();
            let previous = self
                .served
                .get(&prefix)
                .filter(|p| p.input_hash != failed.input_hash || p.runtime != failed.runtime)
                .cloned();
            let tail = if previous.is_some() {
                "; its last good version keeps serving"
            } else {
                "; not served until it loads"
            };
            tracing::error!(upstream = %prefix, "config {path}: upstream {prefix} ({}) cannot be served: {e}{tail}", failed.document);
            all = false;
            match previous {
                Some(v) => {
                    candidates.insert(prefix, v);
                }
                None => {
                    candidates.remove(&prefix);
                }
            }
        }
        Ok(false)
    }

    /// When the next URL refresh is due, if any upstream reads a URL.
    pub(crate) fn refresh_at(&self) -> Option<Instant> {
        self.refresh_at
    }
}
