//! Toolsets: curated MCP endpoints over the tools of several upstreams
//! (the `McpToolset` kind), as the operator publishes them and the gateway
//! serves them.
//!
//! The operator resolves which upstreams a toolset selects (by name or
//! label, across namespaces) into the prefixes those upstreams hold; what
//! is left is pure data, a [`Toolset`]. Which tools a toolset serves is
//! decided by one function, [`Toolset::selects`], which the operator calls
//! for the toolset's status (tool count, estimated listing size) and the
//! gateway calls when it builds a snapshot (the endpoint's membership), so
//! the two cannot disagree.
//!
//! The filter types are embedded in the McpToolset schema (feature
//! `schemars`), so the CRD and the published form read alike.
//!
//! ```
//! use catalog::toolset::{ToolFilter, Toolset, ToolsetName};
//!
//! let spec = br#"{"openapi": "3.0.3", "info": {"title": "t", "version": "1"},
//!   "paths": {"/pets": {"get": {"operationId": "listPets",
//!                               "responses": {"200": {"description": "ok"}}},
//!                       "post": {"operationId": "addPet",
//!                                "responses": {"201": {"description": "ok"}}}}}}"#;
//! let options = catalog::CompileOptions::default();
//! let pets = catalog::compile_upstream(&catalog::UpstreamSource {
//!     prefix: "pets", document: "p.json", spec, overlays: &[], options: &options,
//! })
//! .unwrap();
//! let toolset = Toolset {
//!     upstreams: ["pets".to_string()].into(),
//!     tools: ToolFilter { read_only: true, ..ToolFilter::default() },
//!     ..Toolset::new(ToolsetName::new("team-a", "readers"))
//! };
//! toolset.check().unwrap();
//! let selected: Vec<&str> = pets.tools.iter()
//!     .filter(|t| toolset.selects(&pets, t))
//!     .map(|t| t.name.as_str())
//!     .collect();
//! assert_eq!(selected, ["pets__list_pets"]);
//! ```

pub use crate::listing::MetaToolDescriptions;
use std::collections::BTreeSet;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::access::{glob, ToolInfo};
use crate::listing::ListMode;
use crate::model::{Tool, UpstreamCatalog};

/// Most globs in `tools.include` or `tools.exclude`.
pub const MAX_GLOBS: usize = 64;
/// Longest glob, in bytes.
pub const MAX_GLOB_LEN: usize = 128;
/// Most entries in `tools.tags`.
pub const MAX_TAGS: usize = 32;
/// Longest tag, in bytes.
pub const MAX_TAG_LEN: usize = 128;
/// Most pinned tools.
pub const MAX_PINNED: usize = 32;
/// Longest pinned tool name, in bytes (MCP clients accept up to 128).
pub const MAX_TOOL_NAME_LEN: usize = 128;
/// Most upstreams one toolset resolves to.
pub const MAX_UPSTREAMS: usize = 256;
/// Longest meta-tool description, in bytes.
pub const MAX_DESCRIPTION_LEN: usize = crate::listing::MAX_DESCRIPTION_BYTES;

/// Which tools of the selected upstreams a toolset serves: a tool must
/// pass every filter given.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct ToolFilter {
    /// Globs (`*`, `?`) over tool names without the upstream's prefix and
    /// separator, as in access rules: `get_*` matches `pets__get_pet`. A
    /// tool must match one. Defaults to `["*"]`.
    #[cfg_attr(
        feature = "schemars",
        schemars(
            length(min = 1, max = MAX_GLOBS),
            inner(length(min = 1, max = MAX_GLOB_LEN))
        )
    )]
    pub include: Vec<String>,
    /// Globs like `include`; a tool matching one is left out, whatever
    /// `include` says. Optional; omitted when empty.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    #[cfg_attr(
        feature = "schemars",
        schemars(length(max = MAX_GLOBS), inner(length(min = 1, max = MAX_GLOB_LEN)))
    )]
    pub exclude: Vec<String>,
    /// Only tools carrying at least one of these tags: the operation's
    /// OpenAPI `tags` and its `x-mcp-toolsets`, matched exactly. Optional;
    /// empty means any tool, tagged or not.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    #[cfg_attr(
        feature = "schemars",
        schemars(length(max = MAX_TAGS), inner(length(min = 1, max = MAX_TAG_LEN)))
    )]
    pub tags: Vec<String>,
    /// Only tools annotated `readOnlyHint: true` (the compiler sets it on
    /// GET, HEAD and OPTIONS operations unless an overlay says otherwise).
    /// Defaults to `false`.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub read_only: bool,
}

impl Default for ToolFilter {
    fn default() -> Self {
        ToolFilter {
            include: vec!["*".into()],
            exclude: Vec::new(),
            tags: Vec::new(),
            read_only: false,
        }
    }
}

impl ToolFilter {
    /// Whether a tool passes every filter. `tags` are the tool's
    /// ([`Tool::toolsets`]).
    pub fn allows(&self, tool: &ToolInfo<'_>, tags: &[String]) -> bool {
        (!self.read_only || tool.read_only)
            && self.include.iter().any(|g| glob(g, tool.base_name))
            && !self.exclude.iter().any(|g| glob(g, tool.base_name))
            && (self.tags.is_empty() || tags.iter().any(|t| self.tags.contains(t)))
    }

