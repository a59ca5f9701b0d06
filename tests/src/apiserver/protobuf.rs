//! Decoding of Kubernetes protobuf request bodies for the few built-in
//! kinds kubectl's generators send that way (`kubectl create namespace`,
//! `create configmap`, `create secret generic`, `create service`).
//!
//! Faithful: the `k8s\0` envelope with `runtime.Unknown` (typeMeta, raw),
//! field numbers from `k8s.io/api`'s generated.proto for ObjectMeta
//! (without managedFields), OwnerReference, Namespace, ConfigMap, Secret and
//! the common Service fields (ports, selector, clusterIP, type).
//! Simplified: any other kind sent as protobuf is answered 415 Unsupported
//! Media Type; responses are always JSON (clients accept it).

use base64::Engine;
use serde_json::{json, Map, Value};

#[derive(Clone, Copy)]
enum Ty {
    Str,
    Bytes,
    Int,
    Bool,
    Time,
    IntOrStr,
    StrMap,
    BytesMap,
    Msg(&'static [Field]),
}

struct Field(u32, &'static str, Ty, bool);

const OWNER_REF: &[Field] = &[
    Field(1, "kind", Ty::Str, false),
    Field(3, "name", Ty::Str, false),
    Field(4, "uid", Ty::Str, false),
    Field(5, "apiVersion", Ty::Str, false),
    Field(6, "controller", Ty::Bool, false),
    Field(7, "blockOwnerDeletion", Ty::Bool, false),
];

const META: &[Field] = &[
    Field(1, "name", Ty::Str, false),
    Field(2, "generateName", Ty::Str, false),
    Field(3, "namespace", Ty::Str, false),
    Field(5, "uid", Ty::Str, false),
    Field(6, "resourceVersion", Ty::Str, false),
    Field(7, "generation", Ty::Int, false),
    Field(8, "creationTimestamp", Ty::Time, false),
    Field(9, "deletionTimestamp", Ty::Time, false),
    Field(10, "deletionGracePeriodSeconds", Ty::Int, false),
    Field(11, "labels", Ty::StrMap, false),
    Field(12, "annotations", Ty::StrMap, false),
    Field(13, "ownerReferences", Ty::Msg(OWNER_REF), true),
    Field(14, "finalizers", Ty::Str, true),
];

const NAMESPACE: &[Field] = &[
    Field(1, "metadata", Ty::Msg(META), false),
    Field(
        2,
        "spec",
        Ty::Msg(&[Field(1, "finalizers", Ty::Str, true)]),
        false,
    ),
];

const CONFIG_MAP: &[Field] = &[
    Field(1, "metadata", Ty::Msg(META), false),
    Field(2, "data", Ty::StrMap, false),
    Field(3, "binaryData", Ty::BytesMap, false),
    Field(4, "immutable", Ty::Bool, false),
];

const SECRET: &[Field] = &[
    Field(1, "metadata", Ty::Msg(META), false),
    Field(2, "data", Ty::BytesMap, false),
    Field(3, "type", Ty::Str, false),
    Field(4, "stringData", Ty::StrMap, false),
    Field(5, "immutable", Ty::Bool, false),
];

const SERVICE_PORT: &[Field] = &[
    Field(1, "name", Ty::Str, false),
    Field(2, "protocol", Ty::Str, false),
    Field(3, "port", Ty::Int, false),
    Field(4, "targetPort", Ty::IntOrStr, false),
    Field(5, "nodePort", Ty::Int, false),
    Field(6, "appProtocol", Ty::Str, false),
];

const SERVICE: &[Field] = &[
    Field(1, "metadata", Ty::Msg(META), false),
    Field(
        2,
        "spec",
        Ty::Msg(&[
            Field(1, "ports", Ty::Msg(SERVICE_PORT), true),
            Field(2, "selector", Ty::StrMap, false),
            Field(3, "clusterIP", Ty::Str, false),
            Field(4, "type", Ty::Str, false),
            Field(5, "externalIPs", Ty::Str, true),
            Field(11, "externalName", Ty::Str, false),
        ]),
        false,
    ),
];

/// One decoded field: number, wire payload.
enum Wire<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
    Fixed,
}

fn varint(buf: &[u8], pos: &mut usize) -> Result<u64, String> {
    let mut out = 0u64;
    for shift in (0..64).step_by(7) {
        let b = *buf.get(*pos).ok_or("truncated varint")?;
        *pos += 1;
        out |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Ok(out);
        }
    }
    Err("varint too long".into())
}

