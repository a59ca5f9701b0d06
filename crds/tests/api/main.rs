//! One test binary for the API crate: each file is a module, so the crate's
//! heavy dependencies (kube, k8s-openapi, jsonschema) are linked once.

mod examples;
mod generated_yaml_is_current;
mod schema;
mod serde_roundtrip;
mod support;
