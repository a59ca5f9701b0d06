//! An immutable, fully prepared view of one catalog: what every call reads.
//!
//! Building a snapshot does all the work that can fail before any call sees
//! it — input/output/response validators compiled, jq programs compiled,
//! base URLs parsed, secrets resolved, HTTP clients built — so a snapshot
//! either exists whole or not at all, and the error names the upstream,
//! the tool and the field. [`crate::serving::reload`] keeps serving the previous
//! snapshot when a build fails.
//!
//! **Memory.** A catalog of a few thousand tools carries tens of megabytes
//! of JSON Schema; as `serde_json` trees, and again as compiled validators,
//! that is several hundred megabytes. So a snapshot keeps each distinct
//! schema once, as deflated compact JSON text ([`crate::call::schema_text::SchemaText`]), and
//! materialises the heavy forms per tool on first use ([`std::sync::OnceLock`]): the validators of a tool when it is first called, its
//! MCP `Tool` when it is first called or fetched by name. `tools/list`
//! builds its page from the text without caching it. Every schema is still
//! compiled once during [`Snapshot::build`] (then dropped), so a snapshot
//! with a bad schema never goes live.
//!
//! Upstream runtimes (connection pools, cached OAuth2 tokens) are reused
//! across snapshots while an upstream's settings and secrets are unchanged;
//! see [`RuntimeCache`].
//!
//! **Search.** The snapshot holds the catalog's search index
//! ([`catalog::search::SearchIndex`]), built with it: once per catalog
//! version, not per request, and over the same tools in the same order,
//! so a hit's position is the tool's position here ([`Snapshot::tool_at`]).
//! **Toolsets.** In Kubernetes mode a snapshot also carries the published
//! toolsets ([`Snapshot::select_toolsets`]): each tool records the toolsets
//! that serve it, decided once per snapshot by
//! [`catalog::toolset::Toolset::selects`] (the rule the operator's status
//! follows too), so an endpoint's membership check is a set lookup.
//!
//! **Access.** Each upstream's `access` policy is compiled with the
//! snapshot (a rule that does not compile fails the build, naming
//! `upstreams.<prefix>.access.rules[i]...`), and [`crate::serving::access`]
//! decides with them which tools one caller may see and call.
//!
//! Size: over 600 lines because this is building one snapshot: each
//! preparation step (validators, jq, clients, secrets) must succeed for the
//! whole to exist, and the file reads as that list.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use catalog::access::{AccessPolicy, CompiledAccess, Held, PolicySite};
use catalog::search::SearchIndex;
use catalog::toolset::{Toolset, ToolsetName};
use catalog::Catalog;
use reqwest::Url;
use sha2::{Digest, Sha256};

use crate::call::schema_text::SchemaPool;
use crate::call::tool::{build_tool, ToolEntry};
use crate::call::upstream::UpstreamRuntime;
use crate::config::{AuthConfig, GatewayConfig, SecretRef, UpstreamConfig};
use crate::secret::Resolve;
use crate::serving::listing_version::{ListingVersion, VersionHasher};

/// Everything the gateway serves at one moment.
pub struct Snapshot {
    /// The catalog's hash; empty for the initial, unloaded snapshot.
    pub hash: String,
    /// False only for the placeholder served before any catalog loaded.
    pub loaded: bool,
    /// Where the catalog came from, for `/status`.
    pub provenance: Arc<Provenance>,
    tools: Vec<Arc<ToolEntry>>,
    index: HashMap<String, usize>,
    prefixes: BTreeMap<String, Vec<usize>>,
    /// Per prefix; absent for upstreams without an `access` policy.
    access: HashMap<String, UpstreamAccess>,
    access_memo: AccessMemo,
    listing: ListingVersions,
    /// Over `tools`, in their order.
    search: Arc<SearchIndex>,
    toolsets: BTreeMap<ToolsetName, Arc<ServedToolset>>,
}

/// A toolset as this snapshot serves it.
#[derive(Debug, PartialEq, Eq)]
pub struct ServedToolset {
    /// As published: its upstreams' prefixes, filter, mode, pinned tools
    /// and meta-tool descriptions.
    pub def: Toolset,
    /// Tools it serves, before callers' access rules.
    pub tools: usize,
    /// What its endpoint presents in search mode (from `def`).
    pub search: catalog::listing::SearchSettings,
}

