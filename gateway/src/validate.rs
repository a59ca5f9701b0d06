//! JSON Schema validation of tool arguments and upstream responses.
//!
//! Validators are compiled once per snapshot ([`compile`]) and shared by
//! every call. Error messages name the failing field as a dotted path
//! (`address.zip`, `tags.0`) so a model can correct its next call; they
//! never contain anything but the schema's words and the caller's own
//! values.

use jsonschema::error::ValidationErrorKind;
use jsonschema::Validator;
use serde_json::Value;

/// Caps the number of messages per failure: a hostile array of a million
/// wrong items must not produce a million-line error.
const MAX_ERRORS: usize = 20;
/// Caps one message; the instance value is echoed by the library.
const MAX_MESSAGE_CHARS: usize = 300;

/// Compiles a schema. The error text is the library's, naming the keyword.
pub fn compile(schema: &Value) -> Result<Validator, String> {
    jsonschema::validator_for(schema).map_err(|e| e.to_string())
}

/// Validates `instance`, returning one message per failing field.
pub fn check(validator: &Validator, instance: &Value) -> Result<(), Vec<String>> {
    let mut out = Vec::new();
    let mut more = 0usize;
    for error in validator.iter_errors(instance) {
        if out.len() >= MAX_ERRORS {
            more += 1;
            continue;
        }
        let mut field = field_name(error.instance_path().as_str());
        let message = match error.kind() {
            ValidationErrorKind::Required { property } => {
                let name = property.as_str().map(str::to_string).unwrap_or_default();
                field = join(&field, &name);
                "is required".to_string()
            }
            ValidationErrorKind::AdditionalProperties { unexpected } => {
                format!("unexpected properties: {}", unexpected.join(", "))
            }
            _ => error.to_string(),
        };
        let message = truncate(&message, MAX_MESSAGE_CHARS);
        if field.is_empty() {
            out.push(message);
        } else {
            out.push(format!("{field}: {message}"));
        }
    }
    if more > 0 {
        out.push(format!("... and {more} more"));
    }
    if out.is_empty() {
        Ok(())
    } else {
        Err(out)
    }
}

/// `/a/b~1c/0` → `a.b/c.0`.
fn field_name(pointer: &str) -> String {
    pointer
        .split('/')
        .skip(1)
        .map(|s| s.replace("~1", "/").replace("~0", "~"))
        .collect::<Vec<_>>()
        .join(".")
}

fn join(parent: &str, child: &str) -> String {
    if parent.is_empty() {
        child.to_string()
    } else {
        format!("{parent}.{child}")
    }
}

pub(crate) fn truncate(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_string();
    }
    let mut t: String = s.chars().take(max).collect();
    t.push_str("...");
    t
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Validator {
        compile(&json!({
            "type": "object",
            "properties": {
                "id": {"type": "integer", "minimum": 1},
                "name": {"type": "string", "minLength": 2, "pattern": "^[a-z]+$"},
                "tags": {"type": "array", "items": {"type": "string"}}
            },
            "required": ["id", "name"],
            "additionalProperties": false
        }))
        .unwrap()
    }

    #[test]
    fn valid_arguments_pass() {
        assert!(check(&schema(), &json!({"id": 1, "name": "ab"})).is_ok());
    }

    #[test]
    fn every_failing_field_is_named() {
        let errs = check(&schema(), &json!({"id": 0, "tags": [1]})).unwrap_err();
        let all = errs.join("\n");
        assert!(all.contains("name: is required"), "{all}");
        assert!(all.contains("id: "), "{all}");
        assert!(all.contains("tags.0: "), "{all}");
    }

    #[test]
    fn pattern_and_min_length_are_reported() {
        let errs = check(&schema(), &json!({"id": 1, "name": "A"})).unwrap_err();
        assert_eq!(errs.len(), 2, "{errs:?}");
        assert!(errs.iter().all(|e| e.starts_with("name: ")));
    }

    #[test]
    fn unexpected_properties_are_listed() {
        let errs = check(&schema(), &json!({"id": 1, "name": "ab", "x": 1})).unwrap_err();
        assert_eq!(errs, vec!["unexpected properties: x".to_string()]);
    }

    #[test]
    fn error_count_is_bounded() {
        let v = compile(&json!({"type": "array", "items": {"type": "string"}})).unwrap();
        let errs = check(&v, &Value::Array(vec![json!(1); 1000])).unwrap_err();
        assert_eq!(errs.len(), MAX_ERRORS + 1);
    }
}
