//! A response body as JSON text, read in place: checked once, validated
//! against JSON Schema and measured without building a `serde_json::Value`.
//!
//! A `Value` tree costs 8x (strings) to 60x (small numbers) the text it
//! came from — a 10 MB array of small objects is ~150 MB of tree — so the
//! success path never builds one for a body (see [`crate::call::response`]): the
//! bytes are checked by serde_json ([`Document::parse`]), validated through
//! jsonschema's custom-representation API ([`RawJson`], nodes that are
//! slices of the text), and sent as they are ([`crate::call::payload`]).
//!
//! Navigation is by scanning: an object lookup walks the object's members
//! and an array's length counts its elements. Hand-written (no crate reads
//! JSON in place behind jsonschema's traits), and only over text serde_json
//! has already accepted, so it only has to find where values end: it never
//! sees malformed input, and every index is bounds-checked regardless.
//! Nesting is bounded by serde_json's limit (128 levels), which bounds the
//! recursion of validation too.

use std::borrow::Cow;
use std::fmt;
use std::sync::OnceLock;

use jsonschema::json::{Array, Json, JsonNumber, Node, NodeIdentity, Object};
use jsonschema::JsonType;
use jsonschema_value::LazyInstance;
use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::Value;

/// JSON text that serde_json accepts as a `Value`, without surrounding
/// whitespace.
#[derive(Clone, Copy)]
pub(crate) struct Document<'a> {
    text: &'a [u8],
}

impl<'a> Document<'a> {
    /// Checks `bytes` exactly as `serde_json::from_slice::<Value>` would
    /// (syntax, UTF-8, escapes, number range, depth) without building it.
    pub(crate) fn parse(bytes: &'a [u8]) -> Result<Self, serde_json::Error> {
        serde_json::from_slice::<Check>(bytes)?;
        Ok(Document { text: trim(bytes) })
    }

    /// The JSON text.
    pub(crate) fn text(&self) -> &'a [u8] {
        self.text
    }

    pub(crate) fn root(&self) -> RawNode<'a> {
        RawNode::Text(self.text)
    }

    /// `{"result": <the document>}`, as the output wrap presents it.
    pub(crate) fn wrapped(&self) -> RawNode<'a> {
        RawNode::Wrapped(self.text)
    }

    /// The value at `pointer` (RFC 6901), if any.
    pub(crate) fn pointer(&self, node: RawNode<'a>, pointer: &str) -> Option<RawNode<'a>> {
        let mut node = node;
        for seg in pointer.split('/').skip(1) {
            let seg = seg.replace("~1", "/").replace("~0", "~");
            node = match node.as_object() {
                Some(o) => o.get(&Box::from(seg.as_str()))?,
                None => {
                    let i: usize = seg.parse().ok()?;
                    node.as_array()?.elements().nth(i)?
                }
            };
        }
        Some(node)
    }

    /// Bytes a `serde_json::Value` of this document would take, estimated
    /// from its shape (an upper bound for the shapes measured: arrays of
    /// numbers, strings and small objects), so a caller can refuse or
    /// budget a tree before building one.
    pub(crate) fn tree_bytes(&self) -> usize {
        tree_bytes(self.text)
    }
}

/// JSON whitespace.
fn is_ws(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r')
}

fn trim(mut t: &[u8]) -> &[u8] {
    while let [first, rest @ ..] = t {
        if !is_ws(*first) {
            break;
        }
        t = rest;
    }
    while let [rest @ .., last] = t {
        if !is_ws(*last) {
            break;
        }
        t = rest;
    }
    t
}

fn skip_ws(t: &[u8], mut i: usize) -> usize {
    while i < t.len() && is_ws(t[i]) {
        i += 1;
    }
    i
}

/// One past the closing quote of the string opening at `i`.
fn string_end(t: &[u8], i: usize) -> usize {
    let mut j = i + 1;
    while j < t.len() {
        match memchr::memchr2(b'"', b'\\', &t[j..]) {
            None => return t.len(),
            Some(k) if t[j + k] == b'\\' => j += k + 2,
            Some(k) => return j + k + 1,
        }
    }
    t.len()
}

/// One past the end of the value starting at `i`.
fn value_end(t: &[u8], i: usize) -> usize {
    match t.get(i) {
        None => t.len(),
        Some(b'"') => string_end(t, i),
        Some(b'{' | b'[') => {
            let mut depth = 0usize;
            let mut j = i;
            while j < t.len() {
                match t[j] {
                    b'"' => {
                        j = string_end(t, j);
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return j + 1;
                        }
                    }
                    _ => {}
                }
                j += 1;
            }
            t.len()
        }
        Some(_) => {
            let mut j = i;
            while j < t.len() && !matches!(t[j], b',' | b'}' | b']') && !is_ws(t[j]) {
                j += 1;
            }
            j
        }
    }
}

