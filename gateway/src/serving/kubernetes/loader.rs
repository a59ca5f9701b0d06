//! Loading the published catalog. After a burst of changes has settled
//! ([`KubeOptions::debounce`](super::KubeOptions::debounce)) the index is read
//! and every upstream it names is assembled from its chunk ConfigMaps and
//! checked ([`catalog::publish::decode`]). The operator writes chunks before
//! the index, so a missing or mismatched chunk is normally transient: that
//! upstream keeps serving the version served before (a new upstream waits), the
//! others load, and the next ConfigMap event retries. The catalog and the
//! [`GatewayConfig`] built from the upstreams' runtime settings are installed
//! together with the published toolsets
//! ([`CatalogStore::install_published`]); sessions see
//! `notifications/tools/list_changed` as with a catalog file. A toolset
//! whose chunks are missing or do not check keeps its previous version, or
//! waits, like an upstream.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use catalog::publish::{
    catalog_of, decode, decode_toolset, Index, IndexEntry, PublishedUpstream, ToolsetEntry,
};
use catalog::toolset::{Toolset, ToolsetName};
use crds::publish::{CHUNK_KEY, INDEX_KEY, INDEX_NAME};
use k8s_openapi::api::core::v1::ConfigMap;

use crate::config::GatewayConfig;
use crate::observe::metrics::ReloadResult;
use crate::serving::reload::CatalogStore;
use crate::serving::snapshot::{now_rfc3339, Provenance, UpstreamProvenance};

/// One upstream as served: its index entry and the chunk objects it was
/// decoded from (kept, so it can be rebuilt after the operator has
/// replaced them).
#[derive(Clone)]
struct Served {
    entry: IndexEntry,
    chunks: Vec<Arc<ConfigMap>>,
}

impl Served {
    fn decode(&self) -> Result<PublishedUpstream, String> {
        let mut parts: Vec<&[u8]> = Vec::with_capacity(self.chunks.len());
        for (cm, r) in self.chunks.iter().zip(&self.entry.chunks) {
            match chunk_bytes(cm) {
                Some(b) => parts.push(b),
                None => {
                    return Err(format!(
                        "ConfigMap {} has no binaryData {CHUNK_KEY}",
                        r.name
                    ))
                }
            }
        }
        decode(&self.entry, &parts).map_err(|e| e.message)
    }
}

fn chunk_bytes(cm: &ConfigMap) -> Option<&[u8]> {
    cm.binary_data
        .as_ref()?
        .get(CHUNK_KEY)
        .map(|b| b.0.as_slice())
}

/// Turns the watched ConfigMaps into installs; remembers what is served.
pub(super) struct Loader {
    namespace: String,
    /// What is installed, by prefix.
    served: BTreeMap<String, Served>,
    /// Toolsets installed, by name, with the entry each was decoded from.
    toolsets: BTreeMap<ToolsetName, (ToolsetEntry, Toolset)>,
    /// Hash of the installed set (None before the first install).
    pub(super) installed: Option<String>,
    /// The last problem logged per prefix (or for the index), so a
    /// pending upstream is not logged again on every event.
    reported: BTreeMap<String, String>,
    /// Whether this sync met an error (not merely a chunk still on its
    /// way): it then counts as a failed load.
    failed: bool,
}

/// A candidate upstream: where it comes from and its content.
struct Candidate {
    served: Served,
    upstream: PublishedUpstream,
}

impl Loader {
    pub(super) fn new(namespace: String) -> Self {
        Loader {
            namespace,
            served: BTreeMap::new(),
            toolsets: BTreeMap::new(),
            installed: None,
            reported: BTreeMap::new(),
            failed: false,
        }
    }

    /// Logs `message` for `key` unless it is what was logged last time.
    fn report(&mut self, key: &str, message: String, error: bool) {
        self.failed |= error;
        if self.reported.get(key) == Some(&message) {
            return;
        }
        if error {
            tracing::error!(namespace = %self.namespace, "{message}");
        } else {
            tracing::warn!(namespace = %self.namespace, "{message}");
        }
        self.reported.insert(key.to_string(), message);
    }

