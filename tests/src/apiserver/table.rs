//! `meta.k8s.io/v1` Table responses for `kubectl get`.
//!
//! Faithful: custom resources show `Name` plus their
//! `additionalPrinterColumns` (JSONPath with `.field`, `[n]`, `[*]` and
//! `[?(@.field=="value")]` filters; `date` columns rendered as ages like
//! `5m12s` the way the server does); without printer columns they show
//! Name and Age; rows carry `PartialObjectMetadata` (or the whole object
//! with `includeObject=Object`, nothing with `includeObject=None`).
//! Simplified: built-in kinds show a shortened column set (Name, a few
//! kind-specific columns, Age) rather than the real server's printers.

use serde_json::{json, Value};

use super::discovery::{PrinterColumn, ResourceType};

fn col(name: &str, type_: &str, path: &str) -> PrinterColumn {
    PrinterColumn {
        name: name.into(),
        type_: type_.into(),
        format: String::new(),
        description: String::new(),
        json_path: path.into(),
        priority: 0,
    }
}

fn columns(rt: &ResourceType, version: &str) -> Vec<PrinterColumn> {
    let age = col("Age", "date", ".metadata.creationTimestamp");
    let mut cols = match (rt.group.as_str(), rt.plural.as_str()) {
        ("", "namespaces") => vec![col("Status", "string", ".status.phase"), age],
        ("", "configmaps") => vec![
            col("Data", "integer", "#count(.data)+count(.binaryData)"),
            age,
        ],
        ("", "secrets") => vec![
            col("Type", "string", ".type"),
            col("Data", "integer", "#count(.data)"),
            age,
        ],
        ("", "services") => vec![
            col("Type", "string", ".spec.type"),
            col("Cluster-IP", "string", ".spec.clusterIP"),
            age,
        ],
        ("coordination.k8s.io", "leases") => {
            vec![col("Holder", "string", ".spec.holderIdentity"), age]
        }
        ("apiextensions.k8s.io", "customresourcedefinitions") => {
            vec![col("Created At", "string", ".metadata.creationTimestamp")]
        }
        _ => match rt.printer_columns.get(version).filter(|c| !c.is_empty()) {
            Some(c) => c.clone(),
            None => vec![age],
        },
    };
    let mut name = col("Name", "string", ".metadata.name");
    name.format = "name".into();
    name.description = "Name must be unique within a namespace.".into();
    cols.insert(0, name);
    cols
}

/// Renders `items` as a Table.
pub(crate) fn table(
    rt: &ResourceType,
    version: &str,
    items: &[Value],
    rv: &str,
    include: &str,
) -> Value {
    let cols = columns(rt, version);
    let defs: Vec<Value> = cols
        .iter()
        .map(|c| json!({"name": c.name, "type": c.type_, "format": c.format, "description": c.description, "priority": c.priority}))
        .collect();
    let now = jiff::Timestamp::now();
    let rows: Vec<Value> = items
        .iter()
        .map(|o| {
            let cells: Vec<Value> = cols.iter().map(|c| cell(c, o, now)).collect();
            let mut row = json!({"cells": cells});
            match include {
                "None" => {}
                "Object" => row["object"] = o.clone(),
                _ => {
                    row["object"] = json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": o["metadata"]})
                }
            }
            row
        })
        .collect();
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {"resourceVersion": rv},
        "columnDefinitions": defs,
        "rows": rows,
    })
}

fn cell(c: &PrinterColumn, o: &Value, now: jiff::Timestamp) -> Value {
    if let Some(expr) = c.json_path.strip_prefix('#') {
        let n: usize = expr
            .split('+')
            .map(|p| {
                let inner = p.trim_start_matches("count(").trim_end_matches(')');
                eval(o, inner)
                    .first()
                    .and_then(|v| v.as_object())
                    .map_or(0, |m| m.len())
            })
            .sum();
        return json!(n);
    }
    let found = eval(o, &c.json_path);
    let Some(first) = found.first() else {
        return Value::Null;
    };
    match c.type_.as_str() {
        "date" => match first
            .as_str()
            .and_then(|s| s.parse::<jiff::Timestamp>().ok())
        {
            Some(t) => json!(human_duration(now.as_second() - t.as_second())),
            None => Value::Null,
        },
        "string" if found.len() > 1 => {
            let parts: Vec<String> = found.iter().map(plain).collect();
            json!(parts.join(","))
        }
        "string" => json!(plain(first)),
        _ => first.clone(),
    }
}

