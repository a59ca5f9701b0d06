//! Why an upstream or overlay is, or is not, usable: one CamelCase word per
//! cause, shared by the compiler's errors and the operator's Kubernetes
//! conditions (`status.conditions[].reason`).
//!
//! These names are API: users match on them (`kubectl wait`, alerts on
//! `reason=PrefixConflict`), so they never change once released.
//! Operations the compiler rejects carry [`crate::RejectReason`] names in
//! `status.rejectedOperations[].reason`, not these.

macro_rules! reasons {
    ($( $(#[doc = $doc:literal])* $variant:ident => $fix:literal, )*) => {
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum Reason {
            $( $(#[doc = $doc])* $variant, )*
        }

        impl Reason {
            /// Every reason, in declaration order.
            pub const ALL: &'static [Reason] = &[$(Reason::$variant),*];

            /// The reason as written to a condition.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $(Reason::$variant => stringify!($variant),)*
                }
            }

            /// What the reason means: its documentation, for the user
            /// guide's generated reference (one line per source line).
            pub const fn meaning(self) -> &'static str {
                match self {
                    $(Reason::$variant => concat!($($doc, "\n"),*),)*
                }
            }

            /// What a user does about it; empty for a success reason.
            pub const fn fix(self) -> &'static str {
                match self {
                    $(Reason::$variant => $fix,)*
                }
            }
        }
    };
}

reasons! {
    // Success reasons: one per condition type.
    /// `SpecResolved=True`; on an McpToolset, `Ready=True` (its upstreams
    /// are resolved and it is published).
    Resolved => "",
    /// `OverlaysApplied=True`; on an McpOverlay, `Ready=True`.
    Applied => "",
    /// `Compiled=True`.
    Compiled => "",
    /// `PrefixAccepted=True`.
    PrefixHeld => "",
    /// `Published=True` and `Ready=True`.
    Published => "",
    /// Work is in progress for the current generation (first reconcile).
    Reconciling => "Wait; if it stays, read the operator's logs for the resource.",
    /// `Published=True` while a newer generation failed: the last good
    /// version keeps serving; the message names its catalog hash.
    Stale => "Fix the newer generation (another condition names what failed); the old version serves meanwhile.",

    // Failure reasons. Messages name the field, the JSON pointer or overlay
    // action and, for conflicts, the other resource.
    /// The OpenAPI document could not be fetched: missing ConfigMap or key,
    /// URL unreachable or answering an error status (the message carries the
    /// URL and status).
    SpecNotFound => "Check the ConfigMap name and key, or that the URL answers 200 from the operator's namespace (network policies, DNS); the message has the status.",
    /// The OpenAPI document at `spec.openapi.url` is larger than the
    /// operator's cap (`--max-spec-bytes`).
    SpecTooLarge => "Serve a smaller document (cut it with an overlay or split the API), or raise the operator's `--max-spec-bytes`.",
    /// The OpenAPI document was read but is not a valid OpenAPI 2.0/3.x
    /// document.
    SpecInvalid => "Validate the document (`toolgate lint`); the message names the JSON pointer.",
    /// An overlay named in `spec.overlays` does not exist, or its document's
    /// ConfigMap is missing.
    OverlayNotFound => "Create the McpOverlay or its ConfigMap, or remove it from `spec.overlays`.",
    /// An overlay document does not parse or an action fails (bad JSONPath,
    /// bad update).
    OverlayInvalid => "Fix the action the message names (its index and target); `toolgate compile` with the overlay shows the same error locally.",
    /// A `strict` overlay has an action whose target matched nothing.
    OverlayTargetUnmatched => "Fix the target JSONPath, or make the overlay non-strict so an unmatched target is a warning.",
    /// Settings that cannot work: the message names the field (e.g.
    /// `spec.naming.separator`, `spec.http.headers`).
    InvalidSettings => "Fix the field the message names.",
    /// An `x-mcp-*` transform does not compile.
    TransformInvalid => "Fix the `x-mcp-*` jq program at the pointer the message names.",
    /// A rule of `spec.access` cannot be enforced: its `when` is not valid
    /// CEL, too large or too deeply nested, or reads an unknown variable
    /// (the message names `spec.access.rules[i].when` and the CEL error).
    InvalidAccessRule => "Rewrite the rule the message names: valid CEL, known variables, within the cost limit.",
    /// Two operations compile to one tool name and `naming.conflictResolution`
    /// is `error`.
    NameConflict => "Rename one operation with `x-mcp-tool-name` (an overlay), or set `naming.conflictResolution` to resolve it.",
    /// Another (older) McpUpstream holds `toolPrefix`; the message names it
    /// as `namespace/name`.
    PrefixConflict => "Choose another `toolPrefix`, or delete the McpUpstream the message names.",
    /// The catalog's schemas pass the compiler's size limit (the compile
    /// stops there), or the compiled catalog exceeds the operator's
    /// publishing cap (`--max-upstream-bytes`).
    CatalogTooLarge => "Disable operations (`tools`, `x-mcp-enabled: false`), slim schemas, or raise `--max-upstream-bytes`.",
    /// A Secret named in `auth.secretRef` or `openapi.headersFrom` (or one of
    /// its keys) is missing.
    SecretNotFound => "Create the Secret (or the key) the message names in the upstream's namespace.",
    /// The namespace of a Secret named in `auth.secretRef` or
    /// `openapi.headersFrom` has not granted the operator access to its
    /// Secrets (the operator's `--secret-namespaces`, or the API server
    /// answering 403).
    SecretAccessDenied => "Let the operator read Secrets there: add the namespace to `--secret-namespaces` and grant the Role.",
    /// The Service named in `serviceRef` does not exist. Only its existence
    /// is checked: a Service without the port is not reported here.
    ServiceNotFound => "Create the Service, or fix `serviceRef`.",
    /// An McpOverlay's `upstreamRef`/`upstreamSelector` matches no
    /// McpUpstream.
    NoUpstream => "Fix `upstreamRef`/`upstreamSelector`, or create the McpUpstream it should match.",
    /// No upstream an McpToolset selects serves tools: the selection
    /// matches no McpUpstream, or none of those it matches holds its prefix
    /// and is published (the message names each and why).
    NoUpstreamsMatched => "Fix the selector, or make the upstreams it names Ready (the message says why each is not).",
    /// An McpToolset's upstreams serve tools, but none passes its `tools`
    /// filter.
    NoToolsMatched => "Widen the toolset's `tools` filter.",
    /// An McpOverlay was applied to none of its upstreams: they have no
    /// OpenAPI document to apply it to (the message names each upstream and
    /// its `SpecResolved` failure).
    UpstreamNotReady => "Make the upstreams' OpenAPI documents resolve (their `SpecResolved` condition says why not).",
    /// Publishing to the gateway's ConfigMaps failed.
    PublishFailed => "Check the operator's RBAC on ConfigMaps in `--publish-namespace` and its logs; it retries.",
    /// Published, but not every live gateway replica serves it yet.
    NotServed => "Wait for the gateway replicas to reload; if it stays, read the gateway pods' logs and readiness.",
}

impl std::fmt::Display for Reason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::Reason;

    #[test]
    fn reasons_are_distinct_camel_case_words() {
        let mut seen = std::collections::BTreeSet::new();
        for r in Reason::ALL {
            let s = r.as_str();
            assert!(
                s.chars().next().is_some_and(|c| c.is_ascii_uppercase()),
                "{s}"
            );
            assert!(s.chars().all(|c| c.is_ascii_alphanumeric()), "{s}");
            assert!(seen.insert(s), "{s} twice");
        }
    }
}
