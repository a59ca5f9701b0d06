//! `McpOverlay`: an OpenAPI Overlay (1.0/1.1) document applied to one or more
//! McpUpstreams of its namespace before they compile, e.g. to hide
//! operations from agents or rename tools (`x-mcp-*` extensions).
//!
//! Order of application for one upstream: the overlays named in the
//! upstream's `spec.overlays`, in that order; then every other McpOverlay
//! that targets it, by `order` ascending, ties broken by name. An overlay
//! named in `spec.overlays` that also targets the upstream applies once.
//!
//! Field comments follow the same optional/default convention as
//! [`crate::upstream`].

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::{conditions_schema, ConfigMapKeyRef, OBJECT_NAME_PATTERN};

/// At most this many entries in `status.unmatchedTargets` (the schema's
/// `maxItems`).
pub const MAX_STATUS_UNMATCHED: usize = 50;

/// An OpenAPI Overlay applied to McpUpstreams before they compile.
// NB: clippy reads the repeated `type_ = "string"` of the printer columns
// inside `#[kube(...)]` as duplicated attributes; they are separate columns.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "toolgate.dev",
    version = "v1alpha1",
    kind = "McpOverlay",
    plural = "mcpoverlays",
    namespaced,
    shortname = "mcpo",
    category = "mcp",
    status = "McpOverlayStatus",
    derive = "PartialEq",
    doc = "An OpenAPI Overlay applied to McpUpstreams of its namespace before they compile.",
    printcolumn(name = "Order", type_ = "integer", json_path = ".spec.order"),
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = r#".status.conditions[?(@.type=="Ready")].status"#
    ),
    printcolumn(
        name = "Reason",
        type_ = "string",
        json_path = r#".status.conditions[?(@.type=="Ready")].reason"#
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[x_kube(validation = (
    "has(self.upstreamRef) != has(self.upstreamSelector)",
    "exactly one of spec.upstreamRef or spec.upstreamSelector must be set"
))]
#[x_kube(validation = (
    "has(self.inline) != has(self.configMapRef)",
    "exactly one of spec.inline or spec.configMapRef must be set"
))]
#[serde(rename_all = "camelCase")]
pub struct McpOverlaySpec {
    /// The one McpUpstream (in this namespace) to apply to. Exactly one of
    /// `upstreamRef` and `upstreamSelector`. Optional; omitted when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upstream_ref: Option<UpstreamRef>,

    /// Apply to every McpUpstream in this namespace carrying these labels.
    /// Optional; omitted when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upstream_selector: Option<UpstreamSelector>,

    /// Position among the overlays that target an upstream (not those it
    /// lists in `spec.overlays`, which come first): lower first, ties by
    /// name. Defaults to `0`.
    #[serde(default)]
    pub order: i32,

    /// The Overlay document, YAML or JSON. Exactly one of `inline` and
    /// `configMapRef`. Optional; omitted when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inline: Option<String>,

    /// A ConfigMap key in this namespace holding the Overlay document.
    /// Optional; omitted when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_map_ref: Option<ConfigMapKeyRef>,

    /// When `true`, an action whose target matches nothing fails the
    /// upstreams with `OverlayTargetUnmatched` (the last good catalog keeps
    /// serving) instead of being a warning. Defaults to `false`.
    #[serde(default)]
    pub strict: bool,
}

/// Names one McpUpstream in the overlay's namespace.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UpstreamRef {
    /// Name of the McpUpstream. Required.
    #[schemars(length(min = 1, max = 253), pattern(OBJECT_NAME_PATTERN))]
    pub name: String,
}

/// Selects McpUpstreams by label, like a `LabelSelector` without
/// `matchExpressions`.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[x_kube(validation = (
    "size(self.matchLabels) > 0",
    "spec.upstreamSelector.matchLabels must name at least one label; use labels to target every upstream on purpose"
))]
#[serde(rename_all = "camelCase")]
pub struct UpstreamSelector {
    /// Every label must match. Required, non-empty.
    pub match_labels: BTreeMap<String, String>,
}

impl UpstreamSelector {
    /// Whether an object with `labels` is selected.
    pub fn matches(&self, labels: Option<&BTreeMap<String, String>>) -> bool {
        // NB: an empty selector (refused by the schema) matches nothing, so
        // an object that bypassed validation cannot hit every upstream.
        !self.match_labels.is_empty()
            && self
                .match_labels
                .iter()
                .all(|(k, v)| labels.and_then(|l| l.get(k)) == Some(v))
    }
}

/// What the operator last observed and did with this overlay.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct McpOverlayStatus {
    /// The `metadata.generation` this status describes. Optional; omitted
    /// when unset (not reconciled yet).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,

    /// `Ready`: `True` with reason `Applied` when the overlay applied to
    /// every upstream it targets. Otherwise `False`, with reason
    /// `OverlayInvalid` (its document, or applying it to an upstream,
    /// failed: the message names each upstream), `OverlayNotFound` (its
    /// ConfigMap or key is missing), `NoUpstream` (nothing matches
    /// `upstreamRef`/`upstreamSelector`) or `UpstreamNotReady` (no upstream
    /// has a document to apply it to). Omitted when empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "conditions_schema")]
    pub conditions: Vec<Condition>,

    /// Names of the McpUpstreams this overlay applied to, sorted. Omitted
    /// when empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub applied_to: Vec<String>,

    /// Actions whose target matched nothing, per upstream, at most
    /// 50. Omitted when empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = MAX_STATUS_UNMATCHED))]
    pub unmatched_targets: Vec<UnmatchedTarget>,
}

/// An overlay action that selected nothing in one upstream's document.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UnmatchedTarget {
    /// Name of the McpUpstream.
    pub upstream: String,
    /// Index of the action in the overlay's `actions`, from 0.
    pub action: u32,
    /// The action's JSONPath `target`.
    pub target: String,
}

impl McpOverlay {
    /// `namespace/name`: how the operator keys an overlay.
    pub fn key(&self) -> String {
        use kube::ResourceExt;
        format!(
            "{}/{}",
            self.namespace().unwrap_or_default(),
            self.name_any()
        )
    }
}
