//! OpenAPI parameter styles as text: path (`simple`, `label`, `matrix`),
//! query (`form`, delimited, `deepObject`) and header values, each value
//! percent-encoded for where it goes.

use catalog::ParamStyle;
use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};
use serde_json::{Map, Value};

/// Everything but RFC 3986 unreserved characters is encoded.
pub(super) const STRICT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// `allowReserved`: RFC 3986 reserved characters pass, except the ones that
/// would change the query's structure (`&`, `=`, `#`, `+`) — sending those
/// literally would split or cut the query, which no API author means.
pub(super) const RESERVED_OK: &AsciiSet = &STRICT
    .remove(b':')
    .remove(b'/')
    .remove(b'?')
    .remove(b'@')
    .remove(b'!')
    .remove(b'$')
    .remove(b'\'')
    .remove(b'(')
    .remove(b')')
    .remove(b'*')
    .remove(b',')
    .remove(b';')
    .remove(b'[')
    .remove(b']');

/// OpenAPI `simple`, `label` and `matrix` path styles, values encoded.
pub(super) fn path_style(name: &str, value: &Value, style: ParamStyle, explode: bool) -> String {
    let items: Vec<String> = match value {
        Value::Array(a) => a.iter().map(|v| encode(&scalar(v), STRICT)).collect(),
        Value::Object(o) => {
            if explode && style != ParamStyle::Matrix {
                o.iter()
                    .map(|(k, v)| format!("{}={}", encode(k, STRICT), encode(&scalar(v), STRICT)))
                    .collect()
            } else if explode {
                // matrix explode: ;k=v;k2=v2
                return o
                    .iter()
                    .map(|(k, v)| format!(";{}={}", encode(k, STRICT), encode(&scalar(v), STRICT)))
                    .collect();
            } else {
                o.iter()
                    .flat_map(|(k, v)| [encode(k, STRICT), encode(&scalar(v), STRICT)])
                    .collect()
            }
        }
        v => vec![encode(&scalar(v), STRICT)],
    };
    match style {
        ParamStyle::Label => {
            let sep = if explode { "." } else { "," };
            format!(".{}", items.join(sep))
        }
        ParamStyle::Matrix => {
            let n = encode(name, STRICT);
            if explode && value.is_array() {
                items.iter().map(|i| format!(";{n}={i}")).collect()
            } else {
                format!(";{n}={}", items.join(","))
            }
        }
        _ => items.join(","),
    }
}

/// The `simple` style without encoding, for headers and cookies.
pub(super) fn simple_style(value: &Value, explode: bool) -> String {
    match value {
        Value::Array(a) => a.iter().map(scalar).collect::<Vec<_>>().join(","),
        Value::Object(o) => {
            if explode {
                o.iter()
                    .map(|(k, v)| format!("{k}={}", scalar(v)))
                    .collect::<Vec<_>>()
                    .join(",")
            } else {
                o.iter()
                    .flat_map(|(k, v)| [k.clone(), scalar(v)])
                    .collect::<Vec<_>>()
                    .join(",")
            }
        }
        v => scalar(v),
    }
}

/// Appends `name=value` pairs, already encoded, to `out`.
pub(super) fn serialize_query(
    name: &str,
    value: &Value,
    style: ParamStyle,
    explode: bool,
    allow_reserved: bool,
    out: &mut Vec<String>,
) {
    let set = if allow_reserved { RESERVED_OK } else { STRICT };
    let n = encode(name, STRICT);
    match (value, style) {
        (Value::Object(o), ParamStyle::DeepObject) => deep_object(&n, o, set, out),
        (Value::Array(a), _) if explode || style == ParamStyle::DeepObject => {
            for v in a {
                out.push(format!("{n}={}", encode(&scalar(v), set)));
            }
        }
        (Value::Array(a), _) => {
            let sep = match style {
                ParamStyle::SpaceDelimited => "%20",
                ParamStyle::PipeDelimited => "|",
                _ => ",",
            };
            let joined: Vec<String> = a.iter().map(|v| encode(&scalar(v), set)).collect();
            out.push(format!("{n}={}", joined.join(sep)));
        }
        (Value::Object(o), _) if explode => {
            for (k, v) in o {
                if !v.is_null() {
                    out.push(format!("{}={}", encode(k, STRICT), encode(&scalar(v), set)));
                }
            }
        }
        (Value::Object(o), _) => {
            let sep = match style {
                ParamStyle::SpaceDelimited => "%20",
                ParamStyle::PipeDelimited => "|",
                _ => ",",
            };
            let joined: Vec<String> = o
                .iter()
                .flat_map(|(k, v)| [encode(k, set), encode(&scalar(v), set)])
                .collect();
            out.push(format!("{n}={}", joined.join(sep)));
        }
        (v, _) => out.push(format!("{n}={}", encode(&scalar(v), set))),
    }
}

/// `name[key]=value`, nesting for nested objects (`name[a][b]=v`) and
/// repeating for arrays (`name[a]=1&name[a]=2`).
fn deep_object(
    prefix: &str,
    o: &Map<String, Value>,
    set: &'static AsciiSet,
    out: &mut Vec<String>,
) {
    for (k, v) in o {
        let key = format!("{prefix}[{}]", encode(k, STRICT));
        match v {
            Value::Null => {}
            Value::Object(inner) => deep_object(&key, inner, set, out),
            Value::Array(a) => {
                for item in a {
                    out.push(format!("{key}={}", encode(&scalar(item), set)));
                }
            }
            other => out.push(format!("{key}={}", encode(&scalar(other), set))),
        }
    }
}

pub(super) fn join_query(pairs: &[String]) -> Option<String> {
    if pairs.is_empty() {
        None
    } else {
        Some(pairs.join("&"))
    }
}

/// A primitive as text; composite values nested where a primitive is
/// expected are sent as JSON rather than dropped.
pub(super) fn scalar(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        other => other.to_string(),
    }
}

pub(super) fn encode(s: &str, set: &'static AsciiSet) -> String {
    utf8_percent_encode(s, set).to_string()
}