fn plain(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Kubernetes' `duration.HumanDuration`.
pub(crate) fn human_duration(seconds: i64) -> String {
    if seconds < -1 {
        return "<invalid>".into();
    }
    let s = seconds.max(0);
    let (m, h) = (s / 60, s / 3600);
    match () {
        _ if s < 120 => format!("{s}s"),
        _ if m < 10 => match s % 60 {
            0 => format!("{m}m"),
            r => format!("{m}m{r}s"),
        },
        _ if m < 180 => format!("{m}m"),
        _ if h < 8 => match m % 60 {
            0 => format!("{h}h"),
            r => format!("{h}h{r}m"),
        },
        _ if h < 48 => format!("{h}h"),
        _ if h < 24 * 8 => match h % 24 {
            0 => format!("{}d", h / 24),
            r => format!("{}d{r}h", h / 24),
        },
        _ if h < 24 * 365 * 2 => format!("{}d", h / 24),
        _ if h < 24 * 365 * 8 => match (h / 24) % 365 {
            0 => format!("{}y", h / 24 / 365),
            r => format!("{}y{r}d", h / 24 / 365),
        },
        _ => format!("{}y", h / 24 / 365),
    }
}

/// Evaluates the JSONPath subset printer columns use; unsupported syntax
/// finds nothing rather than failing the request.
pub(crate) fn eval(root: &Value, path: &str) -> Vec<Value> {
    let path = path
        .trim()
        .trim_start_matches('{')
        .trim_end_matches('}')
        .trim_start_matches('$');
    let mut cur = vec![root.clone()];
    let mut rest = path;
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix('.') {
            let end = r.find(['.', '[']).unwrap_or(r.len());
            let key = &r[..end];
            if !key.is_empty() {
                cur = cur.iter().filter_map(|v| v.get(key).cloned()).collect();
            }
            rest = &r[end..];
        } else if let Some(r) = rest.strip_prefix('[') {
            let Some(close) = find_close(r) else {
                return vec![];
            };
            let inner = &r[..close];
            rest = &r[close + 1..];
            cur = if inner == "*" {
                cur.iter()
                    .flat_map(|v| match v {
                        Value::Array(a) => a.clone(),
                        Value::Object(m) => m.values().cloned().collect(),
                        _ => vec![],
                    })
                    .collect()
            } else if let Ok(i) = inner.parse::<i64>() {
                cur.iter()
                    .filter_map(|v| {
                        let a = v.as_array()?;
                        let idx = if i < 0 { a.len() as i64 + i } else { i };
                        a.get(usize::try_from(idx).ok()?).cloned()
                    })
                    .collect()
            } else if let Some(filter) = inner.strip_prefix("?(").and_then(|f| f.strip_suffix(')'))
            {
                let Some((lhs, neg, rhs)) = split_cmp(filter) else {
                    return vec![];
                };
                let want: Value =
                    serde_json::from_str(&rhs.replace('\'', "\"")).unwrap_or(Value::Null);
                cur.iter()
                    .filter_map(Value::as_array)
                    .flatten()
                    .filter(|item| {
                        let got = eval(item, lhs.trim_start_matches('@'));
                        (got.first() == Some(&want)) != neg
                    })
                    .cloned()
                    .collect()
            } else {
                let key = inner.trim_matches(|c| c == '\'' || c == '"');
                cur.iter().filter_map(|v| v.get(key).cloned()).collect()
            };
        } else {
            return vec![];
        }
    }
    cur
}

fn find_close(s: &str) -> Option<usize> {
    let mut depth = 0;
    let mut quote = None;
    for (i, c) in s.char_indices() {
        match (c, quote) {
            ('"' | '\'', None) => quote = Some(c),
            (q, Some(open)) if q == open => quote = None,
            (_, Some(_)) => {}
            ('(', None) => depth += 1,
            (')', None) => depth -= 1,
            (']', None) if depth == 0 => return Some(i),
            _ => {}
        }
    }
    None
}

fn split_cmp(f: &str) -> Option<(&str, bool, &str)> {
    if let Some((l, r)) = f.split_once("!=") {
        return Some((l.trim(), true, r.trim()));
    }
    f.split_once("==").map(|(l, r)| (l.trim(), false, r.trim()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jsonpath_filters_pick_the_ready_condition() {
        let o = json!({"status": {"conditions": [
            {"type": "Compiled", "status": "True"}, {"type": "Ready", "status": "False", "reason": "PrefixConflict"}]}});
        assert_eq!(
            eval(&o, r#".status.conditions[?(@.type=="Ready")].status"#),
            vec![json!("False")]
        );
        assert_eq!(
            eval(&o, ".status.conditions[?(@.type=='Ready')].reason"),
            vec![json!("PrefixConflict")]
        );
        assert_eq!(eval(&o, ".status.conditions[*].type").len(), 2);
        assert_eq!(
            eval(&o, ".status.conditions[-1].type"),
            vec![json!("Ready")]
        );
        assert!(eval(&o, ".status.missing").is_empty());
    }

    #[test]
    fn ages_read_like_kubectl() {
        assert_eq!(human_duration(5), "5s");
        assert_eq!(human_duration(125), "2m5s");
        assert_eq!(human_duration(3600 * 3 + 60), "3h1m");
        assert_eq!(human_duration(86400 * 3), "3d");
    }
}
