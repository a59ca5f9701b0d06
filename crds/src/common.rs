//! Pieces shared by both kinds: same-namespace references, the duration
//! format, and the schema of `status.conditions`.
//!
//! References never carry a namespace: an McpUpstream or McpOverlay can only
//! read ConfigMaps, Secrets, Services and overlays of its own namespace, so a
//! namespace's users cannot make the operator read another namespace.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde::{Deserialize, Serialize};

/// Schema `pattern` of every duration field (`refreshInterval`,
/// `http.timeout`): a sequence of `<integer><unit>` with units `ms`, `s`,
/// `m`, `h`, e.g. `500ms`, `30s`, `1h30m`. A subset of Go's
/// `time.ParseDuration`, so what the API server accepts is what
/// [`parse_duration`] accepts.
pub const DURATION_PATTERN: &str = "^([0-9]{1,9}(ms|s|m|h))+$";

/// Schema `pattern` of object names referenced by these kinds (ConfigMaps,
/// Secrets, McpOverlays, McpUpstreams): an RFC 1123 subdomain.
pub const OBJECT_NAME_PATTERN: &str =
    "^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$";

/// Schema `pattern` of a ConfigMap or Secret data key.
pub const DATA_KEY_PATTERN: &str = "^[-._a-zA-Z0-9]+$";

/// A key of a ConfigMap in the resource's namespace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConfigMapKeyRef {
    /// Name of the ConfigMap. Required.
    #[schemars(length(min = 1, max = 253), pattern(OBJECT_NAME_PATTERN))]
    pub name: String,
    /// Key in `data` (or `binaryData`) holding the document, YAML or JSON.
    /// Required.
    #[schemars(length(min = 1, max = 253), pattern(DATA_KEY_PATTERN))]
    pub key: String,
}

/// A Secret in the resource's namespace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SecretRef {
    /// Name of the Secret. Required.
    #[schemars(length(min = 1, max = 253), pattern(OBJECT_NAME_PATTERN))]
    pub name: String,
}

/// Parses a duration in the [`DURATION_PATTERN`] format; the gateway's
/// config file reads the same format, so the parser lives with the
/// runtime settings both share.
pub use catalog::runtime::parse_duration;

/// Schema of `status.conditions`: k8s-openapi's own `Condition` schema,
/// declared as a list-map keyed on `type` so that server-side apply merges
/// conditions by type instead of replacing the list (as kube's
/// `crd_derive.rs` example does).
pub(crate) fn conditions_schema(generator: &mut SchemaGenerator) -> Schema {
    let items = generator.subschema_for::<Condition>();
    schemars::json_schema!({
        "type": "array",
        "description": "Standard Kubernetes conditions, one per type. `Ready` summarises the others.",
        "items": items,
        "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": ["type"],
    })
}

#[cfg(test)]
mod tests {
    use super::parse_duration;
    use std::time::Duration;

    #[test]
    fn durations_in_the_schema_format_parse() {
        assert_eq!(parse_duration("500ms"), Some(Duration::from_millis(500)));
        assert_eq!(parse_duration("30s"), Some(Duration::from_secs(30)));
        assert_eq!(parse_duration("1h30m"), Some(Duration::from_secs(5400)));
        assert_eq!(parse_duration("1m1ms"), Some(Duration::from_millis(60_001)));
    }

    #[test]
    fn durations_outside_the_schema_format_are_refused() {
        for bad in [
            "",
            "30",
            "s",
            "1.5s",
            "-1s",
            "1d",
            "1 s",
            "1234567890s",
            "5mm",
        ] {
            assert_eq!(parse_duration(bad), None, "{bad:?}");
        }
    }
}
