//! [`crate::slim`]'s cuts made on the converter's tree, in place.
//!
//! NB: why not on a `Value`. A tool's schema embeds shared expansions
//! (ADR 0006); turning it into a `Value` to cut it copies every one of
//! them and loses their cached text, which tripled compile times. Here a
//! first walk finds what goes (the same decisions as [`crate::slim::slim`],
//! in the same order), and a second one edits only the objects on the way
//! to a change: a shared expansion is copied only where something inside
//! it goes, and everything else keeps its rendered text.
//!
//! `refs: defs` still goes through `Value` (it rewrites the structure).

use super::node::Node;
use crate::options::SchemaOptions;
use crate::slim::{entry_len, holds, title_repeats_name, Holds, Listed};

/// What the first walk learnt about one object of the tree (in walk
/// order).
struct Obj {
    /// Index after the object's subtree.
    end: usize,
    parent: Option<usize>,
    /// Something in the subtree (the object included) goes.
    changes: bool,
    drop_examples: bool,
    drop_title: bool,
    drop_description: bool,
}

/// The tree holds a schema the walk does not edit (a sub-schema kept as a
/// plain JSON value, or a shared list of schemas): the caller slims a
/// `Value` instead.
pub(super) struct Unsupported;

/// Cuts `node` in place as [`crate::slim::slim`] would (`refs: inline`).
pub(super) fn slim_in_place(
    node: &mut Node<'_>,
    listed: Listed,
    options: &SchemaOptions,
) -> Result<(), Unsupported> {
    let mut scan = Scan {
        nested: listed.nested_from(),
        options,
        objs: Vec::new(),
        descriptions: Vec::new(),
    };
    scan.walk(node, 0, None, None)?;
    let Scan {
        mut objs,
        mut descriptions,
        ..
    } = scan;
    let budget = options.description_budget as u64;
    let mut total: u64 = descriptions.iter().map(|d| d.1).sum();
    if budget > 0 && total > budget {
        // As `slim::cut_descriptions`: deepest, longest, last first.
        descriptions.sort_by(|a, b| b.0.cmp(&a.0).then(b.1.cmp(&a.1)).then(b.2.cmp(&a.2)));
        for (_, bytes, at) in descriptions {
            if total <= budget {
                break;
            }
            total -= bytes;
            objs[at].drop_description = true;
            mark(&mut objs, at);
        }
    }
    if objs.first().is_some_and(|o| o.changes) {
        let mut next = 0;
        apply(node, &objs, &mut next);
    }
    Ok(())
}

/// Marks `at` and its ancestors as changing (the ancestors of a changing
/// object are all marked already).
fn mark(objs: &mut [Obj], at: usize) {
    let mut cur = Some(at);
    while let Some(i) = cur {
        if objs[i].changes {
            return;
        }
        objs[i].changes = true;
        cur = objs[i].parent;
    }
}

struct Scan<'o> {
    nested: usize,
    options: &'o SchemaOptions,
    objs: Vec<Obj>,
    /// (depth, bytes, object) of every nested description.
    descriptions: Vec<(usize, u64, usize)>,
}

impl Scan<'_> {
    fn walk(
        &mut self,
        node: &Node<'_>,
        depth: usize,
        name: Option<&str>,
        parent: Option<usize>,
    ) -> Result<(), Unsupported> {
        let map = match node.resolved() {
            Node::Object(m) => m,
            Node::Leaf(v) if v.is_boolean() => return Ok(()),
            _ => return Err(Unsupported),
        };
        let at = self.objs.len();
        let nested = depth >= self.nested;
        let drop_examples = nested && !self.options.nested_examples && map.contains_key("examples");
        let drop_title = !self.options.title_copies
            && match (map.get("title").and_then(Node::as_str), name) {
                (Some(t), Some(n)) => title_repeats_name(t, n),
                _ => false,
            };
        self.objs.push(Obj {
            end: at + 1,
            parent,
            changes: false,
            drop_examples,
            drop_title,
            drop_description: false,
        });
        if drop_examples || drop_title {
            mark(&mut self.objs, at);
        }
        if nested {
            if let Some(Node::Leaf(d)) = map.get("description").map(Node::resolved) {
                if d.is_string() {
                    self.descriptions
                        .push((depth, entry_len("description", d), at));
                }
            }
        }
        for (key, v) in map {
            match holds(key) {
                None => {}
                Some(kind) => match (kind, v) {
                    (Holds::One | Holds::List, Node::Array(list)) => {
                        for s in list {
                            self.walk(s, depth + 1, None, Some(at))?;
                        }
                    }
                    (Holds::One, s) => self.walk(s, depth + 1, None, Some(at))?,
                    (Holds::Named, Node::Object(named)) => {
                        let props = key == "properties";
                        for (n, s) in named {
                            self.walk(s, depth + 1, props.then_some(n.as_ref()), Some(at))?;
                        }
                    }
                    _ => return Err(Unsupported),
                },
            }
        }
        self.objs[at].end = self.objs.len();
        Ok(())
    }
}

/// Edits the objects the scan marked, in the scan's order; an unchanged
/// subtree is skipped whole (and stays shared).
fn apply(node: &mut Node<'_>, objs: &[Obj], next: &mut usize) {
    let at = *next;
    let Some(o) = objs.get(at) else { return };
    if !matches!(node.resolved(), Node::Object(_)) {
        return;
    }
    if !o.changes {
        *next = o.end;
        return;
    }
    *next += 1;
    let Some(map) = node.object_mut() else { return };
    if o.drop_examples {
        map.shift_remove("examples");
    }
    if o.drop_title {
        map.shift_remove("title");
    }
    if o.drop_description {
        map.shift_remove("description");
    }
    for (key, v) in map.iter_mut() {
        match (holds(key), v) {
            (Some(Holds::One | Holds::List), Node::Array(list)) => {
                list.iter_mut().for_each(|s| apply(s, objs, next))
            }
            (Some(Holds::One), s) => apply(s, objs, next),
            (Some(Holds::Named), Node::Object(named)) => {
                named.values_mut().for_each(|s| apply(s, objs, next))
            }
            _ => {}
        }
    }
    debug_assert_eq!(*next, o.end);
}
