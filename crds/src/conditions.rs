//! Condition types and reasons written to `status.conditions`.
//!
//! These strings are API: users match on them (`kubectl wait
//! --for=condition=Ready`, alerts on `reason=PrefixConflict`), so they never
//! change once released. Reasons are CamelCase as Kubernetes requires.
//! Operations the compiler rejects carry `catalog::RejectReason` names in
//! `status.rejectedOperations[].reason`, not these.

/// Condition types.
pub mod types {
    /// Summary: `True` when the resource's current spec is compiled and
    /// served. On an McpUpstream, `False` names the first failing stage in
    /// its reason; on an McpOverlay, `False` means it did not apply cleanly to
    /// at least one upstream.
    pub const READY: &str = "Ready";
    /// The OpenAPI document (and each overlay document) was read.
    pub const SPEC_RESOLVED: &str = "SpecResolved";
    /// Every overlay in `spec.overlays` (and every selecting McpOverlay)
    /// applied. On an McpOverlay: it applied to every upstream it targets.
    pub const OVERLAYS_APPLIED: &str = "OverlaysApplied";
    /// The compiler produced a catalog from the current spec.
    pub const COMPILED: &str = "Compiled";
    /// This upstream holds its `toolPrefix` cluster-wide.
    pub const PREFIX_ACCEPTED: &str = "PrefixAccepted";
    /// The catalog of the current generation is published for the gateway.
    pub const PUBLISHED: &str = "Published";

    /// Every type above, in the order the pipeline reaches them.
    pub const ALL: [&str; 6] = [
        READY,
        SPEC_RESOLVED,
        OVERLAYS_APPLIED,
        COMPILED,
        PREFIX_ACCEPTED,
        PUBLISHED,
    ];
}

/// Condition reasons.
pub mod reasons {
    // Success reasons: one per condition type.
    /// `SpecResolved=True`.
    pub const RESOLVED: &str = "Resolved";
    /// `OverlaysApplied=True`.
    pub const APPLIED: &str = "Applied";
    /// `Compiled=True`.
    pub const COMPILED: &str = "Compiled";
    /// `PrefixAccepted=True`.
    pub const PREFIX_HELD: &str = "PrefixHeld";
    /// `Published=True` and `Ready=True`.
    pub const PUBLISHED: &str = "Published";
    /// Work is in progress for the current generation (first reconcile).
    pub const RECONCILING: &str = "Reconciling";
    /// `Published=True` while a newer generation failed: the last good
    /// version keeps serving; the message names its catalog hash.
    pub const STALE: &str = "Stale";

    // Failure reasons. Messages name the field, the JSON pointer or overlay
    // action and, for conflicts, the other resource.
    /// The OpenAPI document could not be fetched: missing ConfigMap or key,
    /// URL unreachable or answering an error status (the message carries the
    /// URL and status).
    pub const SPEC_NOT_FOUND: &str = "SpecNotFound";
    /// The OpenAPI document at `spec.openapi.url` is larger than the
    /// operator's cap (`--max-spec-bytes`).
    pub const SPEC_TOO_LARGE: &str = "SpecTooLarge";
    /// The OpenAPI document was read but is not a valid OpenAPI 2.0/3.x
    /// document.
    pub const SPEC_INVALID: &str = "SpecInvalid";
    /// An overlay named in `spec.overlays` does not exist, or its document's
    /// ConfigMap is missing.
    pub const OVERLAY_NOT_FOUND: &str = "OverlayNotFound";
    /// An overlay document does not parse or an action fails (bad JSONPath,
    /// bad update).
    pub const OVERLAY_INVALID: &str = "OverlayInvalid";
    /// A `strict` overlay has an action whose target matched nothing.
    pub const OVERLAY_TARGET_UNMATCHED: &str = "OverlayTargetUnmatched";
    /// Settings that cannot work: the message names the field (e.g.
    /// `spec.naming.separator`, `spec.tools.extraParameters[0].schema`).
    pub const INVALID_SETTINGS: &str = "InvalidSettings";
    /// An `x-mcp-*` transform does not compile.
    pub const TRANSFORM_INVALID: &str = "TransformInvalid";
    /// Two operations compile to one tool name and `naming.conflictResolution`
    /// is `error`.
    pub const NAME_CONFLICT: &str = "NameConflict";
    /// Another (older) McpUpstream holds `toolPrefix`; the message names it
    /// as `namespace/name`.
    pub const PREFIX_CONFLICT: &str = "PrefixConflict";
    /// The catalog's schemas pass the compiler's size limit (the compile
    /// stops there), or the compiled catalog exceeds the operator's
    /// publishing cap (`--max-upstream-bytes`).
    pub const CATALOG_TOO_LARGE: &str = "CatalogTooLarge";
    /// A Secret named in `auth.secretRef` or `openapi.headersFrom` (or one of
    /// its keys) is missing.
    pub const SECRET_NOT_FOUND: &str = "SecretNotFound";
    /// The Service named in `serviceRef` does not exist. Only its existence
    /// is checked: a Service without the port is not reported here.
    pub const SERVICE_NOT_FOUND: &str = "ServiceNotFound";
    /// An McpOverlay's `upstreamRef`/`upstreamSelector` matches no
    /// McpUpstream.
    pub const NO_UPSTREAM: &str = "NoUpstream";
    /// An McpOverlay was applied to none of its upstreams: they have no
    /// OpenAPI document to apply it to (the message names each upstream and
    /// its `SpecResolved` failure).
    pub const UPSTREAM_NOT_READY: &str = "UpstreamNotReady";
    /// Publishing to the gateway's ConfigMaps failed.
    pub const PUBLISH_FAILED: &str = "PublishFailed";
    /// Published, but not every live gateway replica serves it yet.
    pub const NOT_SERVED: &str = "NotServed";
}
