//! `McpUpstream.status`: what the operator observed and did, as
//! `kubectl get` and `kubectl describe` show it.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{MAX_STATUS_REJECTED, MAX_STATUS_WARNINGS};
use crate::common::conditions_schema;

/// What the operator last observed and did. Rebuilt on every reconcile and
/// written with server-side apply, never edited in place.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct McpUpstreamStatus {
    /// The `metadata.generation` this status describes. Optional; omitted
    /// when unset (not reconciled yet).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,

    /// `Ready` plus one condition per stage, in pipeline order:
    /// `SpecResolved`, `OverlaysApplied`, `Compiled`, `PrefixAccepted`,
    /// `Published`. `Ready=False` carries the reason of the first failing
    /// stage; a message names the field, JSON pointer, overlay action or
    /// resource at fault. Reasons:
    /// - success: `Resolved`, `Applied`, `Compiled`, `PrefixHeld`,
    ///   `Published`; `Reconciling` (a stage not reached yet); `Stale`
    ///   (`Published=True` while a newer generation failed: the last good
    ///   catalog keeps serving);
    /// - the document: `SpecNotFound` (ConfigMap, key or URL missing or
    ///   failing), `SpecTooLarge` (over the operator's `--max-spec-bytes`),
    ///   `SpecInvalid`;
    /// - overlays: `OverlayNotFound`, `OverlayInvalid`,
    ///   `OverlayTargetUnmatched` (a `strict` overlay's target matched
    ///   nothing);
    /// - compiling: `InvalidSettings`, `TransformInvalid`, `NameConflict`,
    ///   `CatalogTooLarge` (over the compiler's or the operator's
    ///   `--max-upstream-bytes` limit);
    /// - access: `InvalidAccessRule` (a rule of `spec.access` does not
    ///   compile; the message names `spec.access.rules[i].when`);
    /// - the cluster: `PrefixConflict` (an older McpUpstream holds
    ///   `toolPrefix`), `SecretNotFound`, `SecretAccessDenied` (the
    ///   Secret's namespace has not granted the operator access),
    ///   `ServiceNotFound`;
    /// - publishing: `PublishFailed`, `NotServed` (not every live gateway
    ///   replica serves it yet).
    ///
    /// Omitted when empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "conditions_schema")]
    pub conditions: Vec<Condition>,

    /// Tools currently published for this upstream. When the latest spec
    /// fails, this still counts the last good catalog, which keeps serving.
    /// Optional; omitted when unset (nothing published yet).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_count: Option<u32>,

    /// The compiler's warnings (unmatched overlay targets, cut circular
    /// references, ...), at most 20. Omitted when empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = MAX_STATUS_WARNINGS))]
    pub warnings: Vec<String>,

    /// Total number of warnings, including those cut from `warnings`.
    /// Optional; omitted when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warning_count: Option<u32>,

    /// Operations that did not become tools, at most
    /// 50. Omitted when empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = MAX_STATUS_REJECTED))]
    pub rejected_operations: Vec<RejectedOperation>,

    /// Total number of rejected operations, including those cut from
    /// `rejectedOperations`. Optional; omitted when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rejected_count: Option<u32>,

    /// Estimated size of this upstream's tools in a `tools/list` result,
    /// as clients receive it: each tool's name, title, description,
    /// inputSchema and annotations, and its outputSchema only with
    /// `validation.responseFailure: fail` (the one mode that lists output
    /// schemas). Tokens are estimated as bytes ÷ 4. Describes the compiled
    /// catalog; when the latest spec fails, the last good one. Optional;
    /// omitted when unset (nothing compiled yet).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub listing: Option<ListingSize>,

    /// Hash of the published catalog of this upstream (the catalog's own
    /// `hash`). Unchanged hash, unchanged tools. Optional; omitted when
    /// unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub catalog_hash: Option<String>,

    /// Gateway replicas that report serving `catalogHash`. Optional; omitted
    /// when unset (not reported).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub served_replicas: Option<i32>,
}

impl McpUpstreamStatus {
    /// Fills the catalog-derived fields (`toolCount`, `warnings`,
    /// `warningCount`, `rejectedOperations`, `rejectedCount`, `catalogHash`)
    /// from a published catalog, cutting the lists to the schema's
    /// `maxItems` so the status write is never refused for its size.
    pub fn record_catalog(&mut self, catalog: &catalog::UpstreamCatalog) {
        self.tool_count = Some(saturating_u32(catalog.tools.len()));
        self.warnings = catalog
            .warnings
            .iter()
            .take(MAX_STATUS_WARNINGS)
            .map(|w| match w.at.as_ref().map(catalog::Location::pointer) {
                Some(p) => format!("{}: {} (at {p})", w.code, w.message),
                None => format!("{}: {}", w.code, w.message),
            })
            .collect();
        self.warning_count = Some(saturating_u32(catalog.warnings.len()));
        self.rejected_operations = catalog
            .rejected
            .iter()
            .take(MAX_STATUS_REJECTED)
            .map(RejectedOperation::from)
            .collect();
        self.rejected_count = Some(saturating_u32(catalog.rejected.len()));
        self.catalog_hash = Some(catalog.hash.clone());
    }
}

/// An estimated `tools/list` size.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ListingSize {
    /// JSON bytes of the listed tools, without the JSON-RPC envelope.
    pub bytes: u64,
    /// `bytes` ÷ 4, rounded up: the usual rule of thumb for English and
    /// JSON with common tokenizers.
    pub tokens: u64,
}

impl From<catalog::listing::ListingSize> for ListingSize {
    fn from(s: catalog::listing::ListingSize) -> Self {
        ListingSize {
            bytes: s.bytes,
            tokens: s.tokens,
        }
    }
}

fn saturating_u32(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// An operation of the document that is not a tool.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RejectedOperation {
    /// Upper-case HTTP method, e.g. `DELETE`.
    pub method: String,
    /// Path template as in the document, e.g. `/pets/{petId}`.
    pub path: String,
    /// A `catalog::RejectReason` name, e.g. `ReadOnlyMode`.
    pub reason: String,
    /// Details, e.g. which parameter is malformed. Optional; omitted when
    /// unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

impl From<&catalog::Rejected> for RejectedOperation {
    fn from(r: &catalog::Rejected) -> Self {
        RejectedOperation {
            method: r.method.to_ascii_uppercase(),
            path: r.path.clone(),
            reason: r.reason.as_str().to_string(),
            message: (!r.message.is_empty()).then(|| r.message.clone()),
        }
    }
}
