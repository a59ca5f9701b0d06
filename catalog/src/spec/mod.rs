//! Loading: bytes → raw JSON value → normalised OpenAPI 3.x document.
//!
//! NB: the compiler works on `serde_json::Value` rather than a typed model
//! (`openapiv3`). Typed deserialisation fails a whole document for one odd
//! field, while toolgate must reject single operations with a reason and
//! keep the rest; overlays must also apply to the raw document; and 3.1 is
//! not covered by `openapiv3`. See docs/0001-value-based-openapi-model.md.

mod nesting;
mod origins;
mod swagger2;

pub use nesting::MAX_YAML_FLOW_DEPTH;
pub use origins::Origins;

use serde_json::{Map, Value};

use crate::error::{SpecError, SpecErrorKind};

/// The OpenAPI dialect of a document.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    Swagger2,
    OpenApi30,
    OpenApi31,
}

/// A loaded document in OpenAPI 3.x shape (2.0 converted).
#[derive(Debug, Clone)]
pub struct Document {
    /// Name used in errors.
    pub name: String,
    pub version: Version,
    /// The version string as written (`2.0`, `3.0.3`, ...).
    pub version_string: String,
    pub root: Value,
    /// Where a converted 2.0 document's parts were written.
    pub origins: Origins,
}

/// Parses JSON or YAML into a value. JSON is tried first when the text
/// starts with `{`; YAML otherwise (YAML is a superset, but the JSON parser
/// is faster and gives better positions).
///
/// Nesting is bounded before anything is built: JSON by serde_json (128
/// levels), YAML by a pre-scan refusing flow collections deeper than
/// [`MAX_YAML_FLOW_DEPTH`] (128) and then by yaml_serde (128 levels). Both
/// parsers are iterative below that, so a 2 MiB stack suffices.
pub fn parse_value(name: &str, bytes: &[u8]) -> Result<Value, SpecError> {
    let text = std::str::from_utf8(bytes)
        .map_err(|e| SpecError::new(name, "", SpecErrorKind::Parse(format!("not UTF-8: {e}"))))?;
    let trimmed = text.trim_start_matches('\u{feff}').trim_start();
    if trimmed.starts_with('{') {
        return serde_json::from_str(trimmed)
            .map_err(|e| SpecError::new(name, "", SpecErrorKind::Parse(format!("JSON: {e}"))));
    }
    nesting::check_flow_depth(trimmed, MAX_YAML_FLOW_DEPTH).map_err(|(line, column)| {
        SpecError::new(
            name,
            "",
            SpecErrorKind::Parse(format!(
                "YAML: flow collections nested deeper than {MAX_YAML_FLOW_DEPTH} levels at line \
                 {line} column {column}"
            )),
        )
    })?;
    // Fast path: straight into serde_json's Value. YAML allows non-string
    // mapping keys (`200:` response codes), which that cannot hold; fall back
    // to YAML's own value and stringify keys.
    match yaml_serde::from_str::<Value>(trimmed) {
        Ok(v) => Ok(v),
        Err(first) => {
            let yaml: yaml_serde::Value = yaml_serde::from_str(trimmed).map_err(|e| {
                SpecError::new(name, "", SpecErrorKind::Parse(format!("YAML: {e}")))
            })?;
            yaml_to_json(yaml).map_err(|why| {
                SpecError::new(
                    name,
                    "",
                    SpecErrorKind::Parse(format!("YAML: {first}; {why}")),
                )
            })
        }
    }
}

fn yaml_to_json(v: yaml_serde::Value) -> Result<Value, String> {
    use yaml_serde::Value as Y;
    Ok(match v {
        Y::Null => Value::Null,
        Y::Bool(b) => Value::Bool(b),
        Y::Number(n) => {
            if let Some(i) = n.as_i64() {
                Value::from(i)
            } else if let Some(u) = n.as_u64() {
                Value::from(u)
            } else {
                n.as_f64()
                    .and_then(serde_json::Number::from_f64)
                    .map(Value::Number)
                    .unwrap_or(Value::Null)
            }
        }
        Y::String(s) => Value::String(s),
        Y::Sequence(items) => Value::Array(
            items
                .into_iter()
                .map(yaml_to_json)
                .collect::<Result<_, _>>()?,
        ),
        Y::Mapping(m) => {
            let mut out = Map::with_capacity(m.len());
            for (k, v) in m {
                let key = match k {
                    Y::String(s) => s,
                    Y::Number(n) => n.to_string(),
                    Y::Bool(b) => b.to_string(),
                    Y::Null => "null".to_string(),
                    other => return Err(format!("unsupported mapping key {other:?}")),
                };
                out.insert(key, yaml_to_json(v)?);
            }
            Value::Object(out)
        }
        Y::Tagged(t) => yaml_to_json(t.value)?,
    })
}

