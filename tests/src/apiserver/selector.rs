//! Label and field selectors as the API server parses them from
//! `labelSelector` and `fieldSelector`.
//!
//! Faithful: label selector operators `=`, `==`, `!=`, `in`, `notin`,
//! existence (`key`) and non-existence (`!key`); `!=` and `notin` match
//! objects without the label. Field selectors `=`, `==`, `!=`.
//! Simplified: field selectors accept any dotted path into the object
//! (the real server allows only a per-kind list such as `metadata.name`,
//! `metadata.namespace`, `involvedObject.uid`); value escaping is not
//! supported.

use serde_json::Value;

use super::status::ApiError;

#[derive(Debug, Clone, PartialEq)]
enum LabelReq {
    Eq(String, String),
    NotEq(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    NotExists(String),
}

/// A parsed `labelSelector`; the empty selector matches everything.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct LabelSelector(Vec<LabelReq>);

fn split_top_level(s: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut depth = 0i32;
    let mut start = 0;
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&s[start..]);
    parts
        .into_iter()
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .collect()
}

fn invalid(sel: &str, why: &str) -> ApiError {
    ApiError::bad_request(format!("unable to parse requirement: {why}: {sel:?}"))
}

impl LabelSelector {
    pub fn parse(s: &str) -> Result<Self, ApiError> {
        let mut reqs = Vec::new();
        for part in split_top_level(s) {
            let req = if let Some(key) = part.strip_prefix('!') {
                LabelReq::NotExists(key.trim().to_string())
            } else if let Some((k, v)) = part.split_once("!=") {
                LabelReq::NotEq(k.trim().into(), v.trim().into())
            } else if let Some((k, v)) = part.split_once("==") {
                LabelReq::Eq(k.trim().into(), v.trim().into())
            } else if let Some((k, v)) = part.split_once('=') {
                LabelReq::Eq(k.trim().into(), v.trim().into())
            } else if let Some(open) = part.find('(') {
                let head: Vec<&str> = part[..open].split_whitespace().collect();
                let close = part
                    .rfind(')')
                    .ok_or_else(|| invalid(part, "missing ')'"))?;
                if close < open {
                    return Err(invalid(part, "misplaced ')'"));
                }
                let values: Vec<String> = part[open + 1..close]
                    .split(',')
                    .map(|v| v.trim().to_string())
                    .filter(|v| !v.is_empty())
                    .collect();
                match head.as_slice() {
                    [k, "in"] => LabelReq::In(k.to_string(), values),
                    [k, "notin"] => LabelReq::NotIn(k.to_string(), values),
                    _ => return Err(invalid(part, "expected 'in' or 'notin'")),
                }
            } else if part.split_whitespace().count() == 1 {
                LabelReq::Exists(part.to_string())
            } else {
                return Err(invalid(part, "unknown operator"));
            };
            reqs.push(req);
        }
        Ok(LabelSelector(reqs))
    }

    pub fn matches(&self, obj: &Value) -> bool {
        let labels = &obj["metadata"]["labels"];
        let get = |k: &str| labels.get(k).and_then(Value::as_str);
        self.0.iter().all(|r| match r {
            LabelReq::Eq(k, v) => get(k) == Some(v.as_str()),
            LabelReq::NotEq(k, v) => get(k) != Some(v.as_str()),
            LabelReq::In(k, vs) => get(k).is_some_and(|x| vs.iter().any(|v| v == x)),
            LabelReq::NotIn(k, vs) => !get(k).is_some_and(|x| vs.iter().any(|v| v == x)),
            LabelReq::Exists(k) => get(k).is_some(),
            LabelReq::NotExists(k) => get(k).is_none(),
        })
    }
}

/// A parsed `fieldSelector`.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct FieldSelector(Vec<(String, bool, String)>);

impl FieldSelector {
    pub fn parse(s: &str) -> Result<Self, ApiError> {
        let mut reqs = Vec::new();
        for part in split_top_level(s) {
            let (path, eq, value) = if let Some((k, v)) = part.split_once("!=") {
                (k, false, v)
            } else if let Some((k, v)) = part.split_once("==") {
                (k, true, v)
            } else if let Some((k, v)) = part.split_once('=') {
                (k, true, v)
            } else {
                return Err(ApiError::bad_request(format!(
                    "invalid selector: '{part}'; can't understand '{part}'"
                )));
            };
            reqs.push((path.trim().to_string(), eq, value.trim().to_string()));
        }
        Ok(FieldSelector(reqs))
    }

    /// The name an `metadata.name=x` requirement pins, as the real server
    /// reads it to authorize a list or watch of one object by name.
    pub fn exact_name(&self) -> Option<&str> {
        self.0
            .iter()
            .find(|(path, eq, _)| path == "metadata.name" && *eq)
            .map(|(_, _, v)| v.as_str())
    }

    pub fn matches(&self, obj: &Value) -> bool {
        self.0.iter().all(|(path, eq, want)| {
            let mut cur = obj;
            for seg in path.split('.') {
                cur = &cur[seg];
            }
            let have = match cur {
                Value::Null => String::new(),
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            (have == *want) == *eq
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(labels: Value) -> Value {
        json!({"metadata": {"name": "a", "namespace": "ns", "labels": labels}})
    }

    #[test]
    fn label_selector_operators_follow_kubernetes_semantics() {
        let o = obj(json!({"app": "web", "tier": "front"}));
        let yes = [
            "app=web",
            "app==web",
            "app!=db",
            "app in (web, db)",
            "tier notin (back)",
            "app",
            "!missing",
            "app=web,tier in (front)",
            "missing!=x",
            "missing notin (x)",
        ];
        for s in yes {
            assert!(
                LabelSelector::parse(s).unwrap().matches(&o),
                "{s} should match"
            );
        }
        let no = [
            "app=db",
            "app!=web",
            "app in (db)",
            "tier notin (front)",
            "missing",
            "!app",
        ];
        for s in no {
            assert!(
                !LabelSelector::parse(s).unwrap().matches(&o),
                "{s} should not match"
            );
        }
    }

    #[test]
    fn malformed_label_selector_is_a_bad_request() {
        let err = LabelSelector::parse("app in web").unwrap_err();
        assert_eq!(err.code, 400);
    }

    #[test]
    fn field_selector_matches_name_namespace_and_nested_fields() {
        let o =
            json!({"metadata": {"name": "a", "namespace": "ns"}, "involvedObject": {"uid": "u1"}});
        assert!(
            FieldSelector::parse("metadata.name=a,metadata.namespace==ns")
                .unwrap()
                .matches(&o)
        );
        assert!(FieldSelector::parse("involvedObject.uid=u1")
            .unwrap()
            .matches(&o));
        assert!(!FieldSelector::parse("metadata.name!=a")
            .unwrap()
            .matches(&o));
    }
}