/// What each endpoint lists, as versions that `tools/list` cursors carry
/// ([`crate::mcp::pages`]).
#[derive(Clone, Default)]
struct ListingVersions {
    all: ListingVersion,
    by_prefix: HashMap<String, ListingVersion>,
}

impl ListingVersions {
    /// Hashes, upstream by upstream in catalog order, each tool as it is
    /// listed and each access policy.
    fn of(
        tools: &[Arc<ToolEntry>],
        order: &[String],
        prefixes: &BTreeMap<String, Vec<usize>>,
        access: &HashMap<String, UpstreamAccess>,
    ) -> ListingVersions {
        let mut all = VersionHasher::combined();
        let mut by_prefix = HashMap::with_capacity(order.len());
        for prefix in order {
            // NB: the policy as configured, serialised: its fields are
            // lists and strings, so the bytes are the same everywhere.
            let policy = access
                .get(prefix)
                .map(|a| serde_json::to_vec(&a.source).unwrap_or_default());
            let mut h = VersionHasher::upstream(prefix, policy.as_deref());
            for &i in prefixes.get(prefix).map(Vec::as_slice).unwrap_or_default() {
                let t = &tools[i];
                h.tool(&t.fingerprint, t.listed_bytes(), t.lists_output());
            }
            let v = h.finish();
            all.part(prefix, v);
            by_prefix.insert(prefix.clone(), v);
        }
        ListingVersions {
            all: all.finish(),
            by_prefix,
        }
    }
}

/// Callers' decisions a snapshot remembers, counted per policy: about
/// 100 bytes each. When full it starts over.
const MEMO_ENTRIES: usize = 1 << 16;

/// Costly access decisions made on one snapshot ([`crate::serving::access`]), by
/// caller (a digest of everything rules can read of it) and upstream.
/// Dropped with the snapshot, so a changed policy is never answered from
/// here.
#[derive(Default)]
pub(crate) struct AccessMemo {
    state: Mutex<MemoState>,
}

#[derive(Default)]
struct MemoState {
    callers: HashMap<[u8; 32], HashMap<String, Held>>,
    entries: usize,
}

impl AccessMemo {
    pub(crate) fn get(&self, caller: &[u8; 32], prefix: &str) -> Option<Held> {
        let state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        state.callers.get(caller)?.get(prefix).copied()
    }

    pub(crate) fn put(&self, caller: [u8; 32], decided: &[(String, Held)]) {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if state.entries + decided.len() > MEMO_ENTRIES {
            *state = MemoState::default();
        }
        state.entries += decided.len();
        let held = state.callers.entry(caller).or_default();
        held.extend(decided.iter().cloned());
    }
}

/// One upstream's policy, as configured and compiled.
#[derive(Clone)]
struct UpstreamAccess {
    /// Compared on reload: a changed policy changes what callers see.
    source: AccessPolicy,
    compiled: Arc<CompiledAccess>,
}

/// What a snapshot serves and since when, as `/status` reports it.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Provenance {
    /// The catalog hash; in Kubernetes mode the published index's hash
    /// (`catalog::publish::Index::hash`) of the versions actually served.
    pub catalog_hash: String,
    pub tools: usize,
    pub upstreams: Vec<UpstreamProvenance>,
    /// RFC 3339; empty before anything loaded.
    pub loaded_at: String,
}

/// One served upstream in [`Provenance`].
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct UpstreamProvenance {
    pub prefix: String,
    /// The catalog file, or the McpUpstream (`namespace/name`).
    pub source: String,
    /// The upstream catalog's hash, or in Kubernetes mode the published
    /// content hash (`IndexEntry::hash`).
    pub hash: String,
    pub tools: usize,
}

impl Provenance {
    /// The provenance of `catalog` loaded now from `source`.
    pub fn of(catalog: &Catalog, source: &str) -> Provenance {
        Provenance {
            catalog_hash: catalog.hash.clone(),
            tools: catalog.tool_count(),
            upstreams: catalog
                .upstreams
                .iter()
                .map(|u| UpstreamProvenance {
                    prefix: u.prefix.clone(),
                    source: source.to_string(),
                    hash: u.hash.clone(),
                    tools: u.tools.len(),
                })
                .collect(),
            loaded_at: now_rfc3339(),
        }
    }
}

/// The current time in RFC 3339 (UTC, seconds).
pub(crate) fn now_rfc3339() -> String {
    jiff::Timestamp::now()
        .round(jiff::Unit::Second)
        .map(|t| t.to_string())
        .unwrap_or_default()
}

