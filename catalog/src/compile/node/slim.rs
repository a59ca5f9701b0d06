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
//! A shared expansion below the top-level arguments is not walked per
//! tool: its descriptions are listed once, in cut order, and what a tool
//! cuts of it is always a prefix of that list (the cut order is the same
//! wherever it is embedded). So a cut copy is made, and rendered, once per
//! (expansion, descriptions cut, root title dropped) and shared by every
//! tool that cuts it so ([`Cuts`]).
//!
//! `refs: defs` still goes through `Value` (it rewrites the structure).
//!
//! Size: over 600 lines because this is one algorithm, two walks over the
//! same tree (find what goes, then cut), which share their bookkeeping.

use std::collections::HashMap;
use std::rc::Rc;

use super::{Node, Object, Shared};
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
    /// A shared expansion at a nested depth, not walked: its descriptions
    /// come from its [`Info`], and `cut` of them go (the first in its cut
    /// order).
    expansion: bool,
    cut: usize,
}

/// What a shared expansion holds, wherever it is embedded at a nested
/// depth (where every description in it counts and every `examples` is
/// nested): computed once per expansion, so a tool whose schemas need no
/// cut costs one walk of its own nodes, not of every expansion it embeds.
#[derive(Debug, Clone, Copy, Default)]
pub(in crate::compile) struct Summary {
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

type Fast = foldhash::fast::RandomState;

/// Shared expansions as the cuts left them, for one compile: one copy per
/// expansion and distinct cut, so the tools that cut an expansion the
/// same way share the copy and its rendered text instead of each copying
/// and rendering it again.
#[derive(Default)]
pub(in crate::compile) struct Cuts<'d> {
    by_expansion: HashMap<*const Shared<'d>, Expansion<'d>, Fast>,
}

struct Expansion<'d> {
    /// Held so that the address stays this expansion's.
    _shared: Rc<Shared<'d>>,
    info: Option<Rc<Info>>,
    /// Cut copies of an expansion embedded above the nested depth, by
    /// [`cut_key`].
    by_scan: HashMap<Vec<u32>, Node<'d>, Fast>,
    /// Cut copies of an expansion embedded at a nested depth (where the
    /// cut is context-free but for the descriptions and the root's title),
    /// by (descriptions cut, root title dropped).
    by_count: HashMap<(usize, bool), Node<'d>, Fast>,
}

/// The descriptions of a shared expansion, read at a nested depth.
struct Info {
    /// (depth below the root, bytes, object number) of each, sorted as
    /// the cuts take them: deepest, longest, last first. Wherever the
    /// expansion is embedded, what a tool cuts of it is a prefix of this.
    descriptions: Vec<(usize, u64, usize)>,
    /// Objects it holds, numbered in walk order from 0 (the root).
    objects: usize,
}

impl<'d> Cuts<'d> {
    fn expansion(&mut self, sh: &Rc<Shared<'d>>) -> &mut Expansion<'d> {
        self.by_expansion
            .entry(Rc::as_ptr(sh))
            .or_insert_with(|| Expansion {
                _shared: sh.clone(),
                info: None,
                by_scan: HashMap::default(),
                by_count: HashMap::default(),
            })
    }

    fn info(&mut self, sh: &Rc<Shared<'d>>) -> Rc<Info> {
        if let Some(info) = &self.expansion(sh).info {
            return info.clone();
        }
        let mut descriptions = Vec::new();
        let mut objects = 0;
        self.number(sh.node(), 0, &mut descriptions, &mut objects);
        descriptions.sort_by(|a, b| b.0.cmp(&a.0).then(b.1.cmp(&a.1)).then(b.2.cmp(&a.2)));
        let info = Rc::new(Info {
            descriptions,
            objects,
        });
        self.expansion(sh).info = Some(info.clone());
        info
    }

    /// Numbers the objects of `node` from `*next` in walk order (as the
    /// scan and `cut_inside` meet them), recording descriptions.
    fn number(
        &mut self,
        node: &Node<'d>,
        depth: usize,
        out: &mut Vec<(usize, u64, usize)>,
        next: &mut usize,
    ) {
        if let Node::Shared(inner) = node {
            let info = self.info(inner);
            out.extend(
                info.descriptions
                    .iter()
                    .map(|&(d, b, o)| (d + depth, b, o + *next)),
            );
            *next += info.objects;
            return;
        }
        let Node::Object(map) = node else { return };
        let at = *next;
        *next += 1;
        if let Some(bytes) = description_bytes(map) {
            out.push((depth, bytes, at));
        }
        // The tally has turned away trees the walks do not edit.
        let _ = children(map, |child, _| {
            self.number(child, depth + 1, out, next);
            Ok(())
        });
    }

    /// `sh` embedded at a nested depth with its first `cut` descriptions
    /// (in its cut order) cut, and the nested examples and title copies as
    /// the options say; the root's title goes with `drop_title`.
    fn variant(
        &mut self,
        sh: &Rc<Shared<'d>>,
        cut: usize,
        drop_title: bool,
        options: &SchemaOptions,
    ) -> Node<'d> {
        if let Some(v) = self.expansion(sh).by_count.get(&(cut, drop_title)) {
            return v.clone();
        }
        let info = self.info(sh);
        let mut gone: Vec<usize> = info.descriptions[..cut].iter().map(|d| d.2).collect();
        gone.sort_unstable();
        let mut node = Node::Shared(sh.clone());
        let mut next = 0;
        self.cut_inside(&mut node, None, Some(drop_title), &gone, &mut next, options);
        let node = node.share();
        self.expansion(sh)
            .by_count
            .insert((cut, drop_title), node.clone());
        node
    }

