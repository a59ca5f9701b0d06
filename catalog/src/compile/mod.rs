//! Per-operation compilation: name, schemas, plan, annotations, transforms.

pub mod naming;

use crate::error::CompileError;
use crate::model::UpstreamCatalog;
use crate::options::CompileOptions;
use crate::overlay::Overlay;

/// Everything needed to compile one upstream.
#[derive(Debug, Clone, Copy)]
pub struct UpstreamSource<'a> {
    /// Tool prefix.
    pub prefix: &'a str,
    /// Name of the document for errors (file path, `ConfigMap ns/name`, URL).
    pub document: &'a str,
    /// The OpenAPI document, JSON or YAML.
    pub spec: &'a [u8],
    /// Overlays, applied in this order.
    pub overlays: &'a [Overlay],
    pub options: &'a CompileOptions,
}

/// Compiles one upstream.
pub fn compile_upstream(src: &UpstreamSource<'_>) -> Result<UpstreamCatalog, CompileError> {
    let _ = src;
    unimplemented!()
}
