//! Custom resource admission against a CRD version's `openAPIV3Schema`:
//! pruning, defaulting, structural validation and CEL rules.
//!
//! Faithful: unknown fields are pruned unless
//! `x-kubernetes-preserve-unknown-fields` (apiVersion, kind and metadata at
//! the root are kept); `default`s fill absent properties; type, required,
//! properties, items, enum, pattern, minimum/maximum, min/max length and
//! items, oneOf/anyOf/allOf/not are checked (by the `jsonschema` crate on a
//! converted schema: `x-kubernetes-*` keys dropped, `nullable` widened to
//! allow null, int-or-string allows both); `x-kubernetes-validations` rules
//! are evaluated with `self` (and `oldSelf` on updates; transition rules are
//! skipped on create), and a false rule is a 422 whose cause reads
//! `<field>: Invalid value: "object": <message>` as the real server's does;
//! CRD validation ratcheting (on by default since Kubernetes 1.30, GA in
//! 1.33) for CEL rules: a rule without `oldSelf` that fails on a value
//! equal to its old value is ignored, so objects stored before a rule was
//! added can still be updated elsewhere (finalizers, other fields).
//! Simplified: CEL is the `cel-interpreter` crate's dialect (no Kubernetes
//! CEL libraries such as `url()`, `quantity()`, `isSorted()`;
//! `messageExpression` is ignored in favour of `message`); schema keywords
//! (pattern, enum, ...) are not ratcheted, only CEL rules; there is no cost
//! budget; formats are not checked; validation error wording for keywords is
//! the `jsonschema` crate's, not the real server's.

use cel::{Context, Program, Value as CelValue};
use serde_json::{Map, Value};

/// A compiled CRD version schema.
pub(crate) struct Schema {
    raw: Value,
    validator: jsonschema::Validator,
}

impl std::fmt::Debug for Schema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Schema").field("raw", &self.raw).finish()
    }
}

fn to_json_schema(v: &Value) -> Value {
    match v {
        Value::Object(m) => {
            let mut out = Map::new();
            let int_or_string = m.get("x-kubernetes-int-or-string") == Some(&Value::Bool(true));
            for (k, child) in m {
                if k.starts_with("x-kubernetes-") || k == "nullable" || k == "format" {
                    continue;
                }
                if int_or_string && k == "type" {
                    continue;
                }
                // Property names are data, not keywords: keep them verbatim.
                let converted = if k == "properties" || k == "patternProperties" {
                    match child {
                        Value::Object(props) => Value::Object(
                            props
                                .iter()
                                .map(|(n, s)| (n.clone(), to_json_schema(s)))
                                .collect(),
                        ),
                        other => other.clone(),
                    }
                } else if k == "enum" || k == "default" || k == "example" || k == "required" {
                    child.clone()
                } else {
                    to_json_schema(child)
                };
                out.insert(k.clone(), converted);
            }
            if m.get("nullable") == Some(&Value::Bool(true)) {
                if let Some(Value::String(t)) = out.get("type").cloned() {
                    out.insert("type".into(), Value::Array(vec![t.into(), "null".into()]));
                }
                if let Some(Value::Array(e)) = out.get_mut("enum") {
                    e.push(Value::Null);
                }
            }
            Value::Object(out)
        }
        Value::Array(a) => Value::Array(a.iter().map(to_json_schema).collect()),
        other => other.clone(),
    }
}

fn pointer_to_field(ptr: &str) -> String {
    let mut out = String::new();
    for seg in ptr.split('/').skip(1) {
        let seg = seg.replace("~1", "/").replace("~0", "~");
        if seg.parse::<usize>().is_ok() {
            out.push_str(&format!("[{seg}]"));
        } else {
            if !out.is_empty() {
                out.push('.');
            }
            out.push_str(&seg);
        }
    }
    out
}