    /// Checks the bounds the CRD schema states, for objects that did not
    /// go through it.
    pub fn check(&self) -> Result<(), ToolsetError> {
        if self.include.is_empty() {
            return Err(ToolsetError::new(
                "tools.include",
                "an empty list matches no tool; leave it out to include every tool",
            ));
        }
        for (field, globs) in [
            ("tools.include", &self.include),
            ("tools.exclude", &self.exclude),
        ] {
            bounded_list(field, globs, MAX_GLOBS, MAX_GLOB_LEN)?;
        }
        bounded_list("tools.tags", &self.tags, MAX_TAGS, MAX_TAG_LEN)
    }
}

impl MetaToolDescriptions {
    pub fn is_empty(&self) -> bool {
        self.search_tools.is_none() && self.describe_tool.is_none() && self.call_tool.is_none()
    }

    fn check(&self) -> Result<(), ToolsetError> {
        for (field, d) in [
            ("metaToolDescriptions.searchTools", &self.search_tools),
            ("metaToolDescriptions.describeTool", &self.describe_tool),
            ("metaToolDescriptions.callTool", &self.call_tool),
        ] {
            match d {
                Some(d) if d.is_empty() || d.len() > MAX_DESCRIPTION_LEN => {
                    return Err(ToolsetError::new(
                        field,
                        format!("must be 1 to {MAX_DESCRIPTION_LEN} bytes, not {}", d.len()),
                    ))
                }
                _ => {}
            }
        }
        Ok(())
    }
}

/// Which toolset: the namespace and name of its McpToolset.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ToolsetName {
    pub namespace: String,
    pub name: String,
}

impl ToolsetName {
    pub fn new(namespace: impl Into<String>, name: impl Into<String>) -> Self {
        ToolsetName {
            namespace: namespace.into(),
            name: name.into(),
        }
    }
}

impl fmt::Display for ToolsetName {
    /// `namespace/name`: neither part can hold a `/`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// A toolset as published: what the gateway needs to serve it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Toolset {
    #[serde(flatten)]
    pub id: ToolsetName,
    /// Prefixes of the upstreams whose tools it may serve: those its
    /// selection matched that hold their prefix.
    pub upstreams: BTreeSet<String>,
    pub tools: ToolFilter,
    /// How its endpoint lists tools.
    #[serde(default)]
    pub mode: ListMode,
    /// Full tool names listed beside the meta-tools in `search` mode.
    /// Names outside the toolset are ignored.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pinned: Vec<String>,
    #[serde(default, skip_serializing_if = "MetaToolDescriptions::is_empty")]
    pub descriptions: MetaToolDescriptions,
}

impl Toolset {
    /// A toolset serving nothing yet: no upstreams, every tool of them,
    /// listed whole.
    pub fn new(id: ToolsetName) -> Toolset {
        Toolset {
            id,
            upstreams: BTreeSet::new(),
            tools: ToolFilter::default(),
            mode: ListMode::All,
            pinned: Vec::new(),
            descriptions: MetaToolDescriptions::default(),
        }
    }

    /// Whether the toolset serves `tool` of `upstream`: the upstream is one
    /// of its upstreams and the tool passes its filter. The one rule the
    /// operator's status and the gateway's endpoint both follow.
    pub fn selects(&self, upstream: &UpstreamCatalog, tool: &Tool) -> bool {
        self.upstreams.contains(&upstream.prefix)
            && self
                .tools
                .allows(&ToolInfo::of(upstream, tool), &tool.toolsets)
    }

    /// Checks every bound (the CRD schema states the same ones), so a
    /// toolset that bypassed the schema cannot make matching expensive.
    pub fn check(&self) -> Result<(), ToolsetError> {
        if self.upstreams.len() > MAX_UPSTREAMS {
            return Err(ToolsetError::new(
                "upstreams",
                format!(
                    "resolves to {} upstreams, more than {MAX_UPSTREAMS}",
                    self.upstreams.len()
                ),
            ));
        }
        self.tools.check()?;
        bounded_list("pinned", &self.pinned, MAX_PINNED, MAX_TOOL_NAME_LEN)?;
        self.descriptions.check()
    }
}

fn bounded_list(
    field: &str,
    items: &[String],
    max_items: usize,
    max_len: usize,
) -> Result<(), ToolsetError> {
    if items.len() > max_items {
        return Err(ToolsetError::new(
            field,
            format!("{} entries, more than {max_items}", items.len()),
        ));
    }
    for (i, item) in items.iter().enumerate() {
        if item.is_empty() || item.len() > max_len {
            return Err(ToolsetError::new(
                format!("{field}[{i}]"),
                format!("must be 1 to {max_len} bytes, not {}", item.len()),
            ));
        }
    }
    Ok(())
}

/// A toolset that breaks a bound, and which field (relative to the
/// McpToolset's `spec`, e.g. `tools.include[3]`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct ToolsetError {
    pub field: String,
    pub message: String,
}

impl ToolsetError {
    fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        ToolsetError {
            field: field.into(),
            message: message.into(),
        }
    }
}

#[cfg(test)]
mod tests;
