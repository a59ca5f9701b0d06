//! The converter's schema tree: JSON in which `$ref` expansions are shared.
//!
//! NB: why not `serde_json::Value`. Real APIs inline the same components
//! into hundreds of tools (Discord: 1.2 MB of OpenAPI becomes 3.6 MB of
//! compact tool schemas). As `Value`s, every inlining was a deep copy to
//! allocate, meta-check, serialise, hash and free again: two thirds of the
//! compile time. Here a memoised expansion is built once and shared
//! ([`Node::Shared`]); its compact JSON text and its meta-schema verdict are
//! computed once, and every tool that embeds it copies bytes.
//!
//! The tree only lives during one compile (hence `Rc`), and borrows keys
//! and keyword values from the source document (`'d`) instead of copying
//! them; tools leave the compiler as [`crate::model::Schema`] text.

mod meta;
pub(super) mod slim;

use std::borrow::Cow;
use std::cell::OnceCell;
use std::collections::HashSet;
use std::rc::Rc;

use indexmap::IndexMap;
use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use crate::model::Schema;
use crate::slim::json_len;

/// Objects keep insertion order, as `serde_json`'s map does (the catalog's
/// key order, and so its hash, depend on it). foldhash rather than SipHash:
/// every node of every schema is an insert here, and foldhash still seeds
/// per process.
pub type Object<'d> = IndexMap<Cow<'d, str>, Node<'d>, foldhash::fast::RandomState>;

/// An empty object with room for `capacity` keys.
pub fn object<'d>(capacity: usize) -> Object<'d> {
    Object::with_capacity_and_hasher(capacity, Default::default())
}

#[derive(Debug, Clone)]
pub enum Node<'d> {
    /// A value taken as is: scalars, and keyword values that are not
    /// schemas (`enum`, `required`, `default`, `examples`, ...).
    Leaf(Cow<'d, Value>),
    Object(Object<'d>),
    Array(Vec<Node<'d>>),
    /// A memoised `$ref` expansion, embedded wherever the ref occurs.
    Shared(Rc<Shared<'d>>),
}

#[derive(Debug)]
pub struct Shared<'d> {
    node: Node<'d>,
    text: OnceCell<Box<RawValue>>,
    /// Length of `text`, known without rendering it.
    len: OnceCell<usize>,
    valid: OnceCell<bool>,
    /// What listed-schema cuts would find inside (`slim_node`).
    pub(super) slim: OnceCell<slim::Summary>,
}

impl<'d> Shared<'d> {
    pub(super) fn node(&self) -> &Node<'d> {
        &self.node
    }

    /// Compact JSON text, rendered on first use.
    fn raw(&self) -> &RawValue {
        self.text.get_or_init(|| render(&self.node))
    }

    fn text_len(&self) -> usize {
        match self.text.get() {
            Some(t) => t.get().len(),
            None => *self.len.get_or_init(|| self.node.text_len()),
        }
    }

    fn meta_valid(&self) -> bool {
        *self.valid.get_or_init(|| self.node.meta_valid())
    }
}

/// Length of a JSON string literal; the common case (nothing to escape)
/// without the serialiser, as this runs for every key and most leaves.
fn str_len(s: &str) -> usize {
    if s.bytes().any(|b| b < 0x20 || b == b'"' || b == b'\\') {
        json_len(s)
    } else {
        s.len() + 2
    }
}

fn value_len(v: &Value) -> usize {
    match v {
        Value::Null => 4,
        Value::Bool(true) => 4,
        Value::Bool(false) => 5,
        Value::String(s) => str_len(s),
        Value::Array(a) => 2 + a.iter().map(value_len).sum::<usize>() + a.len().saturating_sub(1),
        Value::Object(m) => {
            2 + m
                .iter()
                .map(|(k, v)| str_len(k) + 1 + value_len(v))
                .sum::<usize>()
                + m.len().saturating_sub(1)
        }
        Value::Number(_) => json_len(v),
    }
}

/// Serialising JSON values with string keys into a `String` cannot fail.
fn render<T: Serialize + ?Sized>(v: &T) -> Box<RawValue> {
    serde_json::value::to_raw_value(v).expect("JSON values with string keys always serialise")
}

impl Serialize for Node<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Node::Leaf(v) => v.serialize(s),
            Node::Object(m) => {
                let mut map = s.serialize_map(Some(m.len()))?;
                for (k, v) in m {
                    map.serialize_entry(k, v)?;
                }
                map.end()
            }
            Node::Array(a) => s.collect_seq(a),
            // Emitted verbatim by serde_json's serialisers: a byte copy.
            Node::Shared(sh) => sh.raw().serialize(s),
        }
    }
}

impl Default for Node<'_> {
    fn default() -> Self {
        Node::Object(object(0))
    }
}

