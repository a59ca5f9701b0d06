//! Finding the nodes a JSONPath selects and changing them: removal and
//! Overlay 1.1's merge rules.

use serde_json::{Map, Value};
use serde_json_path::{JsonPath, NormalizedPath, PathElement};

use super::Seg;

/// Located nodes in query order. RFC 9535 lets a query (`$.a[0,0]`) select
/// a node twice; each node is acted on once, so duplicates are dropped.
pub(super) fn locate(path: &JsonPath, doc: &Value) -> Vec<Vec<Seg>> {
    let mut seen = std::collections::HashSet::new();
    path.query_located(doc)
        .iter()
        .map(|node| owned_path(node.location()))
        .filter(|p| seen.insert(p.clone()))
        .collect()
}

pub(super) fn owned_path(p: &NormalizedPath<'_>) -> Vec<Seg> {
    p.iter()
        .map(|e| match e {
            PathElement::Name(n) => Seg::Key((*n).to_string()),
            PathElement::Index(i) => Seg::Index(*i),
        })
        .collect()
}

pub(super) fn pointer(path: &[Seg]) -> String {
    if path.is_empty() {
        return "/ (the root)".to_string();
    }
    let mut out = String::new();
    for seg in path {
        out.push('/');
        match seg {
            Seg::Key(k) => out.push_str(&k.replace('~', "~0").replace('/', "~1")),
            Seg::Index(i) => out.push_str(&i.to_string()),
        }
    }
    out
}

pub(super) fn node_mut<'a>(doc: &'a mut Value, path: &[Seg]) -> Option<&'a mut Value> {
    path.iter().try_fold(doc, |node, seg| match (node, seg) {
        (Value::Object(m), Seg::Key(k)) => m.get_mut(k),
        (Value::Array(a), Seg::Index(i)) => a.get_mut(*i),
        _ => None,
    })
}

pub(super) fn node<'a>(doc: &'a Value, path: &[Seg]) -> Option<&'a Value> {
    path.iter().try_fold(doc, |node, seg| match (node, seg) {
        (Value::Object(m), Seg::Key(k)) => m.get(k),
        (Value::Array(a), Seg::Index(i)) => a.get(*i),
        _ => None,
    })
}

pub(super) fn remove_all(doc: &mut Value, mut targets: Vec<Vec<Seg>>) -> Result<(), String> {
    if targets.iter().any(Vec::is_empty) {
        return Err("`remove` cannot delete the document root `$`".to_string());
    }
    // Highest index first within each array, descendants before their
    // ancestors: every earlier removal leaves the later paths valid.
    targets.sort_unstable_by(|a, b| b.cmp(a));
    for path in &targets {
        let Some((last, parent)) = path.split_last() else {
            continue;
        };
        match (node_mut(doc, parent), last) {
            (Some(Value::Object(m)), Seg::Key(k)) => {
                // shift_remove keeps the remaining keys in document order.
                m.shift_remove(k);
            }
            (Some(Value::Array(a)), Seg::Index(i)) if *i < a.len() => {
                a.remove(*i);
            }
            _ => {}
        }
    }
    Ok(())
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Object,
    Array,
    Primitive,
}

fn kind(v: &Value) -> Kind {
    match v {
        Value::Object(_) => Kind::Object,
        Value::Array(_) => Kind::Array,
        _ => Kind::Primitive,
    }
}

pub(super) fn kind_name(v: &Value) -> &'static str {
    match v {
        Value::Object(_) => "an object",
        Value::Array(_) => "an array",
        Value::String(_) => "a string",
        Value::Number(_) => "a number",
        Value::Bool(_) => "a boolean",
        Value::Null => "null",
    }
}

/// The single node a `copy` source selects, not yet copied.
pub(super) fn locate_source<'a>(
    doc: &'a Value,
    source: &str,
    path: &JsonPath,
) -> Result<&'a Value, String> {
    let found = locate(path, doc);
    match found.as_slice() {
        [one] => {
            node(doc, one).ok_or_else(|| format!("`copy` source {source:?} vanished while copying"))
        }
        [] => Err(format!(
            "`copy` source {source:?} matched nothing; it must select exactly one node"
        )),
        many => Err(format!(
            "`copy` source {source:?} matched {} nodes ({} ...); it must select exactly one",
            many.len(),
            pointer(&many[0])
        )),
    }
}

/// Applies an `update` (or copied) value to every target. Kinds are
/// checked for all targets first, so a wrong-typed update fails before it
/// changes anything; a nested incompatibility can still fail midway.
pub(super) fn merge_all(
    doc: &mut Value,
    targets: &[Vec<Seg>],
    value: &Value,
    verb: &str,
) -> Result<(), String> {
    let nodes: Vec<(&Vec<Seg>, &Value)> = targets
        .iter()
        .filter_map(|p| node(doc, p).map(|n| (p, n)))
        .collect();
    if let Some(&(p0, n0)) = nodes.first() {
        if let Some(&(p, n)) = nodes.iter().find(|(_, n)| kind(n) != kind(n0)) {
            return Err(format!(
                "the target selects nodes of different kinds ({} at {}, {} at {}); \
                 an {verb} needs all objects, all arrays or all primitive values",
                kind_name(n0),
                pointer(p0),
                kind_name(n),
                pointer(p)
            ));
        }
        let expected = match kind(n0) {
            Kind::Object if !value.is_object() => Some("an object of properties to merge"),
            Kind::Primitive if kind(value) != Kind::Primitive => {
                Some("a primitive value (string, number, boolean or null) to replace it")
            }
            _ => None,
        };
        if let Some(expected) = expected {
            return Err(format!(
                "at {}: the {verb} value is {} but the target is {}; expected {expected}",
                pointer(p0),
                kind_name(value),
                kind_name(n0)
            ));
        }
    }
    for path in targets {
        let Some(target) = node_mut(doc, path) else {
            continue;
        };
        match (target, value) {
            (Value::Array(items), Value::Array(more)) => items.extend(more.iter().cloned()),
            (Value::Array(items), one) => items.push(one.clone()),
            (Value::Object(props), Value::Object(update)) => {
                let mut at = pointer(path);
                if path.is_empty() {
                    at.clear();
                }
                merge_object(props, update, &mut at, verb)?;
            }
            (slot, primitive) => *slot = primitive.clone(),
        }
    }
    Ok(())
}

/// Overlay 1.1 merge rules; `at` is the JSON pointer of `target`.
fn merge_object(
    target: &mut Map<String, Value>,
    update: &Map<String, Value>,
    at: &mut String,
    verb: &str,
) -> Result<(), String> {
    for (key, new) in update {
        let Some(old) = target.get_mut(key) else {
            target.insert(key.clone(), new.clone());
            continue;
        };
        let len = at.len();
        at.push('/');
        at.push_str(&key.replace('~', "~0").replace('/', "~1"));
        match (old, new) {
            (Value::Object(o), Value::Object(n)) => merge_object(o, n, at, verb)?,
            (Value::Array(o), Value::Array(n)) => o.extend(n.iter().cloned()),
            (o, n) if kind(o) == Kind::Primitive && kind(n) == Kind::Primitive => *o = n.clone(),
            (o, n) => {
                return Err(format!(
                    "at {at}: the {verb} has {} where the document has {}; objects merge \
                     into objects, arrays into arrays, primitives into primitives",
                    kind_name(n),
                    kind_name(o)
                ))
            }
        }
        at.truncate(len);
    }
    Ok(())
}
