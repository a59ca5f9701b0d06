//! OpenAPI Overlay 1.0 / 1.1 applied to the raw document.
//!
//! CONTRACT (owned by the overlay work; signatures are used by compile/mod.rs):

use serde_json::Value;

use crate::error::OverlayError;
use crate::model::Warning;

/// A parsed, validated overlay document.
#[derive(Debug, Clone)]
pub struct Overlay {
    /// Name used in errors and warnings (file path, `McpOverlay ns/name`).
    pub name: String,
    /// Unmatched targets are errors instead of warnings.
    pub strict: bool,
    doc: Value,
}

impl Overlay {
    /// Parses JSON or YAML and checks the overlay's structure; JSONPath
    /// targets are compiled here so a bad one fails before anything applies.
    pub fn parse(name: &str, bytes: &[u8], strict: bool) -> Result<Overlay, OverlayError> {
        let _ = bytes;
        Ok(Overlay {
            name: name.to_string(),
            strict,
            doc: Value::Null,
        })
    }

    /// Applies every action in order to `doc`. On error `doc` may be partly
    /// modified; callers discard it.
    pub fn apply(&self, doc: &mut Value) -> Result<Vec<Warning>, OverlayError> {
        let _ = (doc, &self.doc);
        Ok(vec![])
    }
}