impl From<Value> for Node<'_> {
    /// Objects become structure (so the compiler can edit them); everything
    /// else stays a leaf.
    fn from(v: Value) -> Self {
        match v {
            Value::Object(m) => Node::Object(
                m.into_iter()
                    .map(|(k, v)| (Cow::Owned(k), v.into()))
                    .collect(),
            ),
            v => Node::Leaf(Cow::Owned(v)),
        }
    }
}

impl<'d> Node<'d> {
    pub fn string(s: impl Into<String>) -> Self {
        Node::Leaf(Cow::Owned(Value::String(s.into())))
    }

    /// A leaf owned by the tree (made by the compiler).
    pub fn owned(v: Value) -> Self {
        Node::Leaf(Cow::Owned(v))
    }

    /// A leaf borrowed from the document.
    pub fn borrowed(v: &'d Value) -> Self {
        Node::Leaf(Cow::Borrowed(v))
    }

    /// Wraps the node for sharing (a no-op on an already shared one).
    pub fn share(self) -> Self {
        match self {
            Node::Shared(_) => self,
            node => Node::Shared(Rc::new(Shared {
                node,
                text: OnceCell::new(),
                len: OnceCell::new(),
                valid: OnceCell::new(),
                slim: OnceCell::new(),
            })),
        }
    }

    /// The shared part, if this is one.
    pub(super) fn shared(&self) -> Option<&Shared<'d>> {
        match self {
            Node::Shared(sh) => Some(sh),
            _ => None,
        }
    }

    /// The node behind any sharing.
    pub fn resolved(&self) -> &Node<'d> {
        let mut n = self;
        while let Node::Shared(sh) = n {
            n = &sh.node;
        }
        n
    }

    pub fn as_object(&self) -> Option<&Object<'d>> {
        match self.resolved() {
            Node::Object(m) => Some(m),
            _ => None,
        }
    }

    pub fn get(&self, key: &str) -> Option<&Node<'d>> {
        self.as_object()?.get(key)
    }

    pub fn as_str(&self) -> Option<&str> {
        match self.resolved() {
            Node::Leaf(v) => v.as_str(),
            _ => None,
        }
    }

    /// The object for editing; a shared object is copied first (one level:
    /// its children stay shared). `None` for non-objects.
    pub fn object_mut(&mut self) -> Option<&mut Object<'d>> {
        if let Node::Shared(sh) = self {
            match sh.node.resolved() {
                Node::Object(m) => *self = Node::Object(m.clone()),
                _ => return None,
            }
        }
        match self {
            Node::Object(m) => Some(m),
            _ => None,
        }
    }

    /// The object, owned (copied one level if shared).
    pub fn into_object(self) -> Option<Object<'d>> {
        match self {
            Node::Object(m) => Some(m),
            Node::Shared(sh) => match Rc::try_unwrap(sh) {
                Ok(sh) => sh.node.into_object(),
                Err(sh) => sh.node.resolved().as_object().cloned(),
            },
            _ => None,
        }
    }

    /// The full JSON value (a deep copy; for the rare paths that need one).
    pub fn to_value(&self) -> Value {
        match self {
            Node::Leaf(v) => v.clone().into_owned(),
            Node::Object(m) => Value::Object(
                m.iter()
                    .map(|(k, v)| (k.to_string(), v.to_value()))
                    .collect::<Map<_, _>>(),
            ),
            Node::Array(a) => Value::Array(a.iter().map(Node::to_value).collect()),
            Node::Shared(sh) => sh.node.to_value(),
        }
    }

    /// Whether the schema is valid under the JSON Schema 2020-12
    /// meta-schema. Checked piecewise: each shared expansion once (the
    /// verdict is cached), and the rest with shared parts read as `true`
    /// (see [`super::meta`]).
    pub fn meta_valid(&self) -> bool {
        match self {
            Node::Shared(sh) => sh.meta_valid(),
            n => meta::is_valid(n) && n.shared_parts_valid(),
        }
    }

    fn shared_parts_valid(&self) -> bool {
        match self {
            Node::Leaf(_) => true,
            Node::Object(m) => m.values().all(Node::shared_parts_valid),
            Node::Array(a) => a.iter().all(Node::shared_parts_valid),
            Node::Shared(sh) => sh.meta_valid(),
        }
    }

    /// Renders the shared parts' texts not rendered yet (each caches its
    /// own), without rendering the rest.
    pub fn render_shared(&self) {
        match self {
            Node::Leaf(_) => {}
            Node::Object(m) => m.values().for_each(Node::render_shared),
            Node::Array(a) => a.iter().for_each(Node::render_shared),
            Node::Shared(sh) => {
                sh.raw();
            }
        }
    }

    /// The compact JSON text, shared parts copied as bytes.
    pub fn to_schema(&self) -> Schema {
        Schema::from_raw(render(self))
    }

    /// Length of the text [`Node::to_schema`] makes, computed without
    /// rendering it: each shared part is measured once and then counts as
    /// a number, so a huge expansion embedded many times costs nothing to
    /// measure.
    pub fn text_len(&self) -> usize {
        self.measure(None)
    }

    /// [`Node::text_len`], and with `unrendered` also the bytes rendering
    /// would add to the shared parts' cached texts: those of shared parts
    /// not rendered yet (rendering one renders the ones inside it too),
    /// each counted once per `seen` set. One walk for both.
    pub fn measure(&self, mut unrendered: Option<&mut Unrendered<'d>>) -> usize {
        match self {
            Node::Leaf(v) => value_len(v),
            Node::Object(m) => {
                let mut n = 2 + m.len().saturating_sub(1);
                for (k, v) in m {
                    n += str_len(k) + 1 + v.measure(unrendered.as_deref_mut());
                }
                n
            }
            Node::Array(a) => {
                let mut n = 2 + a.len().saturating_sub(1);
                for v in a {
                    n += v.measure(unrendered.as_deref_mut());
                }
                n
            }
            Node::Shared(sh) => {
                let len = sh.text_len();
                if let Some(u) = unrendered {
                    if sh.text.get().is_none() && u.seen.insert(Rc::as_ptr(sh)) {
                        u.bytes += len;
                        // Only what is inside still matters here.
                        sh.node.measure(Some(u));
                    }
                }
                len
            }
        }
    }
}