/// The string a JSON string literal (quotes included) stands for.
fn decode(lit: &[u8]) -> Cow<'_, str> {
    let inner = lit.get(1..lit.len().saturating_sub(1)).unwrap_or_default();
    if !inner.contains(&b'\\') {
        // Checked UTF-8 by `Document::parse`; lossy is never lossy here.
        return String::from_utf8_lossy(inner);
    }
    Cow::Owned(serde_json::from_slice::<String>(lit).unwrap_or_default())
}

/// Whether the string literal `lit` stands for `key`.
fn key_is(lit: &[u8], key: &str) -> bool {
    let inner = lit.get(1..lit.len().saturating_sub(1)).unwrap_or_default();
    if inner.contains(&b'\\') {
        decode(lit) == key
    } else {
        inner == key.as_bytes()
    }
}

// ------------------------------------------------------------- the check

/// Accepts what `Value` accepts, keeping nothing: strings and numbers are
/// still decoded by serde_json (so escapes, UTF-8 and number range are
/// checked), but not stored.
struct Check;

impl<'de> Deserialize<'de> for Check {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(CheckVisitor)
    }
}

struct CheckVisitor;

impl<'de> Visitor<'de> for CheckVisitor {
    type Value = Check;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, _: bool) -> Result<Check, E> {
        Ok(Check)
    }
    fn visit_i64<E>(self, _: i64) -> Result<Check, E> {
        Ok(Check)
    }
    fn visit_u64<E>(self, _: u64) -> Result<Check, E> {
        Ok(Check)
    }
    fn visit_f64<E>(self, _: f64) -> Result<Check, E> {
        Ok(Check)
    }
    fn visit_str<E>(self, _: &str) -> Result<Check, E> {
        Ok(Check)
    }
    fn visit_unit<E>(self) -> Result<Check, E> {
        Ok(Check)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Check, A::Error> {
        while seq.next_element::<Check>()?.is_some() {}
        Ok(Check)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Check, A::Error> {
        while map.next_entry::<Check, Check>()?.is_some() {}
        Ok(Check)
    }
}

// ------------------------------------------------------------ tree size

/// Sizes behind [`Document::tree_bytes`]: a `Value` is 72 bytes (with
/// `preserve_order`); an array's `Vec` may hold twice its length after
/// growing; an object member is an `IndexMap` bucket (hash, key `String`,
/// `Value`: 104 bytes) plus its index slot, both up to twice over after
/// growing, plus the key's heap; a string's heap is its length plus the
/// allocator's rounding.
const VALUE: usize = 72;
const MEMBER: usize = 2 * (104 + 8);
const HEAP_OVERHEAD: usize = 16;

fn tree_bytes(t: &[u8]) -> usize {
    let mut total = VALUE;
    let mut i = 0usize;
    while i < t.len() {
        match t[i] {
            b'"' => {
                let end = string_end(t, i);
                // A key is followed by ':'; either way one heap block.
                total += end - i + HEAP_OVERHEAD;
                let next = skip_ws(t, end);
                if t.get(next) == Some(&b':') {
                    total += MEMBER;
                    i = next + 1;
                } else {
                    i = end;
                }
                continue;
            }
            // Every element but the first follows a comma; the first
            // follows the opening bracket. Counting both covers both.
            b',' | b'[' => total += 2 * VALUE,
            _ => {}
        }
        i += 1;
    }
    total
}

// ------------------------------------------------- jsonschema's traits

/// The representation: nodes are slices of checked JSON text.
pub struct RawJson;

/// One value.
#[derive(Clone, Copy, Debug)]
pub enum RawNode<'a> {
    /// A value's JSON text, without surrounding whitespace.
    Text(&'a [u8]),
    /// A string given decoded (a property name, for `propertyNames`).
    Name(&'a str),
    /// `{"result": <text>}`, the output wrap, without building it.
    Wrapped(&'a [u8]),
}

impl RawNode<'_> {
    fn first(&self) -> u8 {
        match self {
            RawNode::Text(t) => t.first().copied().unwrap_or(b'n'),
            RawNode::Name(_) => b'"',
            RawNode::Wrapped(_) => b'{',
        }
    }
}

impl Json for RawJson {
    type Node<'a> = RawNode<'a>;
    type PreparedKey = Box<str>;
    /// A lookup scans the object; a pass over its members is never worse.
    const KEYS_PER_LOOKUP: usize = 1 << 16;
    const ACYCLIC: bool = true;
    type StringBuffer = ();

    fn prepare_key(key: &str) -> Box<str> {
        key.into()
    }

    fn with_string_node<T>(_: &mut (), string: &str, f: impl FnOnce(RawNode<'_>) -> T) -> T {
        f(RawNode::Name(string))
    }
}

/// A number literal.
pub struct RawNumber<'a>(&'a str);

impl JsonNumber for RawNumber<'_> {
    fn as_u64(&self) -> Option<u64> {
        self.0.parse().ok()
    }
    fn as_i64(&self) -> Option<i64> {
        self.0.parse().ok()
    }
    fn as_f64(&self) -> Option<f64> {
        self.0.parse().ok()
    }
    fn as_str(&self) -> Cow<'_, str> {
        Cow::Borrowed(self.0)
    }
    fn to_number(&self) -> Cow<'_, serde_json::Number> {
        // A literal `Document::parse` accepted parses as a `Number`.
        Cow::Owned(serde_json::from_str(self.0).unwrap_or_else(|_| 0.into()))
    }
}