fn fields(buf: &[u8]) -> Result<Vec<(u32, Wire<'_>)>, String> {
    let mut pos = 0;
    let mut out = Vec::new();
    while pos < buf.len() {
        let key = varint(buf, &mut pos)?;
        let num = u32::try_from(key >> 3).map_err(|_| "field number out of range")?;
        let wire = match key & 7 {
            0 => Wire::Varint(varint(buf, &mut pos)?),
            1 => {
                pos += 8;
                Wire::Fixed
            }
            2 => {
                let len =
                    usize::try_from(varint(buf, &mut pos)?).map_err(|_| "length out of range")?;
                let end = pos
                    .checked_add(len)
                    .filter(|e| *e <= buf.len())
                    .ok_or("truncated field")?;
                let b = &buf[pos..end];
                pos = end;
                Wire::Bytes(b)
            }
            5 => {
                pos += 4;
                Wire::Fixed
            }
            w => return Err(format!("unsupported wire type {w}")),
        };
        if pos > buf.len() {
            return Err("truncated field".into());
        }
        out.push((num, wire));
    }
    Ok(out)
}

fn text(b: &[u8]) -> Result<String, String> {
    String::from_utf8(b.to_vec()).map_err(|_| "invalid UTF-8 in a string field".to_string())
}

fn decode_value(ty: Ty, w: &Wire) -> Result<Value, String> {
    Ok(match (ty, w) {
        (Ty::Str, Wire::Bytes(b)) => json!(text(b)?),
        (Ty::Bytes, Wire::Bytes(b)) => json!(base64::engine::general_purpose::STANDARD.encode(b)),
        (Ty::Int, Wire::Varint(v)) => json!(*v as i64),
        (Ty::Bool, Wire::Varint(v)) => json!(*v != 0),
        (Ty::Time, Wire::Bytes(b)) => {
            let mut secs = 0i64;
            for (n, w) in fields(b)? {
                if let (1, Wire::Varint(v)) = (n, w) {
                    secs = v as i64;
                }
            }
            let t = jiff::Timestamp::from_second(secs).map_err(|e| e.to_string())?;
            json!(t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string())
        }
        (Ty::IntOrStr, Wire::Bytes(b)) => {
            let (mut kind, mut int, mut s) = (0u64, 0i64, String::new());
            for (n, w) in fields(b)? {
                match (n, w) {
                    (1, Wire::Varint(v)) => kind = v,
                    (2, Wire::Varint(v)) => int = v as i32 as i64,
                    (3, Wire::Bytes(x)) => s = text(x)?,
                    _ => {}
                }
            }
            if kind == 1 {
                json!(s)
            } else {
                json!(int)
            }
        }
        (Ty::Msg(f), Wire::Bytes(b)) => decode_msg(b, f)?,
        _ => return Err("unexpected wire type".into()),
    })
}

