//! `McpToolset`: a curated MCP endpoint, `/mcp/toolsets/{namespace}/{name}`,
//! serving chosen tools of chosen McpUpstreams, e.g. the read-only tools of
//! a team's APIs for one agent.
//!
//! Upstreams are selected by name or by label, in the toolset's namespace
//! or in others the operator watches. Tool names keep their upstream's
//! prefix, so a selected upstream contributes only while it holds its
//! prefix and its catalog is published (the same rule that decides what
//! `/mcp` serves). Access rules of each upstream still apply inside a
//! toolset: a toolset narrows what an endpoint serves, never widens what a
//! caller may call.
//!
//! Field comments follow the same optional/default convention as
//! [`crate::upstream`].

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, LabelSelector};
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use catalog::listing::ListMode;
use catalog::toolset::{MetaToolDescriptions, ToolFilter, MAX_PINNED, MAX_TOOL_NAME_LEN};

use crate::common::{conditions_schema, OBJECT_NAME_PATTERN};
use crate::upstream::ListingSize;

/// Schema `pattern` of namespace names (an RFC 1123 label).
pub const NAMESPACE_PATTERN: &str = "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$";

/// Most entries in `spec.upstreams`.
pub const MAX_UPSTREAM_SELECTIONS: usize = 32;
/// Most namespaces one `spec.upstreams` entry names.
pub const MAX_SELECTOR_NAMESPACES: usize = 32;
/// At most this many entries in `status.upstreams` (the schema's
/// `maxItems`, and [`catalog::toolset::MAX_UPSTREAMS`]).
pub const MAX_STATUS_UPSTREAMS: usize = catalog::toolset::MAX_UPSTREAMS;

/// A curated MCP endpoint over chosen tools of chosen McpUpstreams.
// NB: clippy reads the repeated `type_ = "string"` of the printer columns
// inside `#[kube(...)]` as duplicated attributes; they are separate columns.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "toolgate.dev",
    version = "v1alpha1",
    kind = "McpToolset",
    plural = "mcptoolsets",
    namespaced,
    shortname = "mcpt",
    category = "mcp",
    status = "McpToolsetStatus",
    derive = "PartialEq",
    doc = "A curated MCP endpoint, served at /mcp/toolsets/{namespace}/{name}, over chosen tools of chosen McpUpstreams.",
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = r#".status.conditions[?(@.type=="Ready")].status"#
    ),
    printcolumn(name = "Mode", type_ = "string", json_path = ".spec.mode"),
    printcolumn(name = "Tools", type_ = "integer", json_path = ".status.toolCount"),
    printcolumn(
        name = "Tokens",
        type_ = "integer",
        description = "Estimated tokens of a tools/list of every tool of the toolset (bytes / 4)",
        json_path = ".status.listing.tokens"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct McpToolsetSpec {
    /// Which McpUpstreams the toolset takes tools from: each entry names
    /// one (`name`) or selects by label (`selector`), in `namespaces`
    /// (default: the toolset's own; others must be watched by the
    /// operator). An upstream contributes only while it holds its
    /// `toolPrefix` and its catalog is published. Required; 1 to 32
    /// entries.
    #[schemars(length(min = 1, max = MAX_UPSTREAM_SELECTIONS))]
    pub upstreams: Vec<UpstreamSelection>,

    /// Which tools of those upstreams are served: a tool must pass every
    /// filter given. Optional; absent means every tool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<ToolFilter>,

    /// How the endpoint lists tools: `all` (every tool of the toolset in
    /// `tools/list`) or `search` (a few meta-tools to search, describe and
    /// call the toolset's tools, plus `pinned`). Defaults to `all`.
    #[serde(default)]
    #[schemars(schema_with = "mode_schema")]
    pub mode: ListMode,

    /// Full tool names (with prefix, e.g. `pets__get_pet`) listed directly
    /// beside the meta-tools in `search` mode; ignored in `all` mode. A
    /// name that is not a tool of the toolset is ignored (and named in the
    /// `Ready` message). Optional; at most 32.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(
        length(max = MAX_PINNED),
        inner(length(min = 1, max = MAX_TOOL_NAME_LEN))
    )]
    pub pinned: Vec<String>,

    /// Descriptions of the meta-tools in `search` mode, each replacing the
    /// gateway's default, e.g. to tell an agent what this toolset is for.
    /// Optional; absent means the defaults.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub meta_tool_descriptions: Option<MetaToolDescriptions>,
}