/// A catalog that cannot be served, and where.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("upstream {upstream}{}: {field}: {message}", tool.as_ref().map(|t| format!(", tool {t}")).unwrap_or_default())]
pub struct SnapshotError {
    pub upstream: String,
    pub tool: Option<String>,
    pub field: String,
    pub message: String,
    /// For a tool name two upstreams produce: the prefix of the upstream
    /// that had it first (in catalog order).
    pub held_by: Option<String>,
}

/// Upstream runtimes by prefix, each with the key it was built from.
#[derive(Default)]
pub struct RuntimeCache {
    map: HashMap<String, (String, Arc<UpstreamRuntime>)>,
}

/// Settings that come from the command line rather than the config file.
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    /// `--base-url` per prefix; the config file's `baseUrl` wins over it,
    /// and it wins over the catalog's `defaultBaseUrl`.
    pub base_urls: HashMap<String, String>,
}

impl Snapshot {
    /// The placeholder served until a catalog loads: no tools, not ready.
    pub fn empty() -> Self {
        Snapshot {
            hash: String::new(),
            loaded: false,
            provenance: Arc::new(Provenance::default()),
            tools: Vec::new(),
            index: HashMap::new(),
            prefixes: BTreeMap::new(),
            access: HashMap::new(),
            access_memo: AccessMemo::default(),
            listing: ListingVersions::default(),
            search: Arc::new(SearchIndex::build(&Catalog::new(Vec::new()))),
            toolsets: BTreeMap::new(),
        }
    }

    /// Prepares `catalog`. On error nothing of the new snapshot is kept and
    /// `cache` is left as it was.
    pub fn build(
        catalog: &Catalog,
        config: &GatewayConfig,
        overrides: &Overrides,
        cache: &mut RuntimeCache,
    ) -> Result<Snapshot, SnapshotError> {
        let mut next_cache = HashMap::new();
        let mut tools = Vec::with_capacity(catalog.tool_count());
        let mut index = HashMap::with_capacity(catalog.tool_count());
        let mut prefixes: BTreeMap<String, Vec<usize>> = BTreeMap::new();
        let mut access = HashMap::new();
        let default_cfg = UpstreamConfig::default();
        let mut pool = SchemaPool::default();
        for up in &catalog.upstreams {
            let err = |field: &str, message: String| SnapshotError {
                upstream: up.prefix.clone(),
                tool: None,
                field: field.to_string(),
                message,
                held_by: None,
            };
            let cfg = config.upstreams.get(&up.prefix).unwrap_or(&default_cfg);
            let base = cfg
                .base_url
                .clone()
                .or_else(|| overrides.base_urls.get(&up.prefix).cloned())
                .or_else(|| up.default_base_url.clone())
                .ok_or_else(|| {
                    err(
                        "baseUrl",
                        "no base URL: set upstreams.<prefix>.baseUrl in the gateway config or --base-url".into(),
                    )
                })?;
            let base_url = Url::parse(&base).map_err(|e| err("baseUrl", format!("{base}: {e}")))?;
            let key = runtime_key(cfg, &base_url).map_err(|e| err(&e.field, e.message))?;
            let runtime = match cache.map.get(&up.prefix) {
                Some((k, rt)) if *k == key => rt.clone(),
                _ => Arc::new(
                    UpstreamRuntime::new(&up.prefix, base_url, cfg)
                        .map_err(|e| err(&e.field, e.message))?,
                ),
            };
            next_cache.insert(up.prefix.clone(), (key, runtime.clone()));
            if let Some(policy) = &cfg.access {
                let site = PolicySite::GatewayConfig {
                    prefix: up.prefix.clone(),
                };
                let compiled = policy
                    .compile(&site)
                    .map_err(|e| err(&e.field.to_string(), e.message))?;
                access.insert(
                    up.prefix.clone(),
                    UpstreamAccess {
                        source: policy.clone(),
                        compiled: Arc::new(compiled),
                    },
                );
            }
            let slot = prefixes.entry(up.prefix.clone()).or_default();
            let advertise_output = cfg.response_validation.advertises_output_schemas();
            for t in &up.tools {
                let base_start = up
                    .base_name(&t.name)
                    .map_or(0, |base| t.name.len() - base.len());
                let entry = build_tool(
                    t,
                    &up.prefix,
                    base_start,
                    runtime.clone(),
                    advertise_output,
                    &mut pool,
                )
                .map_err(|(field, message)| SnapshotError {
                    upstream: up.prefix.clone(),
                    tool: Some(t.name.clone()),
                    field,
                    message,
                    held_by: None,
                })?;
                if let Some(first) = index.insert(t.name.clone(), tools.len()) {
                    let held_by: &Arc<ToolEntry> = &tools[first];
                    return Err(SnapshotError {
                        upstream: up.prefix.clone(),
                        tool: Some(t.name.clone()),
                        field: "name".into(),
                        message: format!(
                            "duplicate tool name (upstream {} has it)",
                            held_by.prefix
                        ),
                        held_by: Some(held_by.prefix.to_string()),
                    });
                }
                slot.push(tools.len());
                tools.push(Arc::new(entry));
            }
        }
        let started = std::time::Instant::now();
        let search = SearchIndex::build(catalog);
        tracing::debug!(
            tools = search.len(),
            terms = search.term_count(),
            bytes = search.heap_bytes(),
            elapsed_ms = started.elapsed().as_secs_f64() * 1e3,
            "search index built"
        );
        cache.map = next_cache;
        let order: Vec<String> = catalog.upstreams.iter().map(|u| u.prefix.clone()).collect();
        let listing = ListingVersions::of(&tools, &order, &prefixes, &access);
        Ok(Snapshot {
            hash: catalog.hash.clone(),
            loaded: true,
            provenance: Arc::new(Provenance::of(catalog, "")),
            tools,
            index,
            prefixes,
            access,
            access_memo: AccessMemo::default(),
            listing,
            search: Arc::new(search),
            toolsets: BTreeMap::new(),
        })
    }

