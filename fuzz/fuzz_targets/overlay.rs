//! Overlays: parsing (structure, version, JSONPath compilation) and applying
//! every action kind (update, remove, copy) to a document.
//!
//! Input: `overlay \0 document`. Without a NUL the overlay is applied to a
//! small fixed document, so a mutated overlay alone still has targets.
//! The document may be amplified (`toolgate_fuzz::amplify`).
#![no_main]

use libfuzzer_sys::fuzz_target;
use toolgate_fuzz::{amplify, split_nul};

const DEFAULT_DOC: &str = r##"{"openapi": "3.1.0", "info": {"title": "t", "version": "1"},
 "tags": ["a", "b", "a"],
 "paths": {"/pets/{id}": {"parameters": [{"name": "id", "in": "path", "required": true}],
   "get": {"operationId": "getPet", "responses": {"200": {"description": "ok",
     "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Pet"}}}}}},
   "delete": {"operationId": "deletePet", "x-mcp-enabled": true, "responses": {"204": {"description": "gone"}}}}},
 "components": {"schemas": {"Pet": {"type": "object", "properties": {"id": {"type": "integer"},
   "tags": {"type": "array", "items": {"type": "string"}}}}}}}"##;

fuzz_target!(|data: &[u8]| {
    let (overlay, doc) = split_nul(data);
    let doc = amplify(doc.unwrap_or(DEFAULT_DOC.as_bytes()));
    // The strictness bit comes from the input length so both modes run
    // without spending a byte of the overlay text on it.
    let strict = data.len() % 2 == 1;
    let Ok(overlay) = catalog::Overlay::parse("fuzz-overlay.yaml", overlay, strict) else {
        return;
    };
    let Ok(mut value) = catalog::spec::parse_value("fuzz.yaml", &doc) else {
        return;
    };
    if overlay.apply(&mut value).is_ok() {
        // Applying twice exercises merges into what the first pass built
        // (arrays concatenated, objects merged into merged objects).
        let _ = overlay.apply(&mut value);
        let _ = serde_json::to_vec(&value);
    }
});