fn decode_msg(buf: &[u8], schema: &[Field]) -> Result<Value, String> {
    let mut out = Map::new();
    for (num, w) in fields(buf)? {
        let Some(Field(_, name, ty, repeated)) = schema.iter().find(|f| f.0 == num) else {
            continue;
        };
        match ty {
            Ty::StrMap | Ty::BytesMap => {
                let Wire::Bytes(entry) = w else {
                    return Err(format!("{name}: bad map entry"));
                };
                let (mut k, mut v) = (String::new(), Value::Null);
                let vt = if matches!(ty, Ty::StrMap) {
                    Ty::Str
                } else {
                    Ty::Bytes
                };
                for (n, ew) in fields(entry)? {
                    match n {
                        1 => {
                            k = decode_value(Ty::Str, &ew)?
                                .as_str()
                                .unwrap_or_default()
                                .to_string()
                        }
                        2 => v = decode_value(vt, &ew)?,
                        _ => {}
                    }
                }
                if v.is_null() {
                    v = json!("");
                }
                let m = out.entry(name.to_string()).or_insert_with(|| json!({}));
                if let Some(m) = m.as_object_mut() {
                    m.insert(k, v);
                }
            }
            _ if *repeated => {
                let v = decode_value(*ty, &w).map_err(|e| format!("{name}: {e}"))?;
                let a = out.entry(name.to_string()).or_insert_with(|| json!([]));
                if let Some(a) = a.as_array_mut() {
                    a.push(v);
                }
            }
            _ => {
                out.insert(
                    name.to_string(),
                    decode_value(*ty, &w).map_err(|e| format!("{name}: {e}"))?,
                );
            }
        }
    }
    Ok(Value::Object(out))
}

/// Decodes an enveloped protobuf object into its JSON form; `Err` says why
/// (unsupported kind or malformed data).
pub(crate) fn decode(body: &[u8]) -> Result<Value, String> {
    let payload = body
        .strip_prefix(b"k8s\0")
        .ok_or("missing the k8s protobuf envelope")?;
    let (mut api_version, mut kind, mut raw) = (String::new(), String::new(), &[][..]);
    for (n, w) in fields(payload)? {
        match (n, w) {
            (1, Wire::Bytes(tm)) => {
                for (tn, tw) in fields(tm)? {
                    match (tn, tw) {
                        (1, Wire::Bytes(b)) => api_version = text(b)?,
                        (2, Wire::Bytes(b)) => kind = text(b)?,
                        _ => {}
                    }
                }
            }
            (2, Wire::Bytes(b)) => raw = b,
            _ => {}
        }
    }
    let schema = match (api_version.as_str(), kind.as_str()) {
        ("v1", "Namespace") => NAMESPACE,
        ("v1", "ConfigMap") => CONFIG_MAP,
        ("v1", "Secret") => SECRET,
        ("v1", "Service") => SERVICE,
        _ => {
            return Err(format!(
                "protobuf bodies for {api_version}/{kind} are not supported; send JSON"
            ))
        }
    };
    let mut obj = decode_msg(raw, schema)?;
    obj["apiVersion"] = json!(api_version);
    obj["kind"] = json!(kind);
    Ok(obj)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ld(num: u32, b: &[u8]) -> Vec<u8> {
        let mut v = vec![(num << 3 | 2) as u8, b.len() as u8];
        v.extend_from_slice(b);
        v
    }

    #[test]
    fn an_enveloped_config_map_decodes_to_json() {
        let meta = [
            ld(1, b"cfg"),
            ld(11, &[ld(1, b"app"), ld(2, b"web")].concat()),
        ]
        .concat();
        let cm = [ld(1, &meta), ld(2, &[ld(1, b"k"), ld(2, b"v")].concat())].concat();
        let tm = [ld(1, b"v1"), ld(2, b"ConfigMap")].concat();
        let body = [b"k8s\0".to_vec(), ld(1, &tm), ld(2, &cm)].concat();
        let v = decode(&body).unwrap();
        assert_eq!(
            v,
            json!({"metadata": {"name": "cfg", "labels": {"app": "web"}}, "data": {"k": "v"}, "apiVersion": "v1", "kind": "ConfigMap"})
        );
    }

    #[test]
    fn unsupported_kinds_and_garbage_are_errors_not_panics() {
        let tm = [ld(1, b"apps/v1"), ld(2, b"Deployment")].concat();
        assert!(decode(&[b"k8s\0".to_vec(), ld(1, &tm)].concat())
            .unwrap_err()
            .contains("apps/v1/Deployment"));
        assert!(decode(b"k8s\0\x0a\xff").is_err());
        assert!(decode(b"{}").is_err());
    }
}
