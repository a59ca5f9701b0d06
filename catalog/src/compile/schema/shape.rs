//! Questions about a converted schema's shape, and `nullable`: what the
//! request plan and the response side ask of a schema once it is built.

use std::collections::HashSet;

use serde_json::Value;

use crate::compile::node::{object, Node, Object};

/// 3.0 `nullable: true` as JSON Schema: `null` added to `type` (and to
/// `enum`, which would otherwise still refuse it), or `anyOf [schema, null]`
/// when there is no type to extend.
pub fn make_nullable(mut m: Object<'_>) -> Node<'_> {
    let null = Value::String("null".into());
    match m.get_mut("type") {
        Some(Node::Leaf(t)) if t.is_string() => {
            if t.as_str() != Some("null") {
                let t = t.clone().into_owned();
                m.insert("type".into(), Node::owned(Value::Array(vec![t, null])));
            }
        }
        Some(Node::Leaf(a)) if a.is_array() => {
            if let Value::Array(a) = a.to_mut() {
                if !a.contains(&null) {
                    a.push(null);
                }
            }
        }
        _ => {
            if m.is_empty() {
                return Node::Object(m);
            }
            let mut wrapper = object(0);
            for k in ["description", "title"] {
                if let Some(v) = m.get(k) {
                    wrapper.insert(k.into(), v.clone());
                }
            }
            let mut null_schema = object(1);
            null_schema.insert("type".into(), Node::string("null"));
            wrapper.insert(
                "anyOf".into(),
                Node::Array(vec![Node::Object(m), Node::Object(null_schema)]),
            );
            return Node::Object(wrapper);
        }
    }
    if let Some(Node::Leaf(e)) = m.get_mut("enum") {
        if e.as_array().is_some_and(|e| !e.contains(&Value::Null)) {
            if let Value::Array(e) = e.to_mut() {
                e.push(Value::Null);
            }
        }
    }
    Node::Object(m)
}

/// Whether a converted schema describes an object (usable as an MCP
/// `inputSchema`/`outputSchema` root or as a mergeable body).
pub fn is_object_schema(s: &Node<'_>) -> bool {
    match s.get("type") {
        Some(t) => t.as_str() == Some("object"),
        None => {
            s.get("properties").is_some()
                || matches!(s.get("allOf").map(Node::resolved),
                    Some(Node::Array(parts)) if !parts.is_empty() && parts.iter().all(is_object_schema))
        }
    }
}

/// Property names of a converted object schema (with `allOf` of objects)
/// flattened into one set, in order, or `None` if the shape does not allow
/// it (a property name declared twice, non-object parts, oneOf/anyOf at the
/// top). Borrows: callers decide on the names before [`take_flat`] moves the
/// schemas out, so bodies are never copied.
pub fn flat_property_names<'a>(s: &'a Node<'_>) -> Option<Vec<&'a str>> {
    let mut names = Vec::new();
    let mut seen = HashSet::new();
    collect_flat_names(s, &mut names, &mut seen)?;
    Some(names)
}

fn collect_flat_names<'a>(
    s: &'a Node<'_>,
    names: &mut Vec<&'a str>,
    seen: &mut HashSet<&'a str>,
) -> Option<()> {
    let obj = s.as_object()?;
    if !is_object_schema(s) || obj.contains_key("oneOf") || obj.contains_key("anyOf") {
        return None;
    }
    if let Some(p) = obj.get("properties").and_then(Node::as_object) {
        for k in p.keys() {
            if !seen.insert(k.as_ref()) {
                return None;
            }
            names.push(k.as_ref());
        }
    }
    if let Some(Node::Array(parts)) = obj.get("allOf").map(Node::resolved) {
        for part in parts {
            collect_flat_names(part, names, seen)?;
        }
    }
    Some(())
}

/// Moves a schema's flattened `(properties, required)` out of it. Only
/// meaningful once [`flat_property_names`] has accepted the schema: a name
/// declared twice would be overwritten here.
pub fn take_flat(s: Node<'_>) -> (Object<'_>, Vec<String>) {
    let mut props = object(0);
    let mut required = Vec::new();
    let Some(obj) = s.into_object() else {
        return (props, required);
    };
    let mut parts = None;
    for (k, v) in obj {
        match k.as_ref() {
            "properties" => {
                if let Some(p) = v.into_object() {
                    props = p;
                }
            }
            "required" => {
                if let Node::Leaf(r) = v {
                    if let Value::Array(r) = r.into_owned() {
                        required = r
                            .into_iter()
                            .filter_map(|x| match x {
                                Value::String(s) => Some(s),
                                _ => None,
                            })
                            .collect();
                    }
                }
            }
            "allOf" => match v {
                Node::Array(a) => parts = Some(a),
                Node::Shared(_) => {
                    if let Node::Array(a) = v.resolved() {
                        parts = Some(a.clone());
                    }
                }
                _ => {}
            },
            _ => {}
        }
    }
    for part in parts.into_iter().flatten() {
        let (p, r) = take_flat(part);
        debug_assert!(p.keys().all(|k| !props.contains_key(k)));
        props.extend(p);
        required.extend(r);
    }
    required.dedup();
    (props, required)
}
