//! An immutable, fully prepared view of one catalog: what every call reads.
//!
//! Building a snapshot does all the work that can fail before any call sees
//! it — input/output/response validators compiled, jq programs compiled,
//! base URLs parsed, secrets resolved, HTTP clients built — so a snapshot
//! either exists whole or not at all, and the error names the upstream,
//! the tool and the field. [`crate::reload`] keeps serving the previous
//! snapshot when a build fails.
//!
//! **Memory.** A catalog of a few thousand tools carries tens of megabytes
//! of JSON Schema; as `serde_json` trees, and again as compiled validators,
//! that is several hundred megabytes. So a snapshot keeps each distinct
//! schema once, as deflated compact JSON text ([`SchemaText`]), and
//! materialises the heavy forms per tool on first use ([`OnceLock`]): the validators of a tool when it is first called, its
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
//! `upstreams.<prefix>.access.rules[i]...`), and [`crate::access`]
//! decides with them which tools one caller may see and call.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex, OnceLock};

use catalog::access::{AccessPolicy, CompiledAccess, Held, PolicySite, ToolInfo};
use catalog::search::SearchIndex;
use catalog::toolset::{Toolset, ToolsetName};
use catalog::transform::JqProgram;
use catalog::{Catalog, OutputWrap};
use jsonschema::Validator;
use reqwest::Url;
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::config::{AuthConfig, GatewayConfig, Resolve, SecretRef, UpstreamConfig};
use crate::listing_version::{ListingVersion, VersionHasher};
use crate::rawjson::RawJson;
use crate::schema_text::{SchemaPool, SchemaText};
use crate::upstream::UpstreamRuntime;
use crate::validate;

/// One tool, ready to call.
pub struct ToolEntry {
    /// The catalog definition (plan, formats, transforms, annotations),
    /// with its schemas removed: they live in the compact fields below.
    pub def: catalog::Tool,
    pub prefix: String,
    pub upstream: Arc<UpstreamRuntime>,
    input_json: SchemaText,
    output_json: Option<SchemaText>,
    /// Whether `tools/list` shows `output_json`: then every success result
    /// carries `structuredContent` matching it ([`crate::output_schema`]).
    lists_output: bool,
    /// Success response checks by status key (`200`, `2XX`, `default`).
    responses: Vec<(String, ResponseSource)>,
    input: OnceLock<Result<Validator, String>>,
    /// Output and response validators read response text in place.
    output: OnceLock<Option<Compiled>>,
    response_validators: OnceLock<Vec<Option<Compiled>>>,
    mcp: OnceLock<rmcp::model::Tool>,
    pub request_jq: Option<JqProgram>,
    pub response_jq: Option<JqProgram>,
    pub error_jq: Option<JqProgram>,
    /// sha256 of the tool's catalog JSON: decides "modified" on reload.
    pub fingerprint: String,
    /// Where the name without `{prefix}{separator}` starts: what access
    /// rules match.
    base_start: usize,
    /// JSON bytes of the tool in a `tools/list` result.
    listed_bytes: usize,
    /// The toolsets that serve this tool.
    toolsets: HashSet<ToolsetName>,
}

/// A response validator, or why its schema does not compile.
type Compiled = Result<Validator<RawJson>, String>;

enum ResponseSource {
    /// Its own schema.
    Schema(SchemaText),
    /// The schema behind `outputSchema`: validate the wrapped body with
    /// the output validator (keeps `$defs` references intact).
    Output,
}