    /// Serves `toolsets` from this snapshot, built from `catalog` and not
    /// yet installed: records on each tool the toolsets that select it. A
    /// toolset naming a prefix this snapshot does not serve simply gets no
    /// tools of it.
    pub(crate) fn select_toolsets(&mut self, catalog: &Catalog, toolsets: Vec<Toolset>) {
        let mut served = BTreeMap::new();
        for def in toolsets {
            let mut tools = 0;
            for up in catalog
                .upstreams
                .iter()
                .filter(|u| def.upstreams.contains(&u.prefix))
            {
                for t in up.tools.iter().filter(|t| def.selects(up, t)) {
                    let Some(&i) = self.index.get(&t.name) else {
                        continue;
                    };
                    // NB: a snapshot being built holds the only reference
                    // to its tools; were one shared, that tool would stay
                    // out of the toolset (closed), never in another's.
                    if let Some(entry) = Arc::get_mut(&mut self.tools[i]) {
                        entry.add_to_toolset(def.id.clone());
                        tools += 1;
                    }
                }
            }
            let search = catalog::listing::SearchSettings {
                pinned: def.pinned.clone(),
                descriptions: def.descriptions.clone(),
            };
            served.insert(
                def.id.clone(),
                Arc::new(ServedToolset { def, tools, search }),
            );
        }
        self.toolsets = served;
    }

    /// A deep copy made of fresh allocations. NB: called after the parsed
    /// catalog is freed, it packs the snapshot's long-lived data together
    /// instead of leaving it scattered across the pages the parse used,
    /// which the allocator could then not give back to the OS.
    pub fn compacted(&self) -> Snapshot {
        let mut seen = HashMap::new();
        let tools: Vec<Arc<ToolEntry>> = self
            .tools
            .iter()
            .map(|t| Arc::new(t.compacted(&mut seen)))
            .collect();
        Snapshot {
            hash: self.hash.clone(),
            loaded: self.loaded,
            provenance: self.provenance.clone(),
            index: self.index.clone(),
            prefixes: self.prefixes.clone(),
            access: self.access.clone(),
            access_memo: AccessMemo::default(),
            listing: self.listing.clone(),
            search: self.search.clone(),
            toolsets: self.toolsets.clone(),
            tools,
        }
    }

    /// A served toolset, by name.
    pub fn toolset(&self, name: &ToolsetName) -> Option<&Arc<ServedToolset>> {
        self.toolsets.get(name)
    }

    /// Every served toolset, by name.
    pub fn toolsets(&self) -> impl Iterator<Item = &Arc<ServedToolset>> {
        self.toolsets.values()
    }

    pub fn tool(&self, name: &str) -> Option<&Arc<ToolEntry>> {
        self.index.get(name).map(|&i| &self.tools[i])
    }

