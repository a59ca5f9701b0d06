//! The demo pet store: the example upstream the repo ships, and its catalog.
//!
//! [`petstore_app`] is an in-memory implementation of
//! `deploy/examples/openapi/petstore.yaml`, mounted under `/api` (the document's
//! server path), seeded with [`SEED`]. It answers the way the document says:
//! `201` on create, `422` `application/problem+json` for an invalid pet,
//! `404` problem+json for a missing one, `204` on delete, and a small PNG
//! (generated here, valid, one colour per pet) for the photo. Each call of
//! `petstore_app` owns a fresh store, so tests do not see each other's pets.
//!
//! [`petstore_catalog`] compiles the embedded document plus
//! `petstore-overlay.yaml` under the prefix [`PREFIX`]; `toolgate demo`
//! serves it with the base URL pointed at a running `petstore_app`.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

use axum::extract::{Path, Query, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use catalog::{Catalog, CompileError, CompileOptions, Overlay, UpstreamSource};
use serde_json::{json, Map, Value};

/// The example OpenAPI document.
pub(crate) const PETSTORE_SPEC: &str = include_str!("../../deploy/examples/openapi/petstore.yaml");
/// The overlay the demo applies (hides deletePet, renames listPets).
pub(crate) const PETSTORE_OVERLAY: &str =
    include_str!("../../deploy/examples/openapi/petstore-overlay.yaml");
/// Tool prefix of the demo upstream.
pub const PREFIX: &str = "pets";
/// Path under which [`petstore_app`] serves the API (the document's server path).
pub const API_BASE: &str = "/api";

/// Pets present when the store starts: (id, name, kind, tag).
pub(crate) const SEED: &[(i64, &str, &str, Option<&str>)] = &[
    (1, "Rex", "dog", Some("good boy")),
    (2, "Tom", "cat", None),
    (3, "Tweety", "bird", Some("yellow")),
    (4, "Felix", "cat", Some("black")),
];

/// Compiles the embedded pet store document and overlay.
pub fn petstore_catalog() -> Result<Catalog, CompileError> {
    let overlay = Overlay::parse("petstore-overlay.yaml", PETSTORE_OVERLAY.as_bytes(), true)?;
    let upstream = catalog::compile_upstream(&UpstreamSource {
        prefix: PREFIX,
        document: "petstore.yaml",
        spec: PETSTORE_SPEC.as_bytes(),
        overlays: &[overlay],
        options: &CompileOptions::default(),
    })?;
    Ok(Catalog::new(vec![upstream]))
}

#[derive(Default)]
struct Store {
    pets: BTreeMap<i64, Map<String, Value>>,
    next_id: i64,
}

type Shared = Arc<Mutex<Store>>;

fn seeded() -> Store {
    let mut store = Store::default();
    for (id, name, kind, tag) in SEED {
        let mut pet = Map::new();
        pet.insert("id".into(), json!(id));
        pet.insert("name".into(), json!(name));
        pet.insert("kind".into(), json!(kind));
        pet.insert("tag".into(), json!(tag));
        store.pets.insert(*id, pet);
        store.next_id = store.next_id.max(id + 1);
    }
    store
}

/// The pet store as an axum router (routes under [`API_BASE`]).
pub fn petstore_app() -> Router {
    let state: Shared = Arc::new(Mutex::new(seeded()));
    let api = Router::new()
        .route("/pets", get(list_pets).post(create_pet))
        .route("/pets/{id}", get(fetch_pet).delete(delete_pet))
        .route("/pets/{id}/photo", get(pet_photo))
        .with_state(state);
    Router::new().nest(API_BASE, api)
}

fn with_store<T>(state: &Shared, f: impl FnOnce(&mut Store) -> T) -> T {
    // A panic while holding the lock cannot leave the map half-updated in a
    // way that matters for a demo; keep serving.
    let mut guard = state.lock().unwrap_or_else(PoisonError::into_inner);
    f(&mut guard)
}

fn problem(status: StatusCode, title: &str, detail: String) -> Response {
    let body = json!({
        "type": "about:blank",
        "title": title,
        "status": status.as_u16(),
        "detail": detail,
    });
    (
        status,
        [(header::CONTENT_TYPE, "application/problem+json")],
        body.to_string(),
    )
        .into_response()
}

fn not_found(id: &str) -> Response {
    problem(
        StatusCode::NOT_FOUND,
        "Pet not found",
        format!("no pet with id {id}"),
    )
}

const KINDS: [&str; 3] = ["cat", "dog", "bird"];

async fn list_pets(
    State(state): State<Shared>,
    Query(q): Query<BTreeMap<String, String>>,
) -> Response {
    let limit = match q.get("limit").map(|l| l.parse::<usize>()) {
        None => 20,
        Some(Ok(n)) if (1..=100).contains(&n) => n,
        Some(_) => {
            return problem(
                StatusCode::BAD_REQUEST,
                "Invalid limit",
                "limit must be an integer from 1 to 100".into(),
            )
        }
    };
    let kind = q.get("kind");
    if let Some(k) = kind {
        if !KINDS.contains(&k.as_str()) {
            return problem(
                StatusCode::BAD_REQUEST,
                "Invalid kind",
                format!("kind must be one of {}", KINDS.join(", ")),
            );
        }
    }
    let pets: Vec<Value> = with_store(&state, |s| {
        s.pets
            .values()
            .filter(|p| kind.is_none_or(|k| p.get("kind").and_then(Value::as_str) == Some(k)))
            .take(limit)
            .map(|p| Value::Object(p.clone()))
            .collect()
    });
    Json(pets).into_response()
}

/// Checks a pet against the document's `Pet` schema; every problem, joined.
fn invalid_pet(body: &Value) -> Option<String> {
    let Some(obj) = body.as_object() else {
        return Some("the body must be a JSON object".into());
    };
    let mut errors = Vec::new();
    match obj.get("name") {
        None => errors.push("name is required".to_string()),
        Some(Value::String(n)) => {
            let mut chars = n.chars();
            let first_ok = chars.next().is_some_and(|c| c.is_ascii_alphabetic());
            let rest_ok = chars.all(|c| c.is_ascii_alphabetic() || c == ' ' || c == '-');
            if !(first_ok && rest_ok) || n.chars().count() > 64 {
                errors.push(
                    "name must be 1-64 letters, spaces or hyphens, starting with a letter".into(),
                );
            }
        }
        Some(_) => errors.push("name must be a string".into()),
    }
    match obj.get("kind") {
        None => errors.push("kind is required".into()),
        Some(k) if k.as_str().is_some_and(|k| KINDS.contains(&k)) => {}
        Some(_) => errors.push(format!("kind must be one of {}", KINDS.join(", "))),
    }
    if let Some(tag) = obj.get("tag") {
        if !(tag.is_string() || tag.is_null()) {
            errors.push("tag must be a string or null".into());
        }
    }
    (!errors.is_empty()).then(|| errors.join("; "))
}

async fn create_pet(State(state): State<Shared>, body: axum::body::Bytes) -> Response {
    let body: Value = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(e) => {
            return problem(
                StatusCode::UNPROCESSABLE_ENTITY,
                "Invalid pet",
                format!("the body is not JSON: {e}"),
            )
        }
    };
    if let Some(detail) = invalid_pet(&body) {
        return problem(StatusCode::UNPROCESSABLE_ENTITY, "Invalid pet", detail);
    }
    let pet = with_store(&state, |s| {
        let id = s.next_id;
        s.next_id += 1;
        let mut pet = Map::new();
        pet.insert("id".into(), json!(id));
        for key in ["name", "kind", "tag"] {
            pet.insert(key.into(), body.get(key).cloned().unwrap_or(Value::Null));
        }
        s.pets.insert(id, pet.clone());
        pet
    });
    (StatusCode::CREATED, Json(Value::Object(pet))).into_response()
}

