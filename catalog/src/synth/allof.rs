//! `allOf` merged into one schema, approximately: enough for a generator
//! that reads one schema's keywords.

use serde_json::{json, Value};

/// Merges schema `b` into `a` (allOf semantics, approximately): properties
/// and `required` are united, bounds tightened, other keywords kept from `a`
/// and filled in from `b`.
pub(super) fn merge(a: Value, b: Value) -> Value {
    let (mut a, b) = match (a, b) {
        (Value::Object(a), Value::Object(b)) => (a, b),
        (Value::Bool(false), _) | (_, Value::Bool(false)) => return Value::Bool(false),
        (Value::Object(a), _) => return Value::Object(a),
        (_, b) => return b,
    };
    for (k, bv) in b {
        let Some(av) = a.remove(&k) else {
            a.insert(k, bv);
            continue;
        };
        let merged = match k.as_str() {
            "properties" => match (av, bv) {
                (Value::Object(mut ap), Value::Object(bp)) => {
                    for (name, schema) in bp {
                        let combined = match ap.remove(&name) {
                            Some(existing) => json!({"allOf": [existing, schema]}),
                            None => schema,
                        };
                        ap.insert(name, combined);
                    }
                    Value::Object(ap)
                }
                (av, _) => av,
            },
            "required" => match (av, bv) {
                (Value::Array(mut ar), Value::Array(br)) => {
                    for r in br {
                        if !ar.contains(&r) {
                            ar.push(r);
                        }
                    }
                    Value::Array(ar)
                }
                (av, _) => av,
            },
            "type" => intersect_types(av, bv),
            "enum" => match (&av, &bv) {
                (Value::Array(ae), Value::Array(be)) => {
                    let both: Vec<Value> = ae.iter().filter(|x| be.contains(x)).cloned().collect();
                    if both.is_empty() {
                        av
                    } else {
                        Value::Array(both)
                    }
                }
                _ => av,
            },
            "minimum" | "exclusiveMinimum" | "minLength" | "minItems" | "minProperties" => {
                tighten(av, bv, true)
            }
            "maximum" | "exclusiveMaximum" | "maxLength" | "maxItems" | "maxProperties" => {
                tighten(av, bv, false)
            }
            "items" | "additionalProperties" if av.is_object() && bv.is_object() => {
                json!({"allOf": [av, bv]})
            }
            _ => av,
        };
        a.insert(k, merged);
    }
    Value::Object(a)
}

fn tighten(a: Value, b: Value, larger: bool) -> Value {
    match (a.as_f64(), b.as_f64()) {
        (Some(x), Some(y)) if (y > x) == larger && y != x => b,
        _ => a,
    }
}

fn intersect_types(a: Value, b: Value) -> Value {
    let list = |v: &Value| -> Vec<Value> {
        match v {
            Value::Array(a) => a.clone(),
            Value::String(_) => vec![v.clone()],
            _ => Vec::new(),
        }
    };
    let (la, lb) = (list(&a), list(&b));
    let both: Vec<Value> = la
        .iter()
        .filter(|t| {
            lb.contains(t) || (t.as_str() == Some("number") && lb.contains(&json!("integer")))
        })
        .map(|t| {
            if t.as_str() == Some("number") && lb.contains(&json!("integer")) {
                json!("integer")
            } else {
                t.clone()
            }
        })
        .collect();
    match both.len() {
        0 => b,
        1 => both.into_iter().next().unwrap_or(b),
        _ => Value::Array(both),
    }
}