fn short(v: &Value) -> String {
    match v {
        Value::Object(_) => "\"object\"".into(),
        Value::Array(_) => "\"array\"".into(),
        other => other.to_string(),
    }
}

impl Schema {
    pub fn compile(openapi: &Value) -> Result<Schema, String> {
        let converted = to_json_schema(openapi);
        let validator = jsonschema::options()
            .with_draft(jsonschema::Draft::Draft4)
            .should_validate_formats(false)
            .build(&converted)
            .map_err(|e| e.to_string())?;
        let schema = Schema {
            raw: openapi.clone(),
            validator,
        };
        let mut bad = Vec::new();
        schema.each_rule(&schema.raw, &mut |rule| {
            if let Err(e) = compile_rule(rule) {
                bad.push(format!("compilation failed for rule {rule:?}: {e}"));
            }
        });
        match bad.is_empty() {
            true => Ok(schema),
            false => Err(bad.join("; ")),
        }
    }

    /// The schema as written in the CRD.
    pub fn raw(&self) -> &Value {
        &self.raw
    }

    fn each_rule(&self, s: &Value, f: &mut dyn FnMut(&str)) {
        if let Some(rules) = s.get("x-kubernetes-validations").and_then(Value::as_array) {
            rules
                .iter()
                .filter_map(|r| r["rule"].as_str())
                .for_each(&mut *f);
        }
        for key in ["properties", "patternProperties"] {
            if let Some(props) = s.get(key).and_then(Value::as_object) {
                props.values().for_each(|p| self.each_rule(p, f));
            }
        }
        for key in ["items", "additionalProperties"] {
            if let Some(sub) = s.get(key).filter(|v| v.is_object()) {
                self.each_rule(sub, f);
            }
        }
    }

    /// Prunes, defaults and validates `obj` in place; errors are
    /// `(field, message)` causes for a 422.
    pub fn admit(&self, obj: &mut Value, old: Option<&Value>) -> Result<(), Vec<(String, String)>> {
        prune(&self.raw, obj, true);
        default(&self.raw, obj);
        let mut errors: Vec<(String, String)> = Vec::new();
        for e in self.validator.iter_errors(obj) {
            let field = pointer_to_field(e.instance_path().as_str());
            if let jsonschema::error::ValidationErrorKind::Required { property } = e.kind() {
                let name = property.as_str().unwrap_or_default();
                let f = if field.is_empty() {
                    name.to_string()
                } else {
                    format!("{field}.{name}")
                };
                errors.push((f, "Required value".into()));
                continue;
            }
            errors.push((
                field.clone(),
                format!(
                    "Invalid value: {}: {field} in body {e}",
                    short(e.instance())
                ),
            ));
        }
        if errors.is_empty() {
            cel_walk(&self.raw, obj, old, String::new(), &mut errors);
        }
        match errors.is_empty() {
            true => Ok(()),
            false => Err(errors),
        }
    }
}

fn prune(s: &Value, v: &mut Value, root: bool) {
    if s.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true))
        && s.get("properties").is_none()
    {
        return;
    }
    match v {
        Value::Object(m) => {
            let props = s.get("properties").and_then(Value::as_object);
            let additional = s.get("additionalProperties").filter(|a| a.is_object());
            let keep_unknown = s.get("x-kubernetes-preserve-unknown-fields")
                == Some(&Value::Bool(true))
                || s.get("additionalProperties") == Some(&Value::Bool(true));
            let embedded =
                root || s.get("x-kubernetes-embedded-resource") == Some(&Value::Bool(true));
            m.retain(|k, _| {
                keep_unknown
                    || props.is_some_and(|p| p.contains_key(k))
                    || additional.is_some()
                    || (embedded && (k == "apiVersion" || k == "kind" || k == "metadata"))
            });
            for (k, child) in m.iter_mut() {
                if embedded && k == "metadata" {
                    continue;
                }
                if let Some(cs) = props.and_then(|p| p.get(k)).or(additional) {
                    prune(cs, child, false);
                }
            }
        }
        Value::Array(a) => {
            if let Some(items) = s.get("items") {
                a.iter_mut().for_each(|i| prune(items, i, false));
            }
        }
        _ => {}
    }
}