async fn fetch_pet(State(state): State<Shared>, Path(id): Path<String>) -> Response {
    let pet = id
        .parse::<i64>()
        .ok()
        .and_then(|n| with_store(&state, |s| s.pets.get(&n).cloned()));
    match pet {
        Some(p) => Json(Value::Object(p)).into_response(),
        None => not_found(&id),
    }
}

async fn delete_pet(State(state): State<Shared>, Path(id): Path<String>) -> Response {
    let removed = id
        .parse::<i64>()
        .ok()
        .and_then(|n| with_store(&state, |s| s.pets.remove(&n)));
    match removed {
        Some(_) => StatusCode::NO_CONTENT.into_response(),
        None => not_found(&id),
    }
}

async fn pet_photo(State(state): State<Shared>, Path(id): Path<String>) -> Response {
    let Some(n) = id
        .parse::<i64>()
        .ok()
        .filter(|n| with_store(&state, |s| s.pets.contains_key(n)))
    else {
        return not_found(&id);
    };
    // A colour per pet so different pets give different images.
    let seed = n.unsigned_abs();
    let rgb = [
        (seed.wrapping_mul(97) % 256) as u8,
        (seed.wrapping_mul(57) % 256) as u8,
        (seed.wrapping_mul(23) % 256) as u8,
    ];
    (
        [(header::CONTENT_TYPE, "image/png")],
        png_solid(16, 16, rgb),
    )
        .into_response()
}

