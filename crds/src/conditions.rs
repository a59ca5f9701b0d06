//! Condition types and reasons written to `status.conditions`.
//!
//! These strings are API: users match on them (`kubectl wait
//! --for=condition=Ready`, alerts on `reason=PrefixConflict`), so they never
//! change once released. Reasons are CamelCase as Kubernetes requires.

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

/// Condition reasons: the vocabulary the compiler's errors use too.
pub use catalog::Reason;

#[cfg(test)]
mod tests {
    use super::Reason;

    /// The `status.conditions` description of each kind's CRD, as
    /// `kubectl explain` shows it.
    fn described() -> String {
        crate::crds()
            .iter()
            .map(|crd| {
                let schema =
                    serde_json::to_value(&crd.spec.versions[0].schema).expect("schema serialises");
                schema["openAPIV3Schema"]["properties"]["status"]["properties"]["conditions"]
                    ["description"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string()
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// The operator writes only [`Reason`]s; a user reading the CRD must
    /// find each one explained there.
    #[test]
    fn every_reason_the_operator_can_write_is_in_the_crd_docs() {
        let docs = described();
        let missing: Vec<&str> = Reason::ALL
            .iter()
            .map(|r| r.as_str())
            .filter(|r| !docs.contains(&format!("`{r}`")))
            .collect();
        assert!(
            missing.is_empty(),
            "undocumented reasons: {missing:?}\n{docs}"
        );
    }
}