    /// The tool at `position` in catalog order (what search hits name).
    pub(crate) fn tool_at(&self, position: usize) -> Option<&Arc<ToolEntry>> {
        self.tools.get(position)
    }

    /// The search index over this snapshot's tools.
    pub(crate) fn search_index(&self) -> &SearchIndex {
        &self.search
    }

    /// Tools visible at `scope` (`None`: all), in catalog order.
    pub fn tools<'a>(
        &'a self,
        scope: Option<&str>,
    ) -> Box<dyn Iterator<Item = &'a Arc<ToolEntry>> + 'a> {
        match scope {
            None => Box::new(self.tools.iter()),
            Some(p) => match self.prefixes.get(p) {
                Some(ix) => Box::new(ix.iter().map(move |&i| &self.tools[i])),
                None => Box::new(std::iter::empty()),
            },
        }
    }

    /// Tools visible at `scope` from catalog position `start` on, with
    /// their positions: where a `tools/list` page resumes.
    pub(crate) fn tools_from<'a>(
        &'a self,
        scope: Option<&str>,
        start: usize,
    ) -> Box<dyn Iterator<Item = (usize, &'a Arc<ToolEntry>)> + 'a> {
        match scope {
            None => Box::new(self.tools.iter().enumerate().skip(start)),
            Some(p) => match self.prefixes.get(p) {
                Some(ix) => {
                    let from = ix.partition_point(|&i| i < start);
                    Box::new(ix[from..].iter().map(move |&i| (i, &self.tools[i])))
                }
                None => Box::new(std::iter::empty()),
            },
        }
    }

    /// The version of what `scope` lists (`None`: every tool), for
    /// `tools/list` cursors.
    pub(crate) fn listing_version(&self, scope: Option<&str>) -> ListingVersion {
        match scope {
            None => self.listing.all,
            Some(p) => self.listing.by_prefix.get(p).copied().unwrap_or_default(),
        }
    }

    pub fn tool_count(&self) -> usize {
        self.tools.len()
    }

    pub(crate) fn has_prefix(&self, prefix: &str) -> bool {
        self.prefixes.contains_key(prefix)
    }

    pub fn prefixes(&self) -> impl Iterator<Item = &str> {
        self.prefixes.keys().map(String::as_str)
    }

    /// The compiled access policies of `scope`'s upstreams (`None`:
    /// all), by prefix; upstreams without a policy are not among them.
    pub(crate) fn policies<'a>(
        &'a self,
        scope: Option<&str>,
    ) -> Box<dyn Iterator<Item = (&'a str, &'a CompiledAccess)> + 'a> {
        let policy = |(p, a): (&'a String, &'a UpstreamAccess)| (p.as_str(), &*a.compiled);
        match scope {
            None => Box::new(self.access.iter().map(policy)),
            Some(prefix) => Box::new(self.access.get_key_value(prefix).map(policy).into_iter()),
        }
    }

    /// The compiled access policy of upstream `prefix`, if it has one.
    pub fn policy(&self, prefix: &str) -> Option<&CompiledAccess> {
        self.access.get(prefix).map(|a| &*a.compiled)
    }

    /// Costly access decisions made on this snapshot ([`crate::serving::access`]).
    pub(crate) fn access_memo(&self) -> &AccessMemo {
        &self.access_memo
    }

    /// Prefixes served by both snapshots whose access policy differs.
    pub(crate) fn access_changed(&self, old: &Snapshot) -> Vec<String> {
        self.prefixes()
            .filter(|p| old.has_prefix(p))
            .filter(|&p| {
                self.access.get(p).map(|a| &a.source) != old.access.get(p).map(|a| &a.source)
            })
            .map(str::to_string)
            .collect()
    }
}