/// A solid-colour RGB PNG: zlib with stored (uncompressed) deflate blocks,
/// so no compression library is needed.
pub(crate) fn png_solid(width: u32, height: u32, rgb: [u8; 3]) -> Vec<u8> {
    // Each scanline: filter byte 0 (none), then the pixels.
    let mut row = vec![0u8];
    for _ in 0..width {
        row.extend_from_slice(&rgb);
    }
    let raw = row.repeat(height as usize);
    let mut z = vec![0x78, 0x01];
    let mut blocks = raw.chunks(65_535).peekable();
    if blocks.peek().is_none() {
        z.extend_from_slice(&[1, 0, 0, 0xff, 0xff]);
    }
    while let Some(block) = blocks.next() {
        z.push(u8::from(blocks.peek().is_none()));
        // chunks(65_535) bounds the length to u16.
        let len = block.len() as u16;
        z.extend_from_slice(&len.to_le_bytes());
        z.extend_from_slice(&(!len).to_le_bytes());
        z.extend_from_slice(block);
    }
    z.extend_from_slice(&adler32(&raw).to_be_bytes());

    let mut ihdr = Vec::with_capacity(13);
    ihdr.extend_from_slice(&width.to_be_bytes());
    ihdr.extend_from_slice(&height.to_be_bytes());
    // bit depth 8, colour type 2 (RGB), compression, filter, interlace
    ihdr.extend_from_slice(&[8, 2, 0, 0, 0]);

    let mut png = b"\x89PNG\r\n\x1a\n".to_vec();
    for (kind, data) in [(b"IHDR", &ihdr[..]), (b"IDAT", &z[..]), (b"IEND", &[][..])] {
        png.extend_from_slice(&(data.len() as u32).to_be_bytes());
        let start = png.len();
        png.extend_from_slice(kind);
        png.extend_from_slice(data);
        let crc = crc32(&png[start..]);
        png.extend_from_slice(&crc.to_be_bytes());
    }
    png
}

fn adler32(data: &[u8]) -> u32 {
    let (mut a, mut b) = (1u32, 0u32);
    for &byte in data {
        a = (a + u32::from(byte)) % 65_521;
        b = (b + a) % 65_521;
    }
    (b << 16) | a
}

fn crc32(data: &[u8]) -> u32 {
    let mut crc = 0xffff_ffffu32;
    for &byte in data {
        crc ^= u32::from(byte);
        for _ in 0..8 {
            let mask = (crc & 1).wrapping_neg();
            crc = (crc >> 1) ^ (0xedb8_8320 & mask);
        }
    }
    !crc
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc32_matches_the_png_reference_value() {
        // CRC of the IEND chunk type, fixed by the PNG spec.
        assert_eq!(crc32(b"IEND"), 0xae42_6082);
        assert_eq!(crc32(b"123456789"), 0xcbf4_3926);
    }

    #[test]
    fn adler32_matches_the_reference_value() {
        assert_eq!(adler32(b"Wikipedia"), 0x11e6_0398);
    }

    #[test]
    fn png_has_signature_header_and_end() {
        let png = png_solid(2, 3, [1, 2, 3]);
        assert!(png
            .starts_with(b"\x89PNG\r\n\x1a\n\x00\x00\x00\x0dIHDR\x00\x00\x00\x02\x00\x00\x00\x03"));
        assert!(png.ends_with(b"IEND\xae\x42\x60\x82"));
    }

    #[test]
    fn embedded_petstore_compiles_with_the_overlay() {
        let catalog = petstore_catalog().expect("embedded petstore compiles");
        let names: Vec<&str> = catalog.upstreams[0]
            .tools
            .iter()
            .map(|t| t.name.as_str())
            .collect();
        assert!(names.contains(&"pets__fetch_pet"), "{names:?}");
        assert!(names.contains(&"pets__get_pet_photo"), "{names:?}");
        assert!(!names.iter().any(|n| n.contains("delete")), "{names:?}");
    }

    #[test]
    fn invalid_pets_are_named_by_field() {
        assert!(invalid_pet(&json!({"name": "Rex", "kind": "dog"})).is_none());
        let e = invalid_pet(&json!({"name": "1x", "kind": "cow", "tag": 3})).unwrap_or_default();
        for field in ["name", "kind", "tag"] {
            assert!(e.contains(field), "{e}");
        }
        assert!(invalid_pet(&json!({"name": "Rex"}))
            .unwrap_or_default()
            .contains("kind is required"));
    }
}
