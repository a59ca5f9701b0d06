//! toolgate's Kubernetes API: the `McpUpstream`, `McpOverlay` and
//! `McpToolset` custom resources (group `toolgate.dev`, version
//! `v1alpha1`), the
//! `McpGatewayReplica` reports the gateway writes for the operator, and
//! their CRDs.
//!
//! Types only: no client, no reconcile logic. The operator reconciles these
//! kinds; the compiler's settings blocks (`naming`, `tools`, `schema`) are the
//! `catalog` crate's own types, so the CRD and `toolgate compile --config`
//! share one definition.
//!
//! The CRD YAML is generated from these types by [`crd_yaml`] and committed as
//! `crds/toolgate.dev.yaml` (one multi-document file, every kind, so
//! `kubectl apply -f crds/` installs everything), with a copy in the Helm
//! chart. Regenerate both after any change to the types, from the workspace
//! root ([`CRD_REGENERATE_COMMAND`]):
//!
//! ```text
//! cargo run -q -p crds --bin crdgen > crds/toolgate.dev.yaml && cp crds/toolgate.dev.yaml charts/toolgate/crds/toolgate.dev.yaml
//! ```
//!
//! The test `generated_yaml_is_current` fails while the file is stale.
//!
//! ```
//! use crds::{McpUpstream, McpUpstreamSpec, OpenApiSource};
//! use kube::CustomResourceExt;
//!
//! let spec: McpUpstreamSpec = serde_json::from_value(serde_json::json!({
//!     "toolPrefix": "petstore",
//!     "baseUrl": "http://petstore.demo.svc/api",
//!     "openapi": {"configMapRef": {"name": "petstore-openapi", "key": "openapi.yaml"}},
//! }))
//! .unwrap();
//! let upstream = McpUpstream::new("petstore", spec);
//! assert_eq!(upstream.spec.compile_options().naming.separator, "__");
//! assert_eq!(McpUpstream::crd_name(), "mcpupstreams.toolgate.dev");
//! ```

mod common;
pub mod conditions;
mod overlay;
pub mod publish;
pub mod reference;
mod replica;
mod toolset;
mod upstream;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;

pub use common::{
    parse_duration, ConfigMapKeyRef, SecretRef, DATA_KEY_PATTERN, DURATION_PATTERN,
    OBJECT_NAME_PATTERN,
};
pub use overlay::{
    McpOverlay, McpOverlaySpec, McpOverlayStatus, UnmatchedTarget, UpstreamRef, UpstreamSelector,
    MAX_STATUS_UNMATCHED,
};
pub use replica::{McpGatewayReplica, McpGatewayReplicaSpec};
pub use toolset::{
    McpToolset, McpToolsetSpec, McpToolsetStatus, ResolvedUpstream, UpstreamSelection,
    MAX_SELECTOR_NAMESPACES, MAX_STATUS_UPSTREAMS, MAX_UPSTREAM_SELECTIONS, NAMESPACE_PATTERN,
};
pub use upstream::{
    AuthSecretRef, AuthSpec, AuthType, HttpSpec, ListingSize, McpUpstream, McpUpstreamSpec,
    McpUpstreamStatus, OpenApiSource, RejectedOperation, ResponseFailure, Scheme, ServiceRef,
    ValidationSpec, DEFAULT_MAX_RESPONSE_BYTES, DEFAULT_REFRESH_INTERVAL, DEFAULT_TIMEOUT,
    HEADER_NAME_PATTERN, HTTP_URL_PATTERN, MAX_STATUS_REJECTED, MAX_STATUS_WARNINGS,
    TOOL_PREFIX_PATTERN,
};

/// API group of every kind.
pub const GROUP: &str = "toolgate.dev";
/// API version of every kind.
pub const VERSION: &str = "v1alpha1";

/// Path of the committed CRD YAML, relative to the workspace root.
pub const CRD_YAML_PATH: &str = "crds/toolgate.dev.yaml";

/// The one command, run from the workspace root, that regenerates
/// [`CRD_YAML_PATH`] and its copy in the Helm chart. Every staleness check
/// names this, so a failing one says what to run.
pub const CRD_REGENERATE_COMMAND: &str =
    "cargo run -q -p crds --bin crdgen > crds/toolgate.dev.yaml \
     && cp crds/toolgate.dev.yaml charts/toolgate/crds/toolgate.dev.yaml";

/// Every CRD: McpUpstream first, then McpOverlay, McpGatewayReplica and
/// McpToolset.
pub fn crds() -> Vec<CustomResourceDefinition> {
    vec![
        McpUpstream::crd(),
        McpOverlay::crd(),
        McpGatewayReplica::crd(),
        McpToolset::crd(),
    ]
}

/// The content of [`CRD_YAML_PATH`]: every CRD as one multi-document YAML
/// stream, preceded by a header saying how it is made.
pub fn crd_yaml() -> String {
    let mut out = format!(
        "# Generated from crds/src by `{CRD_REGENERATE_COMMAND}`.\n\
         # Do not edit: change the Rust types and regenerate.\n"
    );
    for crd in crds() {
        out.push_str("---\n");
        // NB: serialising a CustomResourceDefinition (plain strings, maps and
        // JSON values built by the derive) has no failure mode; an error
        // here would be a bug in the serializer, not bad input.
        out.push_str(&yaml_serde::to_string(&crd).expect("a CRD always serialises to YAML"));
    }
    out
}
