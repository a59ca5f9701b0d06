//! JSON Schema validation of tool arguments and upstream responses.
//!
//! Validators are compiled once per snapshot ([`compile`], [`compile_raw`])
//! and shared by every call. Error messages name the failing field as a
//! dotted path (`address.zip`, `tags.0`) so a model can correct its next
//! call; they never contain anything but the schema's words and a short
//! excerpt of the caller's (or upstream's) own value.
//!
//! Arguments are validated as the `serde_json::Value` rmcp parsed them
//! into; responses as their text ([`crate::call::rawjson`]).
//!
//! **Bounds.** jsonschema collects *every* error before returning any, at a
//! few hundred bytes each: a 4 MiB argument array of `0`s against
//! `items: {type: string}` is two million errors, a 10 MB response worse.
//! So every instance is first checked with `is_valid` (no errors built);
//! only an instance of at most [`MAX_ALL_ERRORS_NODES`] values gets the
//! full list (`MAX_ERRORS` messages shown), a larger one gets its first
//! error. Messages show the failing value as an excerpt of at most
//! [`EXCERPT_CHARS`] characters, rendered without rendering the rest
//! (jsonschema's own message renders the whole value: 10 MB for a
//! wrong-typed root).

use jsonschema::error::ValidationErrorKind;
use jsonschema::{ValidationError, Validator};
use serde_json::Value;

use crate::call::rawjson::{Document, RawJson, RawNode};

/// Caps the number of messages per failure: a hostile array of a million
/// wrong items must not produce a million-line error.
const MAX_ERRORS: usize = 20;
/// Caps one message (excerpt excluded).
const MAX_MESSAGE_CHARS: usize = 300;
/// Longest excerpt of a failing value in a message.
pub(crate) const EXCERPT_CHARS: usize = 80;
/// Instances up to this many values get all their errors listed (a few
/// hundred bytes per failing keyword of each value); larger ones their
/// first.
pub(crate) const MAX_ALL_ERRORS_NODES: usize = 256;

/// Compiles a schema for `serde_json::Value` instances (arguments). The
/// error text is the library's, naming the keyword.
pub(crate) fn compile(schema: &Value) -> Result<Validator, String> {
    jsonschema::validator_for(schema).map_err(|e| e.to_string())
}

/// Compiles a schema for response text ([`RawJson`]).
pub(crate) fn compile_raw(schema: &Value) -> Result<Validator<RawJson>, String> {
    jsonschema::options_for::<RawJson>()
        .build(schema)
        .map_err(|e| e.to_string())
}

/// Validates arguments, returning one message per failing field.
pub(crate) fn check(validator: &Validator, instance: &Value) -> Result<(), Vec<String>> {
    if validator.is_valid(instance) {
        return Ok(());
    }
    let errors: Vec<ValidationError<'_>> = if nodes_at_most(instance, MAX_ALL_ERRORS_NODES) {
        validator.iter_errors(instance).collect()
    } else {
        validator.validate(instance).err().into_iter().collect()
    };
    let excerpt = |e: &ValidationError<'_>| -> String {
        match instance.pointer(e.instance_path().as_str()) {
            Some(v) => value_excerpt(v),
            None => "value".into(),
        }
    };
    messages(
        errors,
        excerpt,
        nodes_at_most(instance, MAX_ALL_ERRORS_NODES),
    )
}

/// Validates a response (or its output wrap, `node`) of document `doc`.
pub(crate) fn check_raw(
    validator: &Validator<RawJson>,
    doc: &Document<'_>,
    node: RawNode<'_>,
) -> Result<(), Vec<String>> {
    if validator.is_valid(node) {
        return Ok(());
    }
    // Values are at least 2 bytes apart (`1,`): a short text is few values.
    let small = doc.text().len() <= 2 * MAX_ALL_ERRORS_NODES;
    let errors: Vec<ValidationError<'_>> = if small {
        validator.iter_errors(node).collect()
    } else {
        validator.validate(node).err().into_iter().collect()
    };
    let excerpt = |e: &ValidationError<'_>| -> String {
        match doc.pointer(node, e.instance_path().as_str()) {
            Some(RawNode::Text(t)) => text_excerpt(t),
            Some(RawNode::Name(n)) => value_excerpt(&Value::String(n.to_string())),
            Some(RawNode::Wrapped(t)) => {
                let mut s = String::from("{\"result\":");
                s.push_str(&text_excerpt(t));
                s
            }
            None => "value".into(),
        }
    };
    messages(errors, excerpt, small)
}

/// Whether `v` has at most `max` values, counting no further than that.
fn nodes_at_most(v: &Value, max: usize) -> bool {
    fn count(v: &Value, left: &mut usize) -> bool {
        if *left == 0 {
            return false;
        }
        *left -= 1;
        match v {
            Value::Array(a) => a.iter().all(|x| count(x, left)),
            Value::Object(o) => o.values().all(|x| count(x, left)),
            _ => true,
        }
    }
    let mut left = max;
    count(v, &mut left)
}

