//! toolgate's catalog compiler: OpenAPI 2.0 / 3.0 / 3.1 documents plus
//! OpenAPI Overlays in, a validated MCP tool catalog out.
//!
//! Pure: no async, no network, no Kubernetes. The operator calls it inside
//! its reconcile loop and the gateway's CLI calls it for `compile` and
//! `lint`. Besides the [`Catalog`] it produces, the operator and the
//! gateway share the upstreams' runtime settings ([`runtime`]), the
//! published form ([`publish`]) and the rule deciding which tools a
//! toolset serves ([`toolset`]) from this crate.
//!
//! The pipeline, one module per stage:
//!
//! 1. [`spec`]: parse JSON/YAML into a raw value.
//! 2. [`overlay`]: apply overlays to the raw value, in order.
//! 3. [`spec`]: detect the version, convert Swagger 2.0 to the 3.0 shape,
//!    refuse external `$ref`s.
//! 4. `compile`: per operation — name, input/output schema, request plan,
//!    annotations, transforms — or a [`Rejected`] entry with the reason.
//! 5. [`model`]: the serialisable, hashed catalog.
//!
//! ```
//! let spec = br#"{"openapi": "3.0.3", "info": {"title": "t", "version": "1"},
//!   "paths": {"/pets/{petId}": {"get": {"operationId": "fetchPet",
//!     "parameters": [{"name": "petId", "in": "path", "required": true,
//!                     "schema": {"type": "integer", "minimum": 1}}],
//!     "responses": {"200": {"description": "ok"}}}}}}"#;
//! let options = catalog::CompileOptions::default();
//! let upstream = catalog::compile_upstream(&catalog::UpstreamSource {
//!     prefix: "pets",
//!     document: "petstore.json",
//!     spec,
//!     overlays: &[],
//!     options: &options,
//! })
//! .unwrap();
//! assert_eq!(upstream.tools[0].name, "pets__fetch_pet");
//! assert_eq!(upstream.tools[0].input_schema.to_value()["required"][0], "petId");
//! ```

pub mod access;
mod compile;
pub mod error;
pub mod explain;
pub mod listing;
pub mod memory;
pub mod model;
pub mod options;
pub mod overlay;
pub mod prefix;
pub mod publish;
pub mod reason;
pub mod runtime;
pub mod search;
pub mod size;
pub mod slim;
pub mod spec;
pub mod synth;
pub mod toolset;
pub mod transform;
mod warning;

pub use compile::naming;
pub use compile::{
    compile_upstream, compile_upstream_with_limits, input_hash, lint_upstream, CompileLimits,
    Linted, OverlayInput, UpstreamSource,
};
pub use error::{CompileError, NameConflicts, OverlayError, SpecError};
pub use memory::release_freed_memory;
pub use model::*;
pub use options::*;
pub use overlay::Overlay;
pub use prefix::{resolve_prefixes, PrefixClaim, PrefixConflict, PrefixResolution};
pub use reason::Reason;