    /// Loads what `objects` publish, if it differs from what is served.
    /// True while something published is not served as published (a retry
    /// may help).
    pub(super) fn sync(&mut self, objects: &[Arc<ConfigMap>], store: &CatalogStore) -> bool {
        self.failed = false;
        let before = self.installed.clone();
        let pending = self.sync_uncounted(objects, store);
        // A sync that changed nothing and met no error loaded nothing.
        if self.failed {
            store.count_reload(ReloadResult::Failure);
        } else if self.installed != before {
            store.count_reload(ReloadResult::Success);
        }
        pending
    }

    fn sync_uncounted(&mut self, objects: &[Arc<ConfigMap>], store: &CatalogStore) -> bool {
        let by_name: HashMap<&str, &Arc<ConfigMap>> = objects
            .iter()
            .filter_map(|cm| Some((cm.metadata.name.as_deref()?, cm)))
            .collect();
        let Some(index_cm) = by_name.get(INDEX_NAME) else {
            let what = if self.installed.is_some() {
                "; the last loaded catalog keeps serving"
            } else {
                "; not ready until it is published"
            };
            self.report(
                "",
                format!(
                    "no ConfigMap {INDEX_NAME} in namespace {}{what}",
                    self.namespace
                ),
                false,
            );
            // The index arriving is a watch event: no retry needed.
            return false;
        };
        // NB: a missing key is not an empty index: serving nothing because
        // of a malformed object would take every tool away.
        let Some(text) = index_cm.data.as_ref().and_then(|d| d.get(INDEX_KEY)) else {
            self.report(
                "",
                format!("ConfigMap {INDEX_NAME} has no data key {INDEX_KEY}; the last loaded catalog keeps serving"),
                true,
            );
            return false;
        };
        let index = match Index::parse(text) {
            Ok(i) => i,
            Err(e) => {
                self.report(
                    "",
                    format!("ConfigMap {INDEX_NAME} key {INDEX_KEY}: {e}; the last loaded catalog keeps serving"),
                    true,
                );
                return false;
            }
        };
        self.reported.remove("");

        let mut candidates: Vec<Candidate> = Vec::new();
        for entry in &index.upstreams {
            if let Some(c) = self.candidate(entry, &by_name) {
                candidates.push(c);
            }
        }
        let toolsets: Vec<(ToolsetEntry, Toolset)> = index
            .toolsets
            .iter()
            .filter_map(|e| self.toolset_candidate(e, &by_name))
            .collect();
        self.install(candidates, toolsets, store);
        index
            .upstreams
            .iter()
            .any(|e| self.served.get(&e.prefix).map(|s| &s.entry) != Some(e))
            || index
                .toolsets
                .iter()
                .any(|e| self.toolsets.get(&e.id).map(|(s, _)| s) != Some(e))
    }

    /// The version of `entry`'s toolset to serve: the published one if it
    /// is complete and valid, else the one served so far, else none.
    fn toolset_candidate(
        &mut self,
        entry: &ToolsetEntry,
        by_name: &HashMap<&str, &Arc<ConfigMap>>,
    ) -> Option<(ToolsetEntry, Toolset)> {
        let previous = self.toolsets.get(&entry.id).cloned();
        if let Some(p) = previous.as_ref().filter(|(e, _)| e == entry) {
            return Some(p.clone());
        }
        let key = format!("toolset {}", entry.id);
        let mut parts: Vec<&[u8]> = Vec::with_capacity(entry.chunks.len());
        let mut missing = Vec::new();
        for r in &entry.chunks {
            match by_name.get(r.name.as_str()).and_then(|cm| chunk_bytes(cm)) {
                Some(b) => parts.push(b),
                None => missing.push(r.name.as_str()),
            }
        }
        let fresh = if missing.is_empty() {
            decode_toolset(entry, &parts)
                .map_err(|e| e.to_string())
                .and_then(|t| {
                    t.check()
                        .map(|()| t)
                        .map_err(|e| format!("published toolset {}: {e}", entry.id))
                })
                .map_err(|m| (m, true))
        } else {
            Err((
                format!(
                    "toolset {}: chunk ConfigMap(s) {} not found (or without binaryData {CHUNK_KEY}); waiting for them",
                    entry.id,
                    missing.join(", ")
                ),
                false,
            ))
        };
        match fresh {
            Ok(t) => {
                self.reported.remove(&key);
                Some((entry.clone(), t))
            }
            Err((message, error)) => {
                let tail = if previous.is_some() {
                    "; the previous version keeps serving"
                } else {
                    "; not served until it loads"
                };
                self.report(&key, format!("{message}{tail}"), error);
                previous
            }
        }
    }

