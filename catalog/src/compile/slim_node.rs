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

use std::collections::HashMap;
use std::rc::Rc;

use super::node::{Node, Object, Shared};
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

/// What a shared expansion holds, wherever it is embedded at a nested
/// depth (where every description in it counts and every `examples` is
/// nested): computed once per expansion, so a tool whose schemas need no
/// cut costs one walk of its own nodes, not of every expansion it embeds.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Summary {
    description_bytes: u64,
    examples: bool,
    /// A `title` repeating its property's name, below the root.
    title_copies: bool,
    unsupported: bool,
}

impl Summary {
    fn add(&mut self, o: Summary) {
        self.description_bytes += o.description_bytes;
        self.examples |= o.examples;
        self.title_copies |= o.title_copies;
        self.unsupported |= o.unsupported;
    }
}

fn summary(sh: &Shared<'_>) -> Summary {
    *sh.slim.get_or_init(|| {
        let mut s = Summary::default();
        summarize(sh.node(), &mut s);
        s
    })
}

fn title_copy(map: &Object<'_>, name: Option<&str>) -> bool {
    match (map.get("title").and_then(Node::as_str), name) {
        (Some(t), Some(n)) => title_repeats_name(t, n),
        _ => false,
    }
}

fn description_bytes(map: &Object<'_>) -> Option<u64> {
    match map.get("description").map(Node::resolved) {
        Some(Node::Leaf(d)) if d.is_string() => Some(entry_len("description", d)),
        _ => None,
    }
}

/// Calls `f(child, property name)` for each sub-schema of `map`;
/// `Err` where one is held in a shape the walks do not edit.
fn children<'a, 'd>(
    map: &'a Object<'d>,
    mut f: impl FnMut(&'a Node<'d>, Option<&'a str>) -> Result<(), Unsupported>,
) -> Result<(), Unsupported> {
    for (key, v) in map {
        match holds(key) {
            None => {}
            Some(kind) => match (kind, v) {
                (Holds::One | Holds::List, Node::Array(list)) => {
                    for s in list {
                        f(s, None)?;
                    }
                }
                (Holds::One, s) => f(s, None)?,
                (Holds::Named, Node::Object(named)) => {
                    let props = key == "properties";
                    for (n, s) in named {
                        f(s, props.then_some(n.as_ref()))?;
                    }
                }
                _ => return Err(Unsupported),
            },
        }
    }
    Ok(())
}

/// Adds what `node` holds, read at a nested depth, to `s`.
fn summarize(node: &Node<'_>, s: &mut Summary) {
    if let Some(sh) = node.shared() {
        s.add(summary(sh));
        return;
    }
    let map = match node {
        Node::Object(m) => m,
        Node::Leaf(v) if v.is_boolean() => return,
        _ => {
            s.unsupported = true;
            return;
        }
    };
    s.description_bytes += description_bytes(map).unwrap_or(0);
    s.examples |= map.contains_key("examples");
    let r = children(map, |child, name| {
        if let Some(m) = child.as_object() {
            s.title_copies |= title_copy(m, name);
        }
        summarize(child, s);
        Ok(())
    });
    s.unsupported |= r.is_err();
}

/// Shared expansions as the cuts left them, for one compile: one copy per
/// expansion and distinct cut, so the tools that cut an expansion the
/// same way (at the same depth, under the same budget) share the copy and
/// its rendered text instead of each copying and rendering it again.
#[derive(Default)]
pub(super) struct Cuts<'d> {
    /// By expansion (its `Rc`, held so the address stays its own), then by
    /// [`cut_key`].
    by_expansion: HashMap<*const Shared<'d>, Variants<'d>, foldhash::fast::RandomState>,
}

type Variants<'d> = (
    Rc<Shared<'d>>,
    HashMap<Vec<u32>, Node<'d>, foldhash::fast::RandomState>,
);

/// The tree holds a schema the walk does not edit (a sub-schema kept as a
/// plain JSON value, or a shared list of schemas): the caller slims a
/// `Value` instead.
pub(super) struct Unsupported;

