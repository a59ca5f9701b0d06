//! The JSON Schema 2020-12 meta-schema check, run on the [`Node`] tree in
//! place through jsonschema's foreign-representation API ([`Json`]).
//!
//! A shared expansion reads as the schema `true` here and is checked once on
//! its own ([`Node::meta_valid`]): the meta-schema judges every subschema by
//! itself, so the verdicts compose. Reading the tree in place rather than
//! converting it to a `serde_json::Value` first halves the cost of the check.

use std::borrow::Cow;

use jsonschema::json::{Array, Json, Node as JsonNode, NodeIdentity, Object as JsonObject};
use jsonschema::JsonType;
use serde_json::{Map, Number, Value};

use super::{Node, Object};

/// Whether `node` (shared expansions read as `true`) is valid under the
/// 2020-12 meta-schema (or the draft its `$schema` names).
pub fn is_valid(node: &Node<'_>) -> bool {
    // Err: a `$schema` naming a meta-schema that cannot be resolved.
    jsonschema::meta::is_valid_for::<Tree>(view(node)).unwrap_or(false)
}

/// The representation marker.
pub struct Tree;

#[derive(Clone, Copy)]
pub enum View<'a> {
    Node(&'a Node<'a>),
    Value(&'a Value),
    /// A shared expansion, checked on its own.
    Shared(&'a Node<'a>),
}

fn view<'a>(n: &'a Node<'a>) -> View<'a> {
    match n {
        Node::Leaf(v) => View::Value(v.as_ref()),
        Node::Shared(_) => View::Shared(n),
        _ => View::Node(n),
    }
}

impl Json for Tree {
    type Node<'a> = View<'a>;
    type PreparedKey = String;
    type StringBuffer = ();
    const ACYCLIC: bool = true;

    fn prepare_key(key: &str) -> String {
        key.to_owned()
    }

    fn with_string_node<T>((): &mut (), string: &str, f: impl FnOnce(View<'_>) -> T) -> T {
        let node = Value::String(string.to_owned());
        f(View::Value(&node))
    }
}

impl<'a> JsonNode<'a, Tree> for View<'a> {
    type Object = ObjectView<'a>;
    type Array = ArrayView<'a>;
    type Number = &'a Number;

    fn as_object(&self) -> Option<ObjectView<'a>> {
        match *self {
            View::Node(Node::Object(m)) => Some(ObjectView::Tree(m)),
            View::Value(Value::Object(m)) => Some(ObjectView::Value(m)),
            _ => None,
        }
    }

    fn as_array(&self) -> Option<ArrayView<'a>> {
        match *self {
            View::Node(Node::Array(a)) => Some(ArrayView::Tree(a)),
            View::Value(Value::Array(a)) => Some(ArrayView::Value(a)),
            _ => None,
        }
    }

    fn as_string(&self) -> Option<Cow<'a, str>> {
        match *self {
            View::Value(Value::String(s)) => Some(Cow::Borrowed(s)),
            _ => None,
        }
    }

    fn as_number(&self) -> Option<&'a Number> {
        match *self {
            View::Value(Value::Number(n)) => Some(n),
            _ => None,
        }
    }

    fn as_boolean(&self) -> Option<bool> {
        match *self {
            View::Value(Value::Bool(b)) => Some(*b),
            View::Shared(_) => Some(true),
            _ => None,
        }
    }

    fn is_null(&self) -> bool {
        matches!(self, View::Value(Value::Null))
    }

    fn json_type(&self) -> JsonType {
        match *self {
            View::Value(Value::Null) => JsonType::Null,
            View::Value(Value::Bool(_)) | View::Shared(_) => JsonType::Boolean,
            View::Value(Value::Number(_)) => JsonType::Number,
            View::Value(Value::String(_)) => JsonType::String,
            View::Value(Value::Array(_)) | View::Node(Node::Array(_)) => JsonType::Array,
            View::Value(Value::Object(_)) | View::Node(_) => JsonType::Object,
        }
    }

    /// Cold paths only (errors, `enum`/`const`/`uniqueItems`).
    fn to_value(&self) -> Cow<'a, Value> {
        match *self {
            View::Value(v) => Cow::Borrowed(v),
            View::Shared(_) => Cow::Owned(Value::Bool(true)),
            View::Node(n) => Cow::Owned(skeleton(n)),
        }
    }

    fn identity(&self) -> Option<NodeIdentity> {
        Some(match *self {
            View::Node(n) => NodeIdentity::tagged(std::ptr::from_ref(n) as usize, 0),
            View::Value(v) => NodeIdentity::tagged(std::ptr::from_ref(v) as usize, 1),
            View::Shared(n) => NodeIdentity::tagged(std::ptr::from_ref(n) as usize, 2),
        })
    }
}