    /// The version of `entry`'s upstream to serve: the published one if it
    /// is complete and valid, else the one served so far, else none.
    fn candidate(
        &mut self,
        entry: &IndexEntry,
        by_name: &HashMap<&str, &Arc<ConfigMap>>,
    ) -> Option<Candidate> {
        let prefix = entry.prefix.as_str();
        let previous = self.served.get(prefix).cloned();
        let fresh = match &previous {
            // Unchanged: no need for the (possibly already replaced) objects.
            Some(p) if p.entry == *entry => Ok(p.clone()),
            _ => {
                let missing: Vec<&str> = entry
                    .chunks
                    .iter()
                    .filter(|r| {
                        by_name
                            .get(r.name.as_str())
                            .and_then(|cm| chunk_bytes(cm))
                            .is_none()
                    })
                    .map(|r| r.name.as_str())
                    .collect();
                if missing.is_empty() {
                    Ok(Served {
                        entry: entry.clone(),
                        chunks: entry
                            .chunks
                            .iter()
                            .filter_map(|r| by_name.get(r.name.as_str()).map(|cm| Arc::clone(cm)))
                            .collect(),
                    })
                } else {
                    Err((
                        format!(
                            "upstream {prefix} ({}): chunk ConfigMap(s) {} not found (or without binaryData {CHUNK_KEY}); waiting for them",
                            entry.source,
                            missing.join(", ")
                        ),
                        false,
                    ))
                }
            }
        };
        let decoded = fresh.and_then(|s| match s.decode() {
            Ok(u) => Ok((s, u)),
            Err(e) => Err((
                format!(
                    "upstream {prefix} ({}) from ConfigMap(s) {}: {e}",
                    entry.source,
                    chunk_list(entry)
                ),
                true,
            )),
        });
        match decoded {
            Ok((served, upstream)) => {
                self.reported.remove(prefix);
                Some(Candidate { served, upstream })
            }
            Err((message, error)) => {
                let fallback = previous.and_then(|p| p.decode().ok().map(|u| (p, u)));
                let tail = if fallback.is_some() {
                    "; the previous version keeps serving"
                } else {
                    "; not served until it loads"
                };
                self.report(prefix, format!("{message}{tail}"), error);
                fallback.map(|(served, upstream)| Candidate { served, upstream })
            }
        }
    }