fn messages<'i>(
    errors: Vec<ValidationError<'i>>,
    excerpt: impl Fn(&ValidationError<'i>) -> String,
    complete: bool,
) -> Result<(), Vec<String>> {
    let mut out = Vec::new();
    let total = errors.len();
    for error in errors.iter().take(MAX_ERRORS) {
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
            // The masked message reads no value: ours is an excerpt.
            _ => error.masked_with(excerpt(error)).to_string(),
        };
        let message = truncate(&message, MAX_MESSAGE_CHARS + EXCERPT_CHARS);
        if field.is_empty() {
            out.push(message);
        } else {
            out.push(format!("{field}: {message}"));
        }
    }
    if total > MAX_ERRORS {
        out.push(format!("... and {} more", total - MAX_ERRORS));
    }
    if !complete && !out.is_empty() {
        out.push("(a large value: only its first error is reported)".into());
    }
    if out.is_empty() {
        // `is_valid` said no; a first error always exists. Defensive.
        out.push("does not match the schema".into());
    }
    Err(out)
}

/// Compact JSON of `v`, at most [`EXCERPT_CHARS`] characters, rendered
/// no further than that.
fn value_excerpt(v: &Value) -> String {
    struct Bounded(String);
    impl std::io::Write for Bounded {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            if self.0.len() > EXCERPT_CHARS * 4 {
                // Stops serde_json, and with it the walk of `v`.
                return Err(std::io::Error::other("excerpt complete"));
            }
            self.0.push_str(&String::from_utf8_lossy(buf));
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut out = Bounded(String::new());
    let _ = serde_json::to_writer(&mut out, v);
    truncate(&out.0, EXCERPT_CHARS)
}

/// The same for a value's text, with whitespace outside strings dropped.
fn text_excerpt(t: &[u8]) -> String {
    let head = &t[..t.len().min(EXCERPT_CHARS * 16)];
    let mut out = Vec::with_capacity(EXCERPT_CHARS * 4);
    let (mut in_string, mut escaped) = (false, false);
    for &b in head {
        if in_string {
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                in_string = false;
            }
        } else if b == b'"' {
            in_string = true;
        } else if matches!(b, b' ' | b'\t' | b'\n' | b'\r') {
            continue;
        }
        out.push(b);
        if out.len() >= EXCERPT_CHARS * 4 {
            break;
        }
    }
    let cut = out.len() < t.len();
    let mut s = truncate(&String::from_utf8_lossy(&out), EXCERPT_CHARS);
    if cut && !s.ends_with("...") && s.chars().count() >= EXCERPT_CHARS {
        s.push_str("...");
    }
    s
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
        let errs = check(&v, &Value::Array(vec![json!(1); 200])).unwrap_err();
        assert_eq!(errs.len(), MAX_ERRORS + 1);
        assert_eq!(errs[MAX_ERRORS], "... and 180 more");
    }

    #[test]
    fn a_million_wrong_items_are_one_error_not_a_million() {
        // jsonschema would collect 1e6 errors (~300 MB) before the first.
        let v = compile(&json!({"type": "array", "items": {"type": "string"}})).unwrap();
        let errs = check(&v, &Value::Array(vec![json!(0); 1_000_000])).unwrap_err();
        assert_eq!(errs.len(), 2, "{errs:?}");
        assert_eq!(errs[0], "0: 0 is not of type \"string\"");
        assert!(errs[1].contains("only its first error"), "{errs:?}");
    }

    #[test]
    fn a_wrong_typed_large_value_is_shown_as_an_excerpt() {
        let v = compile(&json!({"type": "object"})).unwrap();
        let big = Value::Array((0..100_000).map(|i| json!({"id": i})).collect());
        let errs = check(&v, &big).unwrap_err();
        assert!(errs[0].starts_with("[{\"id\":0},{\"id\":1}"), "{errs:?}");
        assert!(errs[0].ends_with("is not of type \"object\""), "{errs:?}");
        assert!(errs[0].len() < 200, "{errs:?}");
    }

    #[test]
    fn response_text_is_checked_with_the_same_messages() {
        let schema = json!({"type": "array", "items": {"type": "object",
            "required": ["id"], "properties": {"id": {"type": "integer"}}}});
        let v = compile_raw(&schema).unwrap();
        let text = br#"[ {"id": 1}, {"id": "two"}, {} ]"#;
        let doc = Document::parse(text).unwrap();
        assert!(check_raw(&v, &doc, doc.root()).is_err());
        let errs = check_raw(&v, &doc, doc.root()).unwrap_err();
        assert_eq!(
            errs,
            vec![
                "1.id: \"two\" is not of type \"integer\"",
                "2.id: is required"
            ]
        );
        let ok = Document::parse(br#"[{"id": 1}]"#).unwrap();
        assert!(check_raw(&v, &ok, ok.root()).is_ok());
        // Large: the first error only, excerpted from the text.
        let big = format!("[{}]", vec![r#"{"id": "x"}"#; 10_000].join(", "));
        let doc = Document::parse(big.as_bytes()).unwrap();
        let errs = check_raw(&v, &doc, doc.root()).unwrap_err();
        assert_eq!(errs[0], "0.id: \"x\" is not of type \"integer\"");
        assert_eq!(errs.len(), 2);
    }
}
