//! Single keywords of a schema: which are copied, how 3.0 types and
//! `enum`s become 2020-12 ones.

use std::collections::{HashMap, HashSet};

use serde_json::Value;

use crate::compile::node::Node;

const TYPE_NAMES: [&str; 7] = [
    "string", "number", "integer", "boolean", "array", "object", "null",
];

/// Keywords copied as they are when their value has the type JSON Schema
/// requires (a wrong type would make the whole schema invalid, e.g.
/// `maxLength: -1` or `multipleOf: 0`). Unknown keywords are dropped.
pub(super) fn scalar_keyword_ok(key: &str, v: &Value) -> bool {
    match key {
        "minimum" | "maximum" | "exclusiveMinimum" | "exclusiveMaximum" => v.is_number(),
        "multipleOf" => v.as_f64().is_some_and(|f| f > 0.0),
        "minLength" | "maxLength" | "minItems" | "maxItems" | "minProperties" | "maxProperties"
        | "minContains" | "maxContains" => v.is_u64(),
        "uniqueItems" | "deprecated" | "readOnly" | "writeOnly" => v.is_boolean(),
        "title" | "description" | "format" | "contentMediaType" | "contentEncoding"
        | "$comment" => v.is_string(),
        "const" | "default" => true,
        "examples" => v.is_array(),
        // Property name lists, each name once.
        "dependentRequired" => v.as_object().is_some_and(|m| {
            m.values().all(|names| {
                names.as_array().is_some_and(|a| {
                    let mut seen = HashSet::with_capacity(a.len());
                    a.iter().all(|x| x.as_str().is_some_and(|x| seen.insert(x)))
                })
            })
        }),
        _ => false,
    }
}

/// Whether a schema with this `type` can be an array: no type, an invalid
/// one (which is dropped), or one naming `array`.
pub(super) fn may_be_array(t: Option<&Value>) -> bool {
    let Some(t) = t.filter(|t| convert_type(t).is_some()) else {
        return true;
    };
    match t {
        Value::String(s) => s == "array",
        Value::Array(a) => a.iter().any(|x| x == "array"),
        _ => true,
    }
}

/// A schema that accepts every instance: no keyword but annotations.
pub(super) fn is_open(s: &Node<'_>) -> bool {
    match s.resolved() {
        Node::Leaf(v) => v.as_bool() == Some(true),
        Node::Object(m) => m.keys().all(|k| {
            matches!(
                k.as_ref(),
                "description"
                    | "title"
                    | "examples"
                    | "default"
                    | "deprecated"
                    | "$comment"
                    | "readOnly"
                    | "writeOnly"
            )
        }),
        _ => false,
    }
}

pub(super) fn ref_name(r: &str) -> &str {
    r.rsplit('/').next().unwrap_or(r)
}

/// Returns the normalised type; `file-as-string` for Swagger's `file`.
pub(super) fn convert_type(v: &Value) -> Option<&str> {
    match v {
        Value::String(s) if s == "file" => Some("file-as-string"),
        Value::String(s) if TYPE_NAMES.contains(&s.as_str()) => Some("single"),
        Value::Array(a)
            if !a.is_empty()
                && a.iter()
                    .all(|t| t.as_str().is_some_and(|t| TYPE_NAMES.contains(&t))) =>
        {
            Some("array")
        }
        _ => None,
    }
}

pub(super) fn t_value<'d>(kind: &str, original: &'d Value) -> Node<'d> {
    match (kind, original) {
        ("array", Value::Array(a)) => {
            let d = dedup(a.clone());
            Node::owned(if d.len() == 1 {
                d.into_iter().next().unwrap_or(Value::Null)
            } else {
                Value::Array(d)
            })
        }
        _ => Node::borrowed(original),
    }
}

/// The items without repeats (first one kept), by JSON equality. Linear:
/// a 100,000-value `enum` or `required` list must not cost 10^10
/// comparisons. Items are bucketed by [`value_hash`] and compared only
/// within a bucket.
pub(super) fn dedup(items: Vec<Value>) -> Vec<Value> {
    // Short lists (nearly all) are cheaper compared pairwise than hashed.
    if items.len() <= 16 {
        let mut out: Vec<Value> = Vec::with_capacity(items.len());
        for i in items {
            if !out.contains(&i) {
                out.push(i);
            }
        }
        return out;
    }
    let mut buckets: HashMap<u64, Vec<usize>> = HashMap::with_capacity(items.len());
    let mut out: Vec<Value> = Vec::with_capacity(items.len());
    for i in items {
        let bucket = buckets.entry(value_hash(&i)).or_default();
        if !bucket.iter().any(|&j| out[j] == i) {
            bucket.push(out.len());
            out.push(i);
        }
    }
    out
}

/// A hash consistent with `Value`'s `==`: objects compare as maps (key
/// order aside) and `-0.0 == 0.0`, so both hash alike. Iterative, so any
/// depth is fine.
pub(super) fn value_hash(v: &Value) -> u64 {
    use std::hash::{BuildHasher, Hash, Hasher};
    let seed = foldhash::fast::FixedState::default();
    let mut total = 0u64;
    // (value, multiplier): array items are weighted by position, object
    // entries are summed so that their order does not matter.
    let mut stack = vec![(v, 1u64)];
    while let Some((v, weight)) = stack.pop() {
        let mut h = seed.build_hasher();
        match v {
            Value::Null => 0u8.hash(&mut h),
            Value::Bool(b) => (1u8, *b).hash(&mut h),
            Value::Number(n) => {
                2u8.hash(&mut h);
                if let Some(u) = n.as_u64() {
                    (0u8, u).hash(&mut h);
                } else if let Some(i) = n.as_i64() {
                    (1u8, i).hash(&mut h);
                } else {
                    let f = n.as_f64().unwrap_or(0.0);
                    (2u8, if f == 0.0 { 0 } else { f.to_bits() }).hash(&mut h);
                }
            }
            Value::String(s) => (3u8, s).hash(&mut h),
            Value::Array(a) => {
                (4u8, a.len()).hash(&mut h);
                for (i, x) in a.iter().enumerate() {
                    let w = weight
                        .wrapping_mul(0x9e37_79b9_7f4a_7c15)
                        .wrapping_add(i as u64 * 2 + 1);
                    stack.push((x, w));
                }
            }
            Value::Object(m) => {
                (5u8, m.len()).hash(&mut h);
                for (k, x) in m {
                    let w = weight.wrapping_mul(seed.hash_one(k) | 1);
                    stack.push((x, w));
                }
            }
        }
        total = total.wrapping_add(h.finish().wrapping_mul(weight));
    }
    total
}