    /// Edits a copy of an expansion (`root_title` given at its root):
    /// objects numbered from `*next` whose number is in `gone` lose their
    /// description.
    fn cut_inside(
        &mut self,
        node: &mut Node<'d>,
        name: Option<&str>,
        root_title: Option<bool>,
        gone: &[usize],
        next: &mut usize,
        options: &SchemaOptions,
    ) {
        if let (Node::Shared(inner), None) = (&*node, root_title) {
            let inner = inner.clone();
            let info = self.info(&inner);
            let from = *next;
            *next += info.objects;
            let cut = gone.partition_point(|&o| o < *next) - gone.partition_point(|&o| o < from);
            let s = summary(&inner);
            let drop_title = !options.title_copies
                && inner
                    .node()
                    .as_object()
                    .is_some_and(|m| title_copy(m, name));
            let inside = (s.examples && !options.nested_examples)
                || (s.title_copies && !options.title_copies);
            if cut > 0 || inside || drop_title {
                *node = self.variant(&inner, cut, drop_title, options);
            }
            return;
        }
        if !matches!(node.resolved(), Node::Object(_)) {
            return;
        }
        let at = *next;
        *next += 1;
        let Some(map) = node.object_mut() else { return };
        if !options.nested_examples {
            map.shift_remove("examples");
        }
        let drop_title = match root_title {
            Some(t) => t,
            None => !options.title_copies && title_copy(map, name),
        };
        if drop_title {
            map.shift_remove("title");
        }
        if gone.binary_search(&at).is_ok() {
            map.shift_remove("description");
        }
        for (key, v) in map.iter_mut() {
            match (holds(key), v) {
                (Some(Holds::One | Holds::List), Node::Array(list)) => list
                    .iter_mut()
                    .for_each(|s| self.cut_inside(s, None, None, gone, next, options)),
                (Some(Holds::One), s) => self.cut_inside(s, None, None, gone, next, options),
                (Some(Holds::Named), Node::Object(named)) => {
                    let props = key == "properties";
                    for (n, s) in named.iter_mut() {
                        let n = props.then_some(n.as_ref());
                        self.cut_inside(s, n, None, gone, next, options);
                    }
                }
                _ => {}
            }
        }
    }
}

/// The tree holds a schema the walk does not edit (a sub-schema kept as a
/// plain JSON value, or a shared list of schemas): the caller slims a
/// `Value` instead.
pub(in crate::compile) struct Unsupported;