/// The tree as a value, shared expansions as `true`.
fn skeleton(n: &Node<'_>) -> Value {
    match n {
        Node::Leaf(v) => v.as_ref().clone(),
        Node::Object(m) => Value::Object(
            m.iter()
                .map(|(k, v)| (k.to_string(), skeleton(v)))
                .collect::<Map<_, _>>(),
        ),
        Node::Array(a) => Value::Array(a.iter().map(skeleton).collect()),
        Node::Shared(_) => Value::Bool(true),
    }
}

#[derive(Clone, Copy)]
pub enum ObjectView<'a> {
    Tree(&'a Object<'a>),
    Value(&'a Map<String, Value>),
}

pub enum Members<'a> {
    Tree(indexmap::map::Iter<'a, Cow<'a, str>, Node<'a>>),
    Value(serde_json::map::Iter<'a>),
}

impl<'a> Iterator for Members<'a> {
    type Item = (&'a str, View<'a>);

    fn next(&mut self) -> Option<Self::Item> {
        match self {
            Members::Tree(it) => it.next().map(|(k, v)| (k.as_ref(), view(v))),
            Members::Value(it) => it.next().map(|(k, v)| (k.as_str(), View::Value(v))),
        }
    }
}

impl<'a> JsonObject<'a, Tree> for ObjectView<'a> {
    type Node = View<'a>;
    type MemberName = &'a str;
    type MembersIter = Members<'a>;

    fn len(&self) -> usize {
        match self {
            ObjectView::Tree(m) => m.len(),
            ObjectView::Value(m) => m.len(),
        }
    }

    fn get(&self, key: &String) -> Option<View<'a>> {
        match *self {
            ObjectView::Tree(m) => m.get(key.as_str()).map(view),
            ObjectView::Value(m) => m.get(key).map(View::Value),
        }
    }

    fn members(&self) -> Members<'a> {
        match *self {
            ObjectView::Tree(m) => Members::Tree(m.iter()),
            ObjectView::Value(m) => Members::Value(m.iter()),
        }
    }
}

#[derive(Clone, Copy)]
pub enum ArrayView<'a> {
    Tree(&'a [Node<'a>]),
    Value(&'a [Value]),
}

pub enum Elements<'a> {
    Tree(std::slice::Iter<'a, Node<'a>>),
    Value(std::slice::Iter<'a, Value>),
}

impl<'a> Iterator for Elements<'a> {
    type Item = View<'a>;

    fn next(&mut self) -> Option<View<'a>> {
        match self {
            Elements::Tree(it) => it.next().map(view),
            Elements::Value(it) => it.next().map(View::Value),
        }
    }
}

impl<'a> Array<'a, Tree> for ArrayView<'a> {
    type Node = View<'a>;
    type ElementsIter = Elements<'a>;

    fn len(&self) -> usize {
        match self {
            ArrayView::Tree(a) => a.len(),
            ArrayView::Value(a) => a.len(),
        }
    }

    fn elements(&self) -> Elements<'a> {
        match *self {
            ArrayView::Tree(a) => Elements::Tree(a.iter()),
            ArrayView::Value(a) => Elements::Value(a.iter()),
        }
    }
}