/// Detects the version, converts Swagger 2.0, and checks every `$ref` is
/// local (unless `allow_external_refs`).
pub fn load(name: &str, raw: Value, allow_external_refs: bool) -> Result<Document, SpecError> {
    let Value::Object(obj) = &raw else {
        return Err(SpecError::new(
            name,
            "",
            SpecErrorKind::WrongType {
                expected: "an object at the document root",
            },
        ));
    };
    let (version, version_string) = if let Some(v) = obj.get("openapi") {
        let s = v.as_str().ok_or_else(|| {
            SpecError::new(
                name,
                "/openapi",
                SpecErrorKind::WrongType {
                    expected: "a string",
                },
            )
        })?;
        let version = if s.starts_with("3.0") {
            Version::OpenApi30
        } else if s.starts_with("3.1") {
            Version::OpenApi31
        } else {
            return Err(SpecError::new(
                name,
                "/openapi",
                SpecErrorKind::UnsupportedVersion(s.to_string()),
            ));
        };
        (version, s.to_string())
    } else if let Some(v) = obj.get("swagger") {
        let s = match v {
            Value::String(s) => s.clone(),
            Value::Number(n) => n.to_string(),
            _ => {
                return Err(SpecError::new(
                    name,
                    "/swagger",
                    SpecErrorKind::WrongType {
                        expected: "a string",
                    },
                ))
            }
        };
        if s != "2.0" && s != "2" {
            return Err(SpecError::new(
                name,
                "/swagger",
                SpecErrorKind::UnsupportedVersion(s),
            ));
        }
        (Version::Swagger2, "2.0".to_string())
    } else {
        return Err(SpecError::new(name, "", SpecErrorKind::NotOpenApi));
    };
    if !allow_external_refs {
        check_local_refs(name, &raw)?;
    }
    let (root, origins) = match version {
        Version::Swagger2 => swagger2::convert_with_origins(name, raw)?,
        _ => (raw, Origins::default()),
    };
    if let Some(paths) = root.get("paths") {
        if !paths.is_object() {
            return Err(SpecError::new(
                name,
                "/paths",
                SpecErrorKind::WrongType {
                    expected: "an object",
                },
            ));
        }
    }
    Ok(Document {
        name: name.to_string(),
        version,
        version_string,
        root,
        origins,
    })
}

/// Refuses any `$ref` that does not start with `#`. Iterative so a deeply
/// nested hostile document cannot overflow the stack.
///
/// Extension (`x-*`) subtrees and example/default data are skipped: a `$ref`
/// key there is vendor data, not an OpenAPI reference (Spotify and the
/// Train Travel API both keep doc links under `x-` keys).
fn check_local_refs(name: &str, root: &Value) -> Result<(), SpecError> {
    // First pass without building pointers (the common case is "all
    // local", and pointer strings for every node cost more than the walk).
    let mut stack: Vec<&Value> = vec![root];
    let mut external = None;
    while let Some(v) = stack.pop() {
        match v {
            Value::Object(m) => {
                if let Some(Value::String(r)) = m.get("$ref") {
                    if !r.starts_with('#') {
                        external = Some(r);
                        break;
                    }
                }
                for (k, child) in m {
                    if (child.is_object() || child.is_array())
                        && !k.starts_with("x-")
                        && !DATA_KEYS.contains(&k.as_str())
                    {
                        stack.push(child);
                    }
                }
            }
            Value::Array(a) => stack.extend(a.iter().filter(|c| c.is_object() || c.is_array())),
            _ => {}
        }
    }
    let Some(external) = external else {
        return Ok(());
    };
    let pointer = find_ref_pointer(root, external).unwrap_or_default();
    Err(SpecError::new(
        name,
        format!("{pointer}/$ref"),
        SpecErrorKind::ExternalRef(external.clone()),
    ))
}

/// Pointer of the first object whose `$ref` is `target` (error path only).
fn find_ref_pointer(root: &Value, target: &str) -> Option<String> {
    let mut stack: Vec<(&Value, String)> = vec![(root, String::new())];
    while let Some((v, ptr)) = stack.pop() {
        match v {
            Value::Object(m) => {
                if m.get("$ref").and_then(Value::as_str) == Some(target) {
                    return Some(ptr);
                }
                for (k, child) in m {
                    if !k.starts_with("x-") && !DATA_KEYS.contains(&k.as_str()) {
                        stack.push((child, format!("{ptr}/{}", escape_pointer(k))));
                    }
                }
            }
            Value::Array(a) => {
                for (i, child) in a.iter().enumerate() {
                    stack.push((child, format!("{ptr}/{i}")));
                }
            }
            _ => {}
        }
    }
    None
}

