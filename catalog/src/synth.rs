//! Synthetic instances generated from JSON Schemas, for dry-running
//! transforms and for tests.
//!
//! CONTRACT (owned by the transform work):

use serde_json::Value;

/// Instances of `schema` (a self-contained JSON Schema 2020-12): one with all
/// properties, one with required properties only, one per oneOf/anyOf branch.
/// Values come from example → default → enum[0] → type fallback.
pub fn instances(schema: &Value) -> Vec<Value> {
    let _ = schema;
    vec![Value::Object(Default::default())]
}