/// How a success response body is validated.
pub enum ResponseCheck<'a> {
    Schema(&'a Validator<RawJson>),
    /// Validate `wrap(body)` with this (the output) validator.
    Output(&'a Validator<RawJson>),
}

fn compile_text(text: &SchemaText) -> Result<Validator, String> {
    validate::compile(&text.value()?)
}

fn compile_raw_text(text: &SchemaText) -> Result<Validator<RawJson>, String> {
    validate::compile_raw(&text.value()?)
}

impl ToolEntry {
    /// Whether the toolset `name` serves this tool.
    pub fn in_toolset(&self, name: &ToolsetName) -> bool {
        self.toolsets.contains(name)
    }

    /// What access rules know of this tool.
    pub fn access_info(&self) -> ToolInfo<'_> {
        ToolInfo {
            base_name: self
                .def
                .name
                .get(self.base_start..)
                .unwrap_or(&self.def.name),
            read_only: self.def.annotations.read_only_hint == Some(true),
        }
    }

    /// The input validator. `None` only if the schema stopped compiling
    /// between the snapshot build and now, which cannot happen; callers
    /// treat it as a defect rather than panic.
    pub fn input(&self) -> Option<&Validator> {
        self.input
            .get_or_init(|| compile_text(&self.input_json))
            .as_ref()
            .ok()
    }

    /// The outputSchema validator, if the tool has an output schema.
    pub fn output(&self) -> Option<&Validator<RawJson>> {
        self.output
            .get_or_init(|| self.output_json.as_ref().map(compile_raw_text))
            .as_ref()
            .and_then(|r| r.as_ref().ok())
    }

    /// The response check for `status`: exact, then `2XX`-style, then
    /// `default`.
    pub fn response_check(&self, status: u16) -> Option<ResponseCheck<'_>> {
        let exact = status.to_string();
        let range = format!("{}XX", status / 100);
        let i = self
            .responses
            .iter()
            .position(|(k, _)| *k == exact)
            .or_else(|| {
                self.responses
                    .iter()
                    .position(|(k, _)| k.eq_ignore_ascii_case(&range))
            })
            .or_else(|| self.responses.iter().position(|(k, _)| k == "default"))?;
        match &self.responses[i].1 {
            ResponseSource::Output => self.output().map(ResponseCheck::Output),
            ResponseSource::Schema(_) => {
                let all = self.response_validators.get_or_init(|| {
                    self.responses
                        .iter()
                        .map(|(_, src)| match src {
                            ResponseSource::Schema(text) => Some(compile_raw_text(text)),
                            ResponseSource::Output => None,
                        })
                        .collect()
                });
                all.get(i)?
                    .as_ref()?
                    .as_ref()
                    .ok()
                    .map(ResponseCheck::Schema)
            }
        }
    }

    /// The MCP view, built from the compact schemas. Cached, since rmcp
    /// asks for it on every call (`get_tool`).
    pub fn mcp(&self) -> &rmcp::model::Tool {
        self.mcp.get_or_init(|| self.build_mcp())
    }

    /// JSON bytes of [`Self::mcp`] as `tools/list` sends it, counted when
    /// the snapshot was built: what pages are measured with.
    pub fn listed_bytes(&self) -> usize {
        self.listed_bytes
    }

    /// Length of the tool's listed schemas as JSON text: what its MCP
    /// view costs to build and send.
    pub fn schema_len(&self) -> usize {
        self.input_json.text_len() + self.listed_output().map_or(0, SchemaText::text_len)
    }

    /// Whether the tool lists its outputSchema, promising `structuredContent`
    /// that matches it on every success result.
    pub fn lists_output(&self) -> bool {
        self.lists_output
    }

    fn listed_output(&self) -> Option<&SchemaText> {
        self.output_json.as_ref().filter(|_| self.lists_output)
    }

    /// The MCP view for a listing: the cached one if the tool was used,
    /// else a fresh one that is not kept (listings must not grow memory).
    pub fn mcp_for_listing(&self) -> rmcp::model::Tool {
        match self.mcp.get() {
            Some(t) => t.clone(),
            None => self.build_mcp(),
        }
    }

    fn build_mcp(&self) -> rmcp::model::Tool {
        let t = &self.def;
        let mut mcp = rmcp::model::Tool::new_with_raw(
            t.name.clone(),
            t.description.clone().map(Cow::Owned),
            Arc::new(self.input_json.object()),
        );
        if let Some(title) = &t.title {
            mcp = mcp.with_title(title.clone());
        }
        if let Some(os) = self.listed_output() {
            mcp = mcp.with_raw_output_schema(Arc::new(os.object()));
        }
        let a = &t.annotations;
        if a.title.is_some()
            || a.read_only_hint.is_some()
            || a.destructive_hint.is_some()
            || a.idempotent_hint.is_some()
            || a.open_world_hint.is_some()
        {
            mcp = mcp.with_annotations(rmcp::model::ToolAnnotations::from_raw(
                a.title.clone(),
                a.read_only_hint,
                a.destructive_hint,
                a.idempotent_hint,
                a.open_world_hint,
            ));
        }
        mcp
    }

    /// The structured form of `body`: itself, or `{"result": body}`.
    pub fn wrap(&self, body: Value) -> Value {
        match self.def.output_wrap {
            Some(OutputWrap::Result) => {
                let mut m = serde_json::Map::new();
                m.insert("result".into(), body);
                Value::Object(m)
            }
            _ => body,
        }
    }
}

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
/// ([`crate::pages`]).
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
                h.tool(&t.fingerprint, t.listed_bytes, t.lists_output());
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

/// Costly access decisions made on one snapshot ([`crate::access`]), by
/// caller (a digest of everything rules can read of it) and upstream.
/// Dropped with the snapshot, so a changed policy is never answered from
/// here.
#[derive(Default)]
pub struct AccessMemo {
    state: Mutex<MemoState>,
}

