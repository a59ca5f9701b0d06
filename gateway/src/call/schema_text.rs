//! Tool schemas at rest: compact JSON, deflated, and shared between tools.
//!
//! A gateway serving a few thousand tools holds tens of megabytes of JSON
//! Schema, most of which no call ever touches (a call compiles its tool's
//! validators once; `tools/list` reads the schemas of one page at a time).
//! Real APIs also repeat themselves: over the spec corpus about 40% of the
//! schema text is byte-identical to another tool's (shared error bodies,
//! pagination envelopes, the same resource returned by several
//! operations). So a snapshot keeps each distinct schema once, deflated:
//! for the corpus, 20.2 MiB of schema text is 12.5 MiB distinct and 3.0 MiB
//! deflated (fast level; small schemas compress less than large ones).
//! Inflating one schema costs less than parsing it, which every use does
//! anyway.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::sync::Arc;

use flate2::read::DeflateDecoder;
use flate2::write::DeflateEncoder;
use flate2::Compression;

/// One schema's compact JSON text, deflated. Cloning shares it.
#[derive(Clone)]
pub(crate) struct SchemaText(Arc<Packed>);

struct Packed {
    /// Length of the inflated text, to size the buffer once.
    len: usize,
    deflated: Box<[u8]>,
}

impl std::fmt::Debug for SchemaText {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SchemaText({} bytes)", self.0.len)
    }
}

impl SchemaText {
    fn pack(text: &str) -> SchemaText {
        let mut enc =
            DeflateEncoder::new(Vec::with_capacity(text.len() / 4 + 16), Compression::fast());
        // Writing to a Vec cannot fail.
        let deflated = enc
            .write_all(text.as_bytes())
            .and_then(|()| enc.finish())
            .unwrap_or_default();
        SchemaText(Arc::new(Packed {
            len: text.len(),
            deflated: deflated.into_boxed_slice(),
        }))
    }

    /// The JSON text.
    pub(crate) fn bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.0.len);
        // Only this module deflates, from valid text: inflating it back
        // cannot fail short of memory corruption.
        let _ = DeflateDecoder::new(&self.0.deflated[..]).read_to_end(&mut out);
        out
    }

    /// The schema as a JSON object (empty if it is not one; catalog
    /// schemas always are).
    pub(crate) fn object(&self) -> serde_json::Map<String, serde_json::Value> {
        serde_json::from_slice(&self.bytes()).unwrap_or_default()
    }

    /// The schema as a JSON value.
    pub(crate) fn value(&self) -> Result<serde_json::Value, String> {
        serde_json::from_slice(&self.bytes()).map_err(|e| e.to_string())
    }

    /// A copy in fresh allocations, shared through `seen` so that a
    /// schema shared before is shared after.
    pub(crate) fn copied(&self, seen: &mut HashMap<usize, SchemaText>) -> SchemaText {
        let key = Arc::as_ptr(&self.0) as usize;
        seen.entry(key)
            .or_insert_with(|| {
                SchemaText(Arc::new(Packed {
                    len: self.0.len,
                    deflated: self.0.deflated.clone(),
                }))
            })
            .clone()
    }

    /// Length of the JSON text.
    pub(crate) fn text_len(&self) -> usize {
        self.0.len
    }

    #[cfg(test)]
    /// Bytes held (deflated), for sizing reports.
    pub(crate) fn stored_len(&self) -> usize {
        self.0.deflated.len()
    }
}

/// Deduplicates schemas while a snapshot is built; dropped afterwards.
#[derive(Default)]
pub(crate) struct SchemaPool {
    by_text: HashMap<String, SchemaText>,
}

impl SchemaPool {
    /// The shared packed form of `text`.
    pub(crate) fn intern(&mut self, text: String) -> SchemaText {
        if let Some(s) = self.by_text.get(&text) {
            return s.clone();
        }
        let packed = SchemaText::pack(&text);
        self.by_text.insert(text, packed.clone());
        packed
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn round_trips_and_shares_identical_text() {
        let mut pool = SchemaPool::default();
        let schema = json!({"type": "object", "properties": {"id": {"type": "integer"}}});
        let a = pool.intern(schema.to_string());
        let b = pool.intern(schema.to_string());
        let c = pool.intern(json!({"type": "string"}).to_string());
        assert!(Arc::ptr_eq(&a.0, &b.0));
        assert!(!Arc::ptr_eq(&a.0, &c.0));
        assert_eq!(a.value().unwrap(), schema);
        assert_eq!(serde_json::Value::Object(a.object()), schema);

        let mut seen = HashMap::new();
        let (a2, b2) = (a.copied(&mut seen), b.copied(&mut seen));
        assert!(Arc::ptr_eq(&a2.0, &b2.0));
        assert!(!Arc::ptr_eq(&a.0, &a2.0));
        assert_eq!(a2.value().unwrap(), schema);
    }

    #[test]
    fn large_repetitive_schemas_shrink() {
        let props: serde_json::Map<String, serde_json::Value> = (0..200)
            .map(|i| {
                (
                    format!("field_{i}"),
                    json!({"type": "string", "maxLength": 64}),
                )
            })
            .collect();
        let text = json!({"type": "object", "properties": props}).to_string();
        let packed = SchemaPool::default().intern(text.clone());
        assert!(
            packed.stored_len() * 4 < text.len(),
            "{}",
            packed.stored_len()
        );
        assert_eq!(packed.bytes(), text.as_bytes());
    }
}