fn default(s: &Value, v: &mut Value) {
    match v {
        Value::Object(m) => {
            if let Some(props) = s.get("properties").and_then(Value::as_object) {
                for (k, ps) in props {
                    if let (false, Some(d)) = (m.contains_key(k), ps.get("default")) {
                        m.insert(k.clone(), d.clone());
                    }
                    if let Some(child) = m.get_mut(k) {
                        default(ps, child);
                    }
                }
            }
            if let Some(add) = s.get("additionalProperties").filter(|a| a.is_object()) {
                m.values_mut().for_each(|c| default(add, c));
            }
        }
        Value::Array(a) => {
            if let Some(items) = s.get("items") {
                a.iter_mut().for_each(|i| default(items, i));
            }
        }
        _ => {}
    }
}

fn compile_rule(rule: &str) -> Result<Program, String> {
    // The parser has internal `expect`s; a CRD author's typo must not take
    // the server down.
    match std::panic::catch_unwind(|| Program::compile(rule)) {
        Ok(Ok(p)) => Ok(p),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err("the CEL parser failed on this rule".into()),
    }
}

fn to_cel(v: &Value) -> Result<CelValue, String> {
    cel::to_value(v).map_err(|e| e.to_string())
}

fn eval_rule(rule: &str, this: &Value, old: Option<&Value>) -> Result<bool, String> {
    let program = compile_rule(rule)?;
    let mut ctx = Context::default();
    ctx.add_variable_from_value("self", to_cel(this)?);
    if let Some(o) = old {
        ctx.add_variable_from_value("oldSelf", to_cel(o)?);
    }
    let run = std::panic::AssertUnwindSafe(|| program.execute(&ctx));
    match std::panic::catch_unwind(run) {
        Ok(Ok(CelValue::Bool(b))) => Ok(b),
        Ok(Ok(other)) => Err(format!("rule did not evaluate to a bool: {other:?}")),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err("the CEL interpreter failed on this rule".into()),
    }
}

