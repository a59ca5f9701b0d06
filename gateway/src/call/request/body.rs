//! The request body per the plan: which arguments form it, and its
//! encoding (JSON, form, multipart with base64-decoded files, raw).

use base64::Engine;
use catalog::{BodyEncoding, BodyPlan, BodySource, ParamStyle};
use serde_json::{Map, Value};

use super::style::{scalar, serialize_query};
use super::{arg_err, MultipartField, RequestBody, RequestError};

/// The body value per the plan; `None` when there is nothing to send.
pub(super) fn body_value(bp: &BodyPlan, args: &Map<String, Value>) -> Option<Value> {
    match &bp.source {
        BodySource::Nested { arg } => args.get(arg).filter(|v| !v.is_null()).cloned(),
        BodySource::Merged { fields } => {
            let mut obj = Map::new();
            for f in fields {
                if let Some(v) = args.get(&f.arg) {
                    obj.insert(f.name.clone(), v.clone());
                }
            }
            if obj.is_empty() && !bp.required {
                None
            } else {
                Some(Value::Object(obj))
            }
        }
    }
}

pub(super) fn encode_body(bp: &BodyPlan, v: &Value) -> Result<RequestBody, RequestError> {
    let body_arg = match &bp.source {
        BodySource::Nested { arg } => arg.as_str(),
        BodySource::Merged { .. } => "body",
    };
    match bp.encoding {
        BodyEncoding::Json => Ok(RequestBody::Bytes {
            content_type: bp.content_type.clone(),
            data: serde_json::to_vec(v).unwrap_or_default(),
        }),
        BodyEncoding::Form => {
            let Value::Object(o) = v else {
                return Err(arg_err(body_arg, "must be an object (form body)"));
            };
            let mut pairs = Vec::new();
            for (k, val) in o {
                if !val.is_null() {
                    serialize_query(k, val, ParamStyle::Form, true, false, &mut pairs);
                }
            }
            Ok(RequestBody::Bytes {
                content_type: bp.content_type.clone(),
                data: pairs.join("&").into_bytes(),
            })
        }
        BodyEncoding::Multipart => {
            let Value::Object(o) = v else {
                return Err(arg_err(body_arg, "must be an object (multipart body)"));
            };
            let mut fields = Vec::new();
            for (k, val) in o {
                if val.is_null() {
                    continue;
                }
                let binary = bp.binary_fields.iter().any(|b| b == k);
                let items: Vec<&Value> = match val {
                    Value::Array(a) if binary || a.iter().all(|x| !x.is_object()) => {
                        a.iter().collect()
                    }
                    other => vec![other],
                };
                for item in items {
                    if binary {
                        let Value::String(s) = item else {
                            return Err(arg_err(k, "must be a base64 string (file)"));
                        };
                        let data = decode_base64(s).map_err(|m| arg_err(k, m))?;
                        fields.push(MultipartField {
                            name: k.clone(),
                            data,
                            filename: Some(k.clone()),
                            content_type: Some("application/octet-stream".into()),
                        });
                    } else {
                        let (data, ct) = match item {
                            Value::String(s) => (s.clone().into_bytes(), None),
                            Value::Object(_) | Value::Array(_) => (
                                serde_json::to_vec(item).unwrap_or_default(),
                                Some("application/json".to_string()),
                            ),
                            other => (scalar(other).into_bytes(), None),
                        };
                        fields.push(MultipartField {
                            name: k.clone(),
                            data,
                            filename: None,
                            content_type: ct,
                        });
                    }
                }
            }
            Ok(RequestBody::Multipart(fields))
        }
        BodyEncoding::Raw => {
            let data = match v {
                Value::String(s) if bp.base64 => {
                    decode_base64(s).map_err(|m| arg_err(body_arg, m))?
                }
                Value::String(s) => s.clone().into_bytes(),
                other => serde_json::to_vec(other).unwrap_or_default(),
            };
            Ok(RequestBody::Bytes {
                content_type: bp.content_type.clone(),
                data,
            })
        }
    }
}

/// Standard or URL-safe alphabet, padded or not: models produce all four.
fn decode_base64(s: &str) -> Result<Vec<u8>, String> {
    use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD};
    let s = s.trim();
    STANDARD
        .decode(s)
        .or_else(|_| STANDARD_NO_PAD.decode(s))
        .or_else(|_| URL_SAFE.decode(s))
        .or_else(|_| URL_SAFE_NO_PAD.decode(s))
        .map_err(|_| "is not valid base64".to_string())
}