fn make_instance(text: &[u8], tag: u32) -> Value {
    let v = serde_json::from_slice(text).unwrap_or(Value::Null);
    if tag == WRAPPED {
        let mut m = serde_json::Map::new();
        m.insert("result".into(), v);
        Value::Object(m)
    } else {
        v
    }
}

const TEXT: u32 = 0;
const WRAPPED: u32 = 1;
const NAME: u32 = 2;

impl<'a> Node<'a, RawJson> for RawNode<'a> {
    type Object = RawObject<'a>;
    type Array = RawArray<'a>;
    type Number = RawNumber<'a>;

    fn as_object(&self) -> Option<RawObject<'a>> {
        match *self {
            RawNode::Text(t) if t.first() == Some(&b'{') => Some(RawObject::Text(t)),
            RawNode::Wrapped(t) => Some(RawObject::Wrapped(t)),
            _ => None,
        }
    }

    fn as_array(&self) -> Option<RawArray<'a>> {
        match *self {
            RawNode::Text(t) if t.first() == Some(&b'[') => Some(RawArray(t)),
            _ => None,
        }
    }

    fn as_string(&self) -> Option<Cow<'a, str>> {
        match *self {
            RawNode::Text(t) if t.first() == Some(&b'"') => Some(decode(t)),
            RawNode::Name(s) => Some(Cow::Borrowed(s)),
            _ => None,
        }
    }

    fn as_number(&self) -> Option<RawNumber<'a>> {
        match *self {
            RawNode::Text(t) if matches!(t.first(), Some(b'-' | b'0'..=b'9')) => {
                std::str::from_utf8(t).ok().map(RawNumber)
            }
            _ => None,
        }
    }

    fn as_boolean(&self) -> Option<bool> {
        match self.first() {
            b't' => Some(true),
            b'f' => Some(false),
            _ => None,
        }
    }

    fn is_null(&self) -> bool {
        self.first() == b'n'
    }

    fn json_type(&self) -> JsonType {
        match self.first() {
            b'{' => JsonType::Object,
            b'[' => JsonType::Array,
            b'"' => JsonType::String,
            b't' | b'f' => JsonType::Boolean,
            b'n' => JsonType::Null,
            _ => JsonType::Number,
        }
    }

    fn equals_value(&self, expected: &Value) -> bool {
        // `const`/`enum` against a container built only when the kinds
        // agree: most such checks compare a scalar.
        let same_kind = matches!(
            (self.json_type(), expected),
            (JsonType::Object, Value::Object(_))
                | (JsonType::Array, Value::Array(_))
                | (JsonType::String, Value::String(_))
                | (JsonType::Number, Value::Number(_))
                | (JsonType::Boolean, Value::Bool(_))
                | (JsonType::Null, Value::Null)
        );
        same_kind && jsonschema::json::cmp::equal(&self.to_value(), expected)
    }

    fn to_value(&self) -> Cow<'a, Value> {
        Cow::Owned(match *self {
            RawNode::Text(t) => make_instance(t, TEXT),
            RawNode::Wrapped(t) => make_instance(t, WRAPPED),
            RawNode::Name(s) => Value::String(s.to_string()),
        })
    }

    /// Built only if the error's instance is read: the gateway's messages
    /// never read it (see [`crate::call::validate`]).
    fn lazy_value(&self) -> LazyInstance<'a> {
        match *self {
            RawNode::Text(bytes) | RawNode::Wrapped(bytes) => LazyInstance::Deferred {
                bytes,
                tag: if matches!(self, RawNode::Wrapped(_)) {
                    WRAPPED
                } else {
                    TEXT
                },
                make: make_instance,
                cell: OnceLock::new(),
            },
            RawNode::Name(s) => LazyInstance::Ready(Cow::Owned(Value::String(s.to_string()))),
        }
    }

    /// A value's text starts at its own address: no two values of one
    /// document share a start, and the wrap is told apart by its tag.
    fn identity(&self) -> Option<NodeIdentity> {
        Some(match *self {
            RawNode::Text(t) => NodeIdentity::tagged(t.as_ptr() as usize, TEXT),
            RawNode::Wrapped(t) => NodeIdentity::tagged(t.as_ptr() as usize, WRAPPED),
            RawNode::Name(s) => NodeIdentity::tagged(s.as_ptr() as usize, NAME),
        })
    }
}