/// Cuts `node` in place as [`crate::slim::slim`] would (`refs: inline`).
pub(super) fn slim_in_place<'d>(
    node: &mut Node<'d>,
    listed: Listed,
    options: &SchemaOptions,
    cuts: &mut Cuts<'d>,
) -> Result<(), Unsupported> {
    let nested = listed.nested_from();
    // First the totals, from the expansions' summaries: most tools need
    // no cut at all.
    let mut totals = Summary::default();
    tally(node, 0, None, nested, &mut totals);
    if totals.unsupported {
        return Err(Unsupported);
    }
    let budget = options.description_budget as u64;
    let cut_descriptions = budget > 0 && totals.description_bytes > budget;
    let drops_examples = totals.examples && !options.nested_examples;
    let drops_titles = totals.title_copies && !options.title_copies;
    if !(cut_descriptions || drops_examples || drops_titles) {
        return Ok(());
    }
    let mut scan = Scan {
        nested,
        options,
        cut_descriptions,
        objs: Vec::new(),
        descriptions: Vec::new(),
    };
    scan.walk(node, 0, None, None)?;
    let Scan {
        mut objs,
        mut descriptions,
        ..
    } = scan;
    let mut total: u64 = descriptions.iter().map(|d| d.1).sum();
    if cut_descriptions && total > budget {
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
        apply(node, &objs, &mut next, cuts);
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

/// Adds to `s` what `node` at `depth` holds that the cuts look at:
/// nested descriptions, nested examples, title copies.
fn tally(node: &Node<'_>, depth: usize, name: Option<&str>, nested: usize, s: &mut Summary) {
    if let Some(m) = node.as_object() {
        s.title_copies |= title_copy(m, name);
    }
    if depth >= nested {
        summarize(node, s);
        return;
    }
    let map = match node.resolved() {
        Node::Object(m) => m,
        Node::Leaf(v) if v.is_boolean() => return,
        _ => {
            s.unsupported = true;
            return;
        }
    };
    let r = children(map, |child, name| {
        tally(child, depth + 1, name, nested, s);
        Ok(())
    });
    s.unsupported |= r.is_err();
}

struct Scan<'o> {
    nested: usize,
    options: &'o SchemaOptions,
    /// Whether descriptions are over the budget: else only examples and
    /// titles go, and an expansion without them is skipped whole.
    cut_descriptions: bool,
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
        if let Some(sh) = node.shared().filter(|_| nested) {
            let s = summary(sh);
            let inside = (s.examples && !self.options.nested_examples)
                || (s.title_copies && !self.options.title_copies)
                || (self.cut_descriptions && s.description_bytes > 0);
            let root_title = !self.options.title_copies && title_copy(map, name);
            if !inside && !root_title {
                // One entry for the whole expansion: `apply` skips it.
                self.objs.push(Obj {
                    end: at + 1,
                    parent,
                    changes: false,
                    drop_examples: false,
                    drop_title: false,
                    drop_description: false,
                });
                return Ok(());
            }
        }
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
        children(map, |child, name| {
            self.walk(child, depth + 1, name, Some(at))
        })?;
        self.objs[at].end = self.objs.len();
        Ok(())
    }
}

/// Edits the objects the scan marked, in the scan's order; an unchanged
/// subtree is skipped whole (and stays shared).
fn apply<'d>(node: &mut Node<'d>, objs: &[Obj], next: &mut usize, cuts: &mut Cuts<'d>) {
    let at = *next;
    let Some(o) = objs.get(at) else { return };
    if !matches!(node.resolved(), Node::Object(_)) {
        return;
    }
    if !o.changes {
        *next = o.end;
        return;
    }
    let Node::Shared(sh) = node else {
        edit(node, o, objs, next, cuts);
        return;
    };
    let key = cut_key(&objs[at..o.end], at);
    let (_, variants) = cuts
        .by_expansion
        .entry(Rc::as_ptr(sh))
        .or_insert_with(|| (sh.clone(), HashMap::default()));
    if let Some(cut) = variants.get(&key) {
        *node = cut.clone();
        *next = o.end;
        return;
    }
    let original = Rc::as_ptr(sh);
    edit(node, o, objs, next, cuts);
    let cut = std::mem::take(node).share();
    if let Some((_, variants)) = cuts.by_expansion.get_mut(&original) {
        variants.insert(key, cut.clone());
    }
    *node = cut;
}

/// Identifies what [`apply`] does to a subtree: the scan's entries for
/// it, positions relative to its first.
fn cut_key(objs: &[Obj], at: usize) -> Vec<u32> {
    objs.iter()
        .flat_map(|o| {
            let flags = u32::from(o.changes)
                | u32::from(o.drop_examples) << 1
                | u32::from(o.drop_title) << 2
                | u32::from(o.drop_description) << 3;
            // The entries are the objects of one schema, far fewer than
            // 2^32.
            [(o.end - at) as u32, flags]
        })
        .collect()
}

/// [`apply`] on one object that changes: its own cuts, then its
/// children's.
fn edit<'d>(node: &mut Node<'d>, o: &Obj, objs: &[Obj], next: &mut usize, cuts: &mut Cuts<'d>) {
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
                list.iter_mut().for_each(|s| apply(s, objs, next, cuts))
            }
            (Some(Holds::One), s) => apply(s, objs, next, cuts),
            (Some(Holds::Named), Node::Object(named)) => {
                named.values_mut().for_each(|s| apply(s, objs, next, cuts))
            }
            _ => {}
        }
    }
    debug_assert_eq!(*next, o.end);
}
