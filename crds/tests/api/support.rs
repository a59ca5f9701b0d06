//! Helpers shared by the integration tests: the generated schemas as JSON and
//! the CEL validator the API server would run on them.

#![allow(dead_code)]

use serde_json::Value;

/// `openAPIV3Schema` of the CRD of `kind` (`McpUpstream` or `McpOverlay`).
pub fn schema(kind: &str) -> Value {
    let crd = crds::crds()
        .into_iter()
        .find(|c| c.spec.names.kind == kind)
        .unwrap_or_else(|| panic!("no CRD for {kind}"));
    let schema = crd.spec.versions[0]
        .schema
        .clone()
        .unwrap()
        .open_api_v3_schema
        .unwrap();
    serde_json::to_value(schema).unwrap()
}

/// Runs the CRD's CEL rules (after schema defaulting, as the API server does)
/// on `object`; `Err` holds one line per failed rule (`path: message`).
pub fn validate(object: &Value) -> Result<(), Vec<String>> {
    let kind = object["kind"].as_str().expect("object has a kind");
    kube::core::cel::Validator::new()
        .validate(&schema(kind), object, None)
        .map_err(|errs| {
            errs.iter()
                .map(|e| format!("{}: {}", e.field_path, e.message))
                .collect()
        })
}

/// Calls `visit(path, node)` for every schema node below `node`, with paths
/// like `spec.auth.secretRef.name` and `[]` for array items.
pub fn walk(node: &Value, path: &str, visit: &mut dyn FnMut(&str, &Value)) {
    visit(path, node);
    let join = |k: &str| {
        if path.is_empty() {
            k.to_string()
        } else {
            format!("{path}.{k}")
        }
    };
    if let Some(props) = node.get("properties").and_then(Value::as_object) {
        for (k, v) in props {
            walk(v, &join(k), visit);
        }
    }
    if let Some(items) = node.get("items") {
        walk(items, &format!("{path}[]"), visit);
    }
    if let Some(ap) = node.get("additionalProperties").filter(|v| v.is_object()) {
        walk(ap, &format!("{path}{{}}"), visit);
    }
}