fn cel_walk(
    s: &Value,
    v: &Value,
    old: Option<&Value>,
    field: String,
    errors: &mut Vec<(String, String)>,
) {
    if let Some(rules) = s.get("x-kubernetes-validations").and_then(Value::as_array) {
        for r in rules {
            let Some(rule) = r["rule"].as_str() else {
                continue;
            };
            if rule.contains("oldSelf") && old.is_none() {
                continue;
            }
            let at = match r["fieldPath"].as_str() {
                Some(fp) => format!("{field}{fp}"),
                None => field.clone(),
            };
            let ratcheted = !rule.contains("oldSelf") && old == Some(v);
            match eval_rule(rule, v, old) {
                Ok(true) => {}
                Ok(false) | Err(_) if ratcheted => {}
                Ok(false) => {
                    let msg = r["message"]
                        .as_str()
                        .map(String::from)
                        .unwrap_or_else(|| format!("failed rule: {rule}"));
                    errors.push((at, format!("Invalid value: {}: {msg}", short(v))));
                }
                Err(e) => errors.push((
                    at,
                    format!(
                        "Invalid value: {}: rule {rule:?} failed to evaluate: {e}",
                        short(v)
                    ),
                )),
            }
        }
    }
    let join = |k: &str| {
        if field.is_empty() {
            k.to_string()
        } else {
            format!("{field}.{k}")
        }
    };
    match v {
        Value::Object(m) => {
            let props = s.get("properties").and_then(Value::as_object);
            let additional = s.get("additionalProperties").filter(|a| a.is_object());
            for (k, child) in m {
                if let Some(cs) = props.and_then(|p| p.get(k)).or(additional) {
                    let o = old.and_then(|o| o.get(k));
                    cel_walk(cs, child, o, join(k), errors);
                }
            }
        }
        Value::Array(a) => {
            if let Some(items) = s.get("items") {
                for (i, item) in a.iter().enumerate() {
                    cel_walk(items, item, None, format!("{field}[{i}]"), errors);
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Schema {
        Schema::compile(&json!({
            "type": "object",
            "properties": {
                "spec": {
                    "type": "object",
                    "required": ["toolPrefix"],
                    "x-kubernetes-validations": [
                        {"rule": "has(self.baseUrl) != has(self.serviceRef)", "message": "exactly one of baseUrl or serviceRef"}
                    ],
                    "properties": {
                        "toolPrefix": {"type": "string", "pattern": "^[a-z][a-z0-9_]{0,29}$"},
                        "baseUrl": {"type": "string", "nullable": true},
                        "serviceRef": {"type": "object", "properties": {"name": {"type": "string"}, "port": {"type": "integer", "format": "int32", "default": 80}}},
                        "mode": {"type": "string", "enum": ["a", "b"], "default": "a"},
                        "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
                    }
                },
                "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
            }
        }))
        .unwrap()
    }

    #[test]
    fn cel_rule_rejects_both_alternatives_with_its_message() {
        let mut o = json!({"spec": {"toolPrefix": "p", "baseUrl": "http://x", "serviceRef": {"name": "s"}}});
        let errs = schema().admit(&mut o, None).unwrap_err();
        assert_eq!(
            errs,
            vec![(
                "spec".to_string(),
                "Invalid value: \"object\": exactly one of baseUrl or serviceRef".to_string()
            )]
        );
        let mut neither = json!({"spec": {"toolPrefix": "p"}});
        assert!(schema().admit(&mut neither, None).is_err());
        let mut one = json!({"spec": {"toolPrefix": "p", "baseUrl": "http://x"}});
        assert!(schema().admit(&mut one, None).is_ok());
    }

    #[test]
    fn unknown_fields_are_pruned_and_defaults_filled() {
        let mut o = json!({"apiVersion": "g/v1", "kind": "K", "metadata": {"name": "n"}, "junk": 1,
            "spec": {"toolPrefix": "p", "serviceRef": {"name": "s", "extra": true}, "free": {"any": {"thing": 1}}}});
        schema().admit(&mut o, None).unwrap();
        assert!(o.get("junk").is_none());
        assert_eq!(o["spec"]["serviceRef"], json!({"name": "s", "port": 80}));
        assert_eq!(o["spec"]["mode"], "a");
        assert_eq!(o["spec"]["free"], json!({"any": {"thing": 1}}));
        assert_eq!(o["metadata"]["name"], "n");
    }

    #[test]
    fn structural_violations_name_the_field() {
        let mut o = json!({"spec": {"toolPrefix": "Bad-Prefix", "baseUrl": "x", "mode": "c"}});
        let errs = schema().admit(&mut o, None).unwrap_err();
        let fields: Vec<&str> = errs.iter().map(|(f, _)| f.as_str()).collect();
        assert!(fields.contains(&"spec.toolPrefix"), "{errs:?}");
        assert!(fields.contains(&"spec.mode"), "{errs:?}");
        let mut missing = json!({"spec": {"baseUrl": "x"}});
        let errs = schema().admit(&mut missing, None).unwrap_err();
        assert_eq!(
            errs[0],
            ("spec.toolPrefix".to_string(), "Required value".to_string())
        );
    }

    #[test]
    fn a_rule_that_does_not_parse_rejects_the_crd() {
        let err = Schema::compile(
            &json!({"type": "object", "x-kubernetes-validations": [{"rule": "has(self.a"}]}),
        )
        .unwrap_err();
        assert!(err.contains("compilation failed"), "{err}");
    }
}