#[derive(Default)]
struct MemoState {
    callers: HashMap<[u8; 32], HashMap<String, Held>>,
    entries: usize,
}

impl AccessMemo {
    pub fn get(&self, caller: &[u8; 32], prefix: &str) -> Option<Held> {
        let state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        state.callers.get(caller)?.get(prefix).copied()
    }

    pub fn put(&self, caller: [u8; 32], decided: &[(String, Held)]) {
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
pub fn now_rfc3339() -> String {
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
    pub fn select_toolsets(&mut self, catalog: &Catalog, toolsets: Vec<Toolset>) {
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
                        entry.toolsets.insert(def.id.clone());
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
            .map(|t| {
                Arc::new(ToolEntry {
                    def: t.def.clone(),
                    prefix: t.prefix.clone(),
                    upstream: t.upstream.clone(),
                    input_json: t.input_json.copied(&mut seen),
                    output_json: t.output_json.as_ref().map(|s| s.copied(&mut seen)),
                    lists_output: t.lists_output,
                    responses: t
                        .responses
                        .iter()
                        .map(|(k, s)| {
                            let s = match s {
                                ResponseSource::Schema(text) => {
                                    ResponseSource::Schema(text.copied(&mut seen))
                                }
                                ResponseSource::Output => ResponseSource::Output,
                            };
                            (k.clone(), s)
                        })
                        .collect(),
                    input: OnceLock::new(),
                    output: OnceLock::new(),
                    response_validators: OnceLock::new(),
                    mcp: OnceLock::new(),
                    request_jq: t.request_jq.clone(),
                    response_jq: t.response_jq.clone(),
                    error_jq: t.error_jq.clone(),
                    fingerprint: t.fingerprint.clone(),
                    base_start: t.base_start,
                    listed_bytes: t.listed_bytes,
                    toolsets: t.toolsets.clone(),
                })
            })
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
    pub fn tool_at(&self, position: usize) -> Option<&Arc<ToolEntry>> {
        self.tools.get(position)
    }

    /// The search index over this snapshot's tools.
    pub fn search_index(&self) -> &SearchIndex {
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
    pub fn tools_from<'a>(
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
    pub fn listing_version(&self, scope: Option<&str>) -> ListingVersion {
        match scope {
            None => self.listing.all,
            Some(p) => self.listing.by_prefix.get(p).copied().unwrap_or_default(),
        }
    }

    pub fn tool_count(&self) -> usize {
        self.tools.len()
    }

    pub fn has_prefix(&self, prefix: &str) -> bool {
        self.prefixes.contains_key(prefix)
    }

    pub fn prefixes(&self) -> impl Iterator<Item = &str> {
        self.prefixes.keys().map(String::as_str)
    }

    /// The compiled access policies of `scope`'s upstreams (`None`:
    /// all), by prefix; upstreams without a policy are not among them.
    pub fn policies<'a>(
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

    /// Costly access decisions made on this snapshot ([`crate::access`]).
    pub fn access_memo(&self) -> &AccessMemo {
        &self.access_memo
    }

    /// Prefixes served by both snapshots whose access policy differs.
    pub fn access_changed(&self, old: &Snapshot) -> Vec<String> {
        self.prefixes()
            .filter(|p| old.has_prefix(p))
            .filter(|&p| {
                self.access.get(p).map(|a| &a.source) != old.access.get(p).map(|a| &a.source)
            })
            .map(str::to_string)
            .collect()
    }
}

fn build_tool(
    t: &catalog::Tool,
    prefix: &str,
    base_start: usize,
    upstream: Arc<UpstreamRuntime>,
    advertise_output: bool,
    pool: &mut SchemaPool,
) -> Result<ToolEntry, (String, String)> {
    fn e(field: &str) -> impl Fn(String) -> (String, String) + '_ {
        move |m| (field.to_string(), m)
    }
    // Each schema is compiled here once, to refuse a bad catalog as a
    // whole, and then dropped; see the module docs.
    // MCP wants object schemas; a boolean schema cannot be listed.
    let object = |s: &catalog::Schema, field: &str| {
        if s.is_object() {
            Ok(())
        } else {
            Err((
                field.to_string(),
                format!("must be a JSON object, not {s:?}"),
            ))
        }
    };
    object(&t.input_schema, "inputSchema")?;
    // NB: kept as serde_json writes the parsed value, which is what a
    // listing sends (a catalog file may have been written otherwise, e.g.
    // `1E3`), so that `listed_bytes` is exact.
    let input = t.input_schema.to_value();
    validate::compile(&input).map_err(e("inputSchema"))?;
    let input_json = pool.intern(input.to_string());
    drop(input);
    let lists_output = catalog::listing::lists_output_schema(t, advertise_output);
    let output_json = match &t.output_schema {
        Some(s) => {
            object(s, "outputSchema")?;
            let value = s.to_value();
            validate::compile_raw(&value).map_err(e("outputSchema"))?;
            // Listed and checked alike; without `format`, which the
            // validator does not assert either.
            let text = match lists_output {
                true => crate::output_schema::listed(value).to_string(),
                false => value.to_string(),
            };
            Some(pool.intern(text))
        }
        None => None,
    };
    let mut responses = Vec::new();
    for r in &t.responses {
        let source = match &r.schema {
            Some(s) => {
                validate::compile_raw(&s.to_value())
                    .map_err(e(&format!("responses[{}].schema", r.status)))?;
                ResponseSource::Schema(pool.intern(s.as_str().to_string()))
            }
            None if output_json.is_some() => ResponseSource::Output,
            None => continue,
        };
        responses.push((r.status.clone(), source));
    }
    let jq = |src: &Option<String>, field: &str| -> Result<Option<JqProgram>, (String, String)> {
        src.as_deref()
            .map(|s| JqProgram::compile(s).map_err(|err| (field.to_string(), err.message)))
            .transpose()
    };
    // What the tool lists changes with `lists_output` too (a config
    // switched to `fail`): that is a modified tool.
    let mut fingerprint = Sha256::new();
    fingerprint.update(serde_json::to_vec(t).unwrap_or_default());
    fingerprint.update([u8::from(lists_output)]);
    let fingerprint = hex(&fingerprint.finalize());
    // The schemas live in the compact fields above; not twice.
    let mut def = catalog::Tool {
        name: t.name.clone(),
        title: t.title.clone(),
        description: t.description.clone(),
        input_schema: catalog::Schema::default(),
        // Placeholders while the listing is measured.
        output_schema: output_json
            .as_ref()
            .filter(|_| lists_output)
            .map(|_| catalog::Schema::default()),
        annotations: t.annotations.clone(),
        operation: t.operation.clone(),
        plan: t.plan.clone(),
        transforms: t.transforms.clone(),
        response_format: t.response_format,
        output_wrap: t.output_wrap,
        responses: Vec::new(),
        auth_required: t.auth_required,
        toolsets: t.toolsets.clone(),
    };
    let listed_bytes = listed_bytes(
        &def,
        &input_json,
        output_json.as_ref().filter(|_| lists_output),
    );
    def.output_schema = None;
    Ok(ToolEntry {
        def,
        prefix: prefix.to_string(),
        upstream,
        input_json,
        output_json,
        lists_output,
        responses,
        input: OnceLock::new(),
        output: OnceLock::new(),
        response_validators: OnceLock::new(),
        mcp: OnceLock::new(),
        request_jq: jq(&t.transforms.request, "transforms.request")?,
        response_jq: jq(&t.transforms.response, "transforms.response")?,
        error_jq: jq(&t.transforms.error, "transforms.error")?,
        fingerprint,
        base_start,
        listed_bytes,
        toolsets: HashSet::new(),
    })
}

/// JSON bytes of a tool as [`ToolEntry::build_mcp`] lists it: `def`
/// with placeholder schemas (`{}`, and an output schema where one is
/// advertised), measured by [`catalog::listing::tool_bytes`], with the
/// placeholders' length swapped for that of the texts the listing is
/// built from.
fn listed_bytes(def: &catalog::Tool, input: &SchemaText, output: Option<&SchemaText>) -> usize {
    let placeholder = catalog::Schema::default().as_str().len();
    let counted = catalog::listing::tool_bytes(def, output.is_some());
    let counted = usize::try_from(counted).unwrap_or(usize::MAX);
    let schemas = input.text_len() + output.map_or(0, SchemaText::text_len);
    let placeholders = placeholder * (1 + usize::from(output.is_some()));
    (counted + schemas).saturating_sub(placeholders)
}

/// What decides whether a runtime can be reused: its settings, its base
/// URL and the current values of its secrets (so a rotated Secret file
/// takes effect on the next reload).
fn runtime_key(cfg: &UpstreamConfig, base: &Url) -> Result<String, crate::config::SecretError> {
    let mut h = Sha256::new();
    // Who may call is decided before the runtime is reached: a new
    // policy keeps the connection pool and cached tokens.
    let settings = UpstreamConfig {
        access: None,
        ..cfg.clone()
    };
    h.update(serde_json::to_vec(&settings).unwrap_or_default());
    h.update(base.as_str());
    let mut secret = |s: &SecretRef, f: &str| -> Result<(), crate::config::SecretError> {
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
    Ok(hex(&h.finalize()))
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    s
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