fn mode_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "string",
        "enum": ["all", "search"],
        "default": "all",
    })
}

/// One or more McpUpstreams: exactly one of `name` and `selector`, in
/// `namespaces`.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[x_kube(validation = (
    "has(self.name) != has(self.selector)",
    "exactly one of spec.upstreams[].name or spec.upstreams[].selector must be set in each entry"
))]
#[serde(rename_all = "camelCase")]
pub struct UpstreamSelection {
    /// Name of an McpUpstream. Exactly one of `name` and `selector`.
    /// Optional; omitted when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253), pattern(OBJECT_NAME_PATTERN))]
    pub name: Option<String>,

    /// Every McpUpstream whose labels match (`matchLabels`,
    /// `matchExpressions`, as in a Deployment's selector; `{}` matches
    /// every upstream). Exactly one of `name` and `selector`. Optional;
    /// omitted when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<LabelSelector>,

    /// Namespaces to look in, for `name` or `selector`. The operator reads
    /// only namespaces it watches. Optional; absent means the toolset's
    /// namespace.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(
        length(max = MAX_SELECTOR_NAMESPACES),
        inner(length(min = 1, max = 63), pattern(NAMESPACE_PATTERN))
    )]
    pub namespaces: Vec<String>,
}

/// What the operator last resolved and published for this toolset.
/// Rebuilt on every reconcile and written with server-side apply.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct McpToolsetStatus {
    /// The `metadata.generation` this status describes. Optional; omitted
    /// when unset (not reconciled yet).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,

    /// `Ready`: `True` with reason `Resolved` when the toolset is
    /// published and serves at least one tool. Otherwise `False`, with
    /// reason `NoUpstreamsMatched` (no selected McpUpstream holds its
    /// prefix and is published: the message names what the selection
    /// matched and why each contributes nothing), `NoToolsMatched` (its
    /// upstreams serve tools, but none passes `spec.tools`) or
    /// `InvalidSettings` (a field breaks a bound; the message names it, and
    /// the last published version keeps serving). A toolset that matches
    /// nothing is still published: its endpoint answers, with no tools,
    /// until upstreams or tools match. Omitted when empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "conditions_schema")]
    pub conditions: Vec<Condition>,

    /// Tools the toolset serves (before each caller's access rules).
    /// Optional; omitted when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_count: Option<u32>,

    /// Estimated size of a `tools/list` of every tool of the toolset, as
    /// clients receive it (names, titles, descriptions, schemas,
    /// annotations; no JSON-RPC envelope), in the same form as McpUpstream's
    /// `status.listing`. Tokens are estimated as bytes ÷ 4 (rounded up): a
    /// rule of thumb for English and JSON with common tokenizers, not a
    /// tokenizer's count. In `search` mode clients list only the meta-tools
    /// and the pinned tools: this is then what search keeps out of their
    /// context. Optional; omitted when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub listing: Option<ListingSize>,

    /// The McpUpstreams the toolset takes tools from: those its selection
    /// matched that hold their prefix and are published, sorted by
    /// namespace and name. Omitted when empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = MAX_STATUS_UPSTREAMS))]
    pub upstreams: Vec<ResolvedUpstream>,
}

/// One McpUpstream a toolset takes tools from.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResolvedUpstream {
    pub namespace: String,
    pub name: String,
    /// Its `toolPrefix`.
    pub prefix: String,
    /// Its tools the toolset serves.
    pub tools: u32,
}

impl McpToolset {
    /// The toolset's name in the published form (`namespace/name`).
    pub fn id(&self) -> catalog::toolset::ToolsetName {
        use kube::ResourceExt;
        catalog::toolset::ToolsetName::new(self.namespace().unwrap_or_default(), self.name_any())
    }
}