/// An object's text, or the wrap.
#[derive(Clone, Copy)]
pub enum RawObject<'a> {
    Text(&'a [u8]),
    Wrapped(&'a [u8]),
}

impl<'a> Object<'a, RawJson> for RawObject<'a> {
    type Node = RawNode<'a>;
    type MemberName = Cow<'a, str>;
    type MembersIter = Members<'a>;

    fn len(&self) -> usize {
        self.members().count()
    }

    /// The last member of that name, as `serde_json` keeps duplicates.
    fn get(&self, key: &Box<str>) -> Option<RawNode<'a>> {
        match *self {
            RawObject::Wrapped(t) => (&**key == "result").then_some(RawNode::Text(t)),
            RawObject::Text(t) => {
                let mut it = MemberSlices::new(t);
                let mut found = None;
                while let Some((k, v)) = it.next_slices() {
                    if key_is(k, key) {
                        found = Some(RawNode::Text(v));
                    }
                }
                found
            }
        }
    }

    fn members(&self) -> Members<'a> {
        match *self {
            RawObject::Text(t) => Members::Text(MemberSlices::new(t)),
            RawObject::Wrapped(t) => Members::Wrapped(Some(t)),
        }
    }
}

/// Walks an object's text member by member.
pub struct MemberSlices<'a> {
    t: &'a [u8],
    pos: usize,
}

impl<'a> MemberSlices<'a> {
    fn new(t: &'a [u8]) -> Self {
        MemberSlices { t, pos: 1 }
    }

    /// The next (key literal, value text).
    fn next_slices(&mut self) -> Option<(&'a [u8], &'a [u8])> {
        let t = self.t;
        let k0 = skip_ws(t, self.pos);
        if t.get(k0) != Some(&b'"') {
            self.pos = t.len();
            return None;
        }
        let k1 = string_end(t, k0);
        let colon = skip_ws(t, k1);
        let v0 = skip_ws(t, colon + 1);
        let v1 = value_end(t, v0);
        let next = skip_ws(t, v1);
        self.pos = if t.get(next) == Some(&b',') {
            next + 1
        } else {
            t.len()
        };
        Some((t.get(k0..k1)?, t.get(v0..v1)?))
    }
}

pub enum Members<'a> {
    Text(MemberSlices<'a>),
    Wrapped(Option<&'a [u8]>),
}

impl<'a> Iterator for Members<'a> {
    type Item = (Cow<'a, str>, RawNode<'a>);

    fn next(&mut self) -> Option<Self::Item> {
        match self {
            Members::Text(m) => m.next_slices().map(|(k, v)| (decode(k), RawNode::Text(v))),
            Members::Wrapped(t) => t
                .take()
                .map(|t| (Cow::Borrowed("result"), RawNode::Text(t))),
        }
    }
}

/// An array's text.
#[derive(Clone, Copy)]
pub struct RawArray<'a>(&'a [u8]);

impl<'a> Array<'a, RawJson> for RawArray<'a> {
    type Node = RawNode<'a>;
    type ElementsIter = Elements<'a>;

    fn len(&self) -> usize {
        self.elements().count()
    }

    fn elements(&self) -> Elements<'a> {
        Elements { t: self.0, pos: 1 }
    }
}

pub struct Elements<'a> {
    t: &'a [u8],
    pos: usize,
}

impl<'a> Iterator for Elements<'a> {
    type Item = RawNode<'a>;