/// Shared parts not rendered yet, met while measuring (see
/// [`Node::measure`]).
#[derive(Default)]
pub struct Unrendered<'d> {
    seen: HashSet<*const Shared<'d>>,
    pub bytes: usize,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn samples() -> Vec<Value> {
        vec![
            json!({}),
            json!({"type": ["string", "null"], "minLength": 1}),
            json!({"properties": {"a": true, "b": {"type": "integer", "minimum": 0}}, "required": ["a"]}),
            json!({"anyOf": [{"type": "string"}, false], "examples": [1, "x"], "$comment": "c"}),
            json!({"unknownKeyword": 5, "enum": [1, null]}),
            json!({"type": 5}),
            json!({"minLength": -1}),
            json!({"required": ["a", "a"]}),
            json!({"properties": {"a": {"type": "nope"}}}),
            json!({"prefixItems": [1]}),
            json!({"allOf": []}),
            json!({"dependentRequired": {"a": 5}}),
            json!({"enum": "x"}),
            json!({"items": {"items": {"pattern": 7}}}),
        ]
    }

    #[test]
    fn the_in_place_check_agrees_with_jsonschemas_own() {
        for v in samples() {
            let expected = jsonschema::draft202012::meta::is_valid(&v);
            assert_eq!(Node::from(v.clone()).meta_valid(), expected, "{v}");
        }
    }

    #[test]
    fn text_len_is_the_length_of_the_rendered_text() {
        let mut samples = samples();
        samples.push(json!({"k\"\\\u{1}é": "\n\u{7f}\u{2028}", "n": [1.5, -0.0, 1e300, null]}));
        for v in samples {
            let shared = Node::from(v.clone()).share();
            let mut root = object(3);
            root.insert("a".into(), shared.clone());
            root.insert(
                "b".into(),
                Node::Array(vec![shared.clone(), Node::from(v.clone())]),
            );
            root.insert("c\"".into(), Node::borrowed(&v));
            let root = Node::Object(root);
            let mut unrendered = Unrendered::default();
            let len = root.measure(Some(&mut unrendered));
            assert_eq!(unrendered.bytes, shared.text_len(), "{v}");
            let text = root.to_schema();
            assert_eq!(len, text.as_str().len(), "{v}");
            assert_eq!(root.text_len(), text.as_str().len(), "{v}");
            // Rendered now: nothing more to cache.
            let mut unrendered = Unrendered::default();
            root.measure(Some(&mut unrendered));
            assert_eq!(unrendered.bytes, 0);
            assert_eq!(root.text_len(), text.as_str().len(), "{v} after rendering");
        }
    }

    #[test]
    fn a_shared_part_is_judged_on_its_own_wherever_it_is_embedded() {
        for v in samples() {
            let expected = jsonschema::draft202012::meta::is_valid(&v);
            let shared = Node::from(v.clone()).share();
            let mut props = object(1);
            props.insert("p".into(), shared.clone());
            let mut root = object(2);
            root.insert("type".into(), Node::string("object"));
            root.insert("properties".into(), Node::Object(props));
            let root = Node::Object(root);
            assert_eq!(shared.meta_valid(), expected, "{v}");
            assert_eq!(root.meta_valid(), expected, "{v} embedded");
            assert!(
                !Node::Array(vec![shared]).meta_valid(),
                "an array is not a schema"
            );
            // What is listed is the whole text, shared parts included.
            let text = root.to_schema();
            assert_eq!(
                text.to_value(),
                json!({"type": "object", "properties": {"p": v}})
            );
        }
    }
}