/// Cuts `node` in place as [`crate::slim::slim`] would (`refs: inline`).
pub(in crate::compile) fn slim_in_place<'d>(
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
        order: 0,
        cuts,
    };
    scan.walk(node, 0, None, None)?;
    let Scan {
        mut objs,
        mut descriptions,
        cuts,
        ..
    } = scan;
    let mut total: u64 = descriptions.iter().map(|d| d.1).sum();
    if cut_descriptions && total > budget {
        // As `slim::cut_descriptions`: deepest, longest, last first.
        descriptions.sort_unstable_by(|a, b| b.0.cmp(&a.0).then(b.1.cmp(&a.1)).then(b.2.cmp(&a.2)));
        for (_, bytes, _, at) in descriptions {
            if total <= budget {
                break;
            }
            total -= bytes;
            if objs[at].expansion {
                objs[at].cut += 1;
            } else {
                objs[at].drop_description = true;
            }
            mark(&mut objs, at);
        }
    }
    if objs.first().is_some_and(|o| o.changes) {
        let mut next = 0;
        apply(node, &objs, &mut next, cuts, options);
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

struct Scan<'o, 'd> {
    nested: usize,
    options: &'o SchemaOptions,
    /// Whether descriptions are over the budget: else only examples and
    /// titles go, and an expansion without them is skipped whole.
    cut_descriptions: bool,
    objs: Vec<Obj>,
    /// (depth, bytes, number, entry in `objs`) of every nested
    /// description; numbers follow the walk order, an expansion's objects
    /// counted in it.
    descriptions: Vec<(usize, u64, usize, usize)>,
    order: usize,
    cuts: &'o mut Cuts<'d>,
}

impl<'d> Scan<'_, 'd> {
    fn walk(
        &mut self,
        node: &Node<'d>,
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
            // Descriptions cut in it mark it once chosen.
            let inside = (s.examples && !self.options.nested_examples)
                || (s.title_copies && !self.options.title_copies);
            let root_title = !self.options.title_copies && title_copy(map, name);
            // One entry for the whole expansion: `apply` skips it, or
            // takes a cut copy of it.
            self.objs.push(Obj {
                end: at + 1,
                parent,
                changes: false,
                drop_examples: false,
                drop_title: root_title,
                drop_description: false,
                expansion: true,
                cut: 0,
            });
            if inside || root_title {
                mark(&mut self.objs, at);
            }
            if let (true, Node::Shared(rc)) = (self.cut_descriptions, node) {
                let info = self.cuts.info(rc);
                let base = self.order;
                self.descriptions.extend(
                    info.descriptions
                        .iter()
                        .map(|&(d, b, o)| (d + depth, b, o + base, at)),
                );
                self.order += info.objects;
            } else {
                self.order += 1;
            }
            return Ok(());
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
            expansion: false,
            cut: 0,
        });
        let number = self.order;
        self.order += 1;
        if drop_examples || drop_title {
            mark(&mut self.objs, at);
        }
        if nested {
            if let Some(Node::Leaf(d)) = map.get("description").map(Node::resolved) {
                if d.is_string() {
                    self.descriptions
                        .push((depth, entry_len("description", d), number, at));
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
fn apply<'d>(
    node: &mut Node<'d>,
    objs: &[Obj],
    next: &mut usize,
    cuts: &mut Cuts<'d>,
    options: &SchemaOptions,
) {
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
        edit(node, o, objs, next, cuts, options);
        return;
    };
    let sh = sh.clone();
    if o.expansion {
        *next = o.end;
        *node = cuts.variant(&sh, o.cut, o.drop_title, options);
        return;
    }
    let key = cut_key(&objs[at..o.end], at);
    if let Some(cut) = cuts.expansion(&sh).by_scan.get(&key) {
        *node = cut.clone();
        *next = o.end;
        return;
    }
    edit(node, o, objs, next, cuts, options);
    let cut = std::mem::take(node).share();
    cuts.expansion(&sh).by_scan.insert(key, cut.clone());
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
                | u32::from(o.drop_description) << 3
                | u32::from(o.expansion) << 4;
            // The entries are the objects of one schema, far fewer than
            // 2^32.
            [(o.end - at) as u32, flags, o.cut as u32]
        })
        .collect()
}

/// [`apply`] on one object that changes: its own cuts, then its
/// children's.
fn edit<'d>(
    node: &mut Node<'d>,
    o: &Obj,
    objs: &[Obj],
    next: &mut usize,
    cuts: &mut Cuts<'d>,
    options: &SchemaOptions,
) {
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
            (Some(Holds::One | Holds::List), Node::Array(list)) => list
                .iter_mut()
                .for_each(|s| apply(s, objs, next, cuts, options)),
            (Some(Holds::One), s) => apply(s, objs, next, cuts, options),
            (Some(Holds::Named), Node::Object(named)) => named
                .values_mut()
                .for_each(|s| apply(s, objs, next, cuts, options)),
            _ => {}
        }
    }
    debug_assert_eq!(*next, o.end);
}