    fn next(&mut self) -> Option<RawNode<'a>> {
        let t = self.t;
        let v0 = skip_ws(t, self.pos);
        if matches!(t.get(v0), None | Some(b']')) {
            self.pos = t.len();
            return None;
        }
        let v1 = value_end(t, v0);
        let next = skip_ws(t, v1);
        self.pos = if t.get(next) == Some(&b',') {
            next + 1
        } else {
            t.len()
        };
        t.get(v0..v1).map(RawNode::Text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn doc(v: &Value) -> Vec<u8> {
        serde_json::to_vec_pretty(v).unwrap()
    }

    #[test]
    fn satisfies_jsonschemas_representation_contract() {
        let text = doc(&jsonschema::json::conformance::document());
        let d = Document::parse(&text).unwrap();
        jsonschema::json::conformance::assert_conformance::<RawJson>(&d.root());
    }

    #[test]
    fn accepts_exactly_what_serde_json_accepts() {
        let cases: &[&[u8]] = &[
            b" {\"a\": [1, 2.5, -3e2, \"x\\u00e9\\n\", true, null, {}]} ",
            b"[1e400]",
            b"\"\\ud800\"",
            b"[1,]",
            b"{\"a\" 1}",
            b"\"\xff\"",
            b"[] []",
            b"",
        ];
        for c in cases {
            assert_eq!(
                Document::parse(c).is_ok(),
                serde_json::from_slice::<Value>(c).is_ok(),
                "{}",
                String::from_utf8_lossy(c)
            );
        }
        let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
        assert!(Document::parse(deep.as_bytes()).is_err());
    }

    #[test]
    fn navigates_pretty_text_with_escapes_and_duplicates() {
        let text = br#" { "a\"b" : [ 1 , { "c" : "d" } , [ ] ] , "e" : "x,}]" , "e" : 2 } "#;
        let d = Document::parse(text).unwrap();
        let root = d.root().as_object().unwrap();
        assert_eq!(root.len(), 3);
        let a = root.get(&"a\"b".into()).unwrap();
        let items: Vec<_> = a.as_array().unwrap().elements().collect();
        assert_eq!(items.len(), 3);
        assert_eq!(items[0].as_number().unwrap().as_u64(), Some(1));
        assert_eq!(
            items[1].to_value().into_owned(),
            json!({"c": "d"}),
            "{:?}",
            items[1]
        );
        assert_eq!(items[2].as_array().unwrap().len(), 0);
        assert_eq!(
            root.get(&"e".into()).unwrap().as_number().unwrap().as_u64(),
            Some(2)
        );
        let c = d.pointer(d.root(), "/a\"b/1/c").unwrap();
        assert_eq!(c.as_string().as_deref(), Some("d"));
        assert!(d.pointer(d.root(), "/a\"b/7").is_none());
        let w = d.wrapped();
        assert!(d.pointer(w, "/result/a\"b/0").is_some());
    }

    #[test]
    fn validates_like_the_serde_representation() {
        let schema = json!({
            "type": "object",
            "required": ["result"],
            "properties": {"result": {"type": "array", "items": {"$ref": "#/$defs/i"}, "minItems": 1}},
            "$defs": {"i": {"type": "object", "required": ["id"],
                "properties": {"id": {"type": "integer", "minimum": 0}, "s": {"enum": ["a", "b"]}},
                "additionalProperties": false}}
        });
        let raw = jsonschema::options_for::<RawJson>().build(&schema).unwrap();
        let serde = jsonschema::validator_for(&schema).unwrap();
        for body in [
            json!([{"id": 1}, {"id": 2, "s": "a"}]),
            json!([]),
            json!([{"id": -1}]),
            json!([{"id": 1.5}]),
            json!([{"id": 1, "s": "c"}]),
            json!([{"id": 1, "x": 0}]),
            json!({"id": 1}),
        ] {
            let text = doc(&body);
            let d = Document::parse(&text).unwrap();
            let wrapped = json!({"result": body});
            assert_eq!(
                raw.is_valid(d.wrapped()),
                serde.is_valid(&wrapped),
                "{body}"
            );
            assert_eq!(
                raw.iter_errors(d.wrapped()).count(),
                serde.iter_errors(&wrapped).count(),
                "{body}"
            );
        }
    }

    #[test]
    fn tree_estimate_bounds_the_real_tree_from_above() {
        // Measured with a counting allocator: ~15x for small objects,
        // ~8x for short strings, ~60x for single-digit numbers.
        let objects: Vec<Value> = (0..1000)
            .map(|i| json!({"id": i, "name": format!("pet-{i}"), "tag": "dog"}))
            .collect();
        let numbers: Vec<Value> = (0..1000).map(|i| json!(i % 10)).collect();
        for (v, at_least) in [(json!(objects), 15), (json!(numbers), 60)] {
            let text = serde_json::to_vec(&v).unwrap();
            let est = Document::parse(&text).unwrap().tree_bytes();
            assert!(
                est >= at_least * text.len(),
                "{est} < {at_least} x {}",
                text.len()
            );
        }
    }
}