/// What decides whether a runtime can be reused: its settings, its base
/// URL and the current values of its secrets (so a rotated Secret file
/// takes effect on the next reload).
fn runtime_key(cfg: &UpstreamConfig, base: &Url) -> Result<String, crate::secret::SecretError> {
    let mut h = Sha256::new();
    // Who may call is decided before the runtime is reached: a new
    // policy keeps the connection pool and cached tokens.
    let settings = UpstreamConfig {
        access: None,
        ..cfg.clone()
    };
    h.update(serde_json::to_vec(&settings).unwrap_or_default());
    h.update(base.as_str());
    let mut secret = |s: &SecretRef, f: &str| -> Result<(), crate::secret::SecretError> {
        h.update([0]);
        h.update(s.resolve(f)?);
        Ok(())
    };
    match &cfg.auth {
        AuthConfig::None => {}
        AuthConfig::Bearer { token } => secret(token, "auth.token")?,
        AuthConfig::ApiKey { value, .. } => secret(value, "auth.value")?,
        AuthConfig::Basic { username, password } => {
            secret(username, "auth.username")?;
            secret(password, "auth.password")?;
        }
        AuthConfig::Oauth2ClientCredentials {
            client_id,
            client_secret,
            ..
        }
        | AuthConfig::TokenExchange {
            client_id,
            client_secret,
            ..
        } => {
            secret(client_id, "auth.clientId")?;
            secret(client_secret, "auth.clientSecret")?;
        }
    }
    Ok(hex::encode(h.finalize()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ResponseValidation;
    use serde_json::json;

    /// A catalog written by hand, not by serde_json: odd number forms,
    /// escapes, non-ASCII text, a title, annotations, an output schema.
    const CATALOG: &str = r#"{"format": "toolgate.dev/catalog/v1", "hash": "", "upstreams": [{
        "prefix": "pets", "hash": "", "defaultBaseUrl": "http://127.0.0.1:9",
        "source": {"openapiVersion": "3.0.3", "operationCount": 2},
        "tools": [
          {"name": "pets__get", "title": "Get a \"pet\"", "description": "Fetch\n\tone pet: 🐕 \u0001 é",
           "inputSchema": {"type": "object", "properties": {"id": {"type": "number", "maximum": 1E3, "multipleOf": 0.50}}},
           "outputSchema": {"type" : "object"},
           "annotations": {"readOnlyHint": true, "title": "Get"},
           "operation": {"method": "GET", "path": "/pets", "pointer": "/paths/~1pets/get"},
           "plan": {"method": "GET", "path": "/pets", "params": []},
           "responseFormat": "auto"},
          {"name": "pets__bare", "inputSchema": {},
           "annotations": {},
           "operation": {"method": "GET", "path": "/bare", "pointer": "/paths/~1bare/get"},
           "plan": {"method": "GET", "path": "/bare", "params": []},
           "responseFormat": "auto"}
        ]}]}"#;

    #[test]
    fn the_access_memo_starts_over_when_full() {
        let memo = AccessMemo::default();
        let entry = |i: usize| vec![(format!("p{i}"), Held::default())];
        for i in 0..MEMO_ENTRIES {
            memo.put([1; 32], &entry(i));
        }
        assert!(memo.get(&[1; 32], "p0").is_some());
        memo.put([2; 32], &entry(0));
        assert!(memo.get(&[1; 32], "p0").is_none());
        assert!(memo.get(&[2; 32], "p0").is_some());
    }

    #[test]
    fn listed_bytes_are_the_bytes_a_listing_sends() {
        let catalog: Catalog = serde_json::from_str(CATALOG).expect("fixture parses");
        // Under `fail` the output schema is listed, under `warn` not:
        // both listings are counted exactly.
        for mode in [ResponseValidation::Fail, ResponseValidation::Warn] {
            let mut config = GatewayConfig::default();
            config.upstreams.insert(
                "pets".into(),
                UpstreamConfig {
                    response_validation: mode,
                    ..Default::default()
                },
            );
            let snapshot = Snapshot::build(
                &catalog,
                &config,
                &Overrides::default(),
                &mut RuntimeCache::default(),
            )
            .expect("fixture builds");
            assert_eq!(snapshot.tool_count(), 2);
            for t in snapshot.tools(None) {
                let sent = serde_json::to_vec(&t.mcp_for_listing()).unwrap();
                assert_eq!(
                    t.listed_bytes(),
                    sent.len(),
                    "{}",
                    String::from_utf8_lossy(&sent)
                );
            }
            let get = snapshot.tool("pets__get").unwrap();
            assert_eq!(get.lists_output(), mode == ResponseValidation::Fail);
        }
        let snapshot = Snapshot::build(
            &catalog,
            &GatewayConfig::default(),
            &Overrides::default(),
            &mut RuntimeCache::default(),
        )
        .expect("fixture builds");
        let get = snapshot.tool("pets__get").unwrap();
        assert_eq!(
            serde_json::to_value(get.mcp_for_listing()).unwrap()["inputSchema"]["properties"]["id"]
                ["maximum"],
            json!(1000.0)
        );
    }
}