const DATA_KEYS: [&str; 5] = ["example", "examples", "default", "enum", "const"];

/// Escapes one JSON pointer token (RFC 6901).
pub fn escape_pointer(token: &str) -> String {
    if token.contains(['~', '/']) {
        token.replace('~', "~0").replace('/', "~1")
    } else {
        token.to_string()
    }
}

/// Turns a local `$ref` (`#/components/schemas/Pet`, possibly
/// percent-encoded) into a JSON pointer; `None` when it is not local.
pub fn ref_pointer(r: &str) -> Option<String> {
    let frag = r.strip_prefix('#')?;
    if !frag.contains('%') {
        return Some(frag.to_string());
    }
    let bytes = frag.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).ok();
            if let Some(b) = hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                out.push(b);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    Some(String::from_utf8_lossy(&out).into_owned())
}

/// Follows `$ref` chains (parameters, request bodies, responses, path
/// items) to the referenced object. Returns the object and the pointer it
/// lives at. Chains longer than 32 are treated as loops.
pub fn resolve<'a>(
    doc: &'a Document,
    value: &'a Value,
    at: &str,
) -> Result<(&'a Value, String), SpecError> {
    let mut cur = value;
    let mut ptr = at.to_string();
    for _ in 0..32 {
        let Some(r) = cur.get("$ref").and_then(Value::as_str) else {
            return Ok((cur, ptr));
        };
        let target = ref_pointer(r).ok_or_else(|| {
            SpecError::new(
                &doc.name,
                format!("{ptr}/$ref"),
                SpecErrorKind::ExternalRef(r.into()),
            )
        })?;
        cur = doc.root.pointer(&target).ok_or_else(|| {
            SpecError::new(
                &doc.name,
                format!("{ptr}/$ref"),
                SpecErrorKind::DanglingRef(r.into()),
            )
        })?;
        ptr = target;
    }
    Err(SpecError::new(&doc.name, at, SpecErrorKind::RefLoop(ptr)))
}

/// HTTP methods in the order the compiler visits them within a path item.
pub const METHODS: [&str; 8] = [
    "get", "put", "post", "delete", "options", "head", "patch", "trace",
];

/// One operation as found in the document, path item `$ref` resolved.
#[derive(Debug, Clone)]
pub struct OperationSite<'a> {
    /// Lower-case method as in the document.
    pub method: &'static str,
    /// Path key as written (may carry `#fragment`).
    pub path: &'a str,
    /// JSON pointer of the operation object.
    pub pointer: String,
    pub operation: &'a Value,
    /// Path-level parameters (unresolved), if any.
    pub path_params: Option<&'a Value>,
    /// Pointer of the path item the operation lives in (after `$ref`).
    pub path_item_pointer: String,
}

/// Every operation under `paths`, in document order. A path item that is
/// not an object or whose `$ref` does not resolve yields an error entry so
/// the caller can reject its operations rather than lose them.
pub fn operations(doc: &Document) -> Vec<Result<OperationSite<'_>, (String, String, SpecError)>> {
    let mut out = Vec::new();
    let Some(paths) = doc.root.get("paths").and_then(Value::as_object) else {
        return out;
    };
    for (path, item) in paths {
        let item_ptr = format!("/paths/{}", escape_pointer(path));
        let (item, item_ptr_resolved) = match resolve(doc, item, &item_ptr) {
            Ok(x) => x,
            Err(e) => {
                out.push(Err((String::from("*"), path.clone(), e)));
                continue;
            }
        };
        let Some(obj) = item.as_object() else {
            continue;
        };
        for method in METHODS {
            let Some(op) = obj.get(method) else { continue };
            out.push(Ok(OperationSite {
                method,
                path,
                pointer: format!("{item_ptr_resolved}/{method}"),
                operation: op,
                path_params: obj.get("parameters"),
                path_item_pointer: item_ptr_resolved.clone(),
            }));
        }
    }
    out
}

/// Counts operations the way the corpus INDEX does: path × method keys.
pub fn operation_count(doc: &Document) -> usize {
    operations(doc).len()
}

/// The server URL: first `servers[].url` with `{variables}` replaced by their
/// defaults.
pub fn default_base_url(doc: &Document) -> Option<String> {
    let server = doc.root.get("servers")?.as_array()?.first()?;
    let mut url = server.get("url")?.as_str()?.to_string();
    if let Some(vars) = server.get("variables").and_then(Value::as_object) {
        for (k, v) in vars {
            if let Some(d) = v.get("default").and_then(Value::as_str) {
                url = url.replace(&format!("{{{k}}}"), d);
            }
        }
    }
    Some(url)
}