    /// Installs `candidates` unless that is what is served. An upstream the
    /// gateway cannot serve (say, its credentials file is missing) falls
    /// back to its previous version or is left out; the others still load.
    fn install(
        &mut self,
        mut candidates: Vec<Candidate>,
        toolsets: Vec<(ToolsetEntry, Toolset)>,
        store: &CatalogStore,
    ) {
        // Each round removes or replaces one upstream, so this ends.
        for _ in 0..=candidates.len() * 2 + 1 {
            let hash = served_hash(&candidates, &toolsets);
            if self.installed.as_deref() == Some(hash.as_str()) {
                return;
            }
            let upstreams: Vec<PublishedUpstream> =
                candidates.iter().map(|c| c.upstream.clone()).collect();
            let config = GatewayConfig {
                upstreams: upstreams
                    .iter()
                    .map(|u| (u.catalog.prefix.clone(), u.runtime.clone()))
                    .collect(),
            };
            let provenance = Provenance {
                catalog_hash: hash.clone(),
                tools: upstreams.iter().map(|u| u.catalog.tools.len()).sum(),
                upstreams: candidates
                    .iter()
                    .map(|c| UpstreamProvenance {
                        prefix: c.served.entry.prefix.clone(),
                        source: c.upstream.source.clone(),
                        hash: c.served.entry.hash.clone(),
                        tools: c.upstream.catalog.tools.len(),
                    })
                    .collect(),
                loaded_at: now_rfc3339(),
            };
            let catalog = catalog_of(&upstreams);
            drop(upstreams);
            let defs = toolsets.iter().map(|(_, t)| t.clone()).collect();
            match store.install_published(catalog, config, defs, provenance) {
                Ok(d) => {
                    tracing::info!(
                        namespace = %self.namespace,
                        catalog_hash = %hash,
                        upstreams = candidates.len(),
                        toolsets = toolsets.len(),
                        added = d.added.len(),
                        removed = d.removed.len(),
                        modified = d.modified.len(),
                        "published catalog loaded"
                    );
                    for c in &candidates {
                        self.reported
                            .remove(&format!("build {}", c.served.entry.prefix));
                    }
                    self.served = candidates
                        .into_iter()
                        .map(|c| (c.served.entry.prefix.clone(), c.served))
                        .collect();
                    self.toolsets = toolsets
                        .into_iter()
                        .map(|(e, t)| (e.id.clone(), (e, t)))
                        .collect();
                    self.installed = Some(hash);
                    return;
                }
                Err(e) => {
                    // A tool name two upstreams produce stays with the one
                    // already serving it: a newcomer never takes over
                    // another's tool, whatever the catalog order.
                    let out = match &e.held_by {
                        Some(first)
                            if !self.served.contains_key(first)
                                && self.served.contains_key(&e.upstream) =>
                        {
                            first.as_str()
                        }
                        _ => e.upstream.as_str(),
                    };
                    let Some(i) = candidates.iter().position(|c| c.served.entry.prefix == out)
                    else {
                        tracing::error!(namespace = %self.namespace, error = %e, "published catalog not loaded; the previous catalog keeps serving");
                        self.failed = true;
                        return;
                    };
                    let prefix = out.to_string();
                    let why = if out == e.upstream {
                        e.to_string()
                    } else {
                        format!(
                            "tool {} is already served by upstream {}",
                            e.tool.as_deref().unwrap_or_default(),
                            e.upstream
                        )
                    };
                    let previous = self
                        .served
                        .get(&prefix)
                        .filter(|p| p.entry != candidates[i].served.entry)
                        .cloned()
                        .and_then(|p| p.decode().ok().map(|u| (p, u)));
                    let tail = if previous.is_some() {
                        "; the previous version keeps serving"
                    } else {
                        "; not served until it loads"
                    };
                    self.report(
                        &format!("build {prefix}"),
                        format!(
                            "upstream {prefix} ({}) cannot be served: {why}{tail}",
                            candidates[i].upstream.source
                        ),
                        true,
                    );
                    match previous {
                        Some((served, upstream)) => candidates[i] = Candidate { served, upstream },
                        None => {
                            candidates.remove(i);
                        }
                    }
                }
            }
        }
    }
}

/// [`Index::hash`] of the entries in `candidates` and `toolsets`.
fn served_hash(candidates: &[Candidate], toolsets: &[(ToolsetEntry, Toolset)]) -> String {
    Index {
        format: catalog::publish::PUBLISHED_FORMAT.to_string(),
        upstreams: candidates.iter().map(|c| c.served.entry.clone()).collect(),
        toolsets: toolsets.iter().map(|(e, _)| e.clone()).collect(),
    }
    .hash()
}

fn chunk_list(entry: &IndexEntry) -> String {
    entry
        .chunks
        .iter()
        .map(|c| c.name.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}
