//! How much overlays may grow a document, charged before each change.

use serde_json::Value;

use super::tree::{node, pointer};
use super::Seg;

/// How large and deep overlays may make a document: `update` and `copy`
/// are measured before anything is merged or copied, so 40 actions that
/// each copy a node into itself (doubling it) fail at the action that
/// would pass the limit instead of allocating gigabytes.
///
/// - Size: an estimate of the document's memory (JSON values, keys,
///   strings) may grow to [`MAX_GROWTH_FACTOR`] times its size before the
///   overlays, and to at least [`MIN_GROWTH_HEADROOM`] more than it. Every
///   merged or copied value is charged once per target, as if nothing it
///   replaces were freed; removals are not credited. Not configurable.
/// - Depth: no action may nest containers deeper than
///   [`MAX_DOCUMENT_DEPTH`], the depth serde_json and yaml_serde parse.
///
/// Errors are [`OverlayErrorKind::TooLarge`] (condition reason
/// `OverlayInvalid`), naming the overlay and the action.
#[derive(Debug, Clone)]
pub struct DocumentBudget {
    size: usize,
    max_size: usize,
}

/// See [`DocumentBudget`].
pub const MAX_GROWTH_FACTOR: usize = 4;
/// See [`DocumentBudget`]: 16 MiB.
pub const MIN_GROWTH_HEADROOM: usize = 16 << 20;
/// See [`DocumentBudget`].
pub const MAX_DOCUMENT_DEPTH: usize = 128;

impl DocumentBudget {
    /// A budget for `doc` as it is before the overlays.
    pub fn for_document(doc: &Value) -> DocumentBudget {
        let size = measure(doc).size;
        DocumentBudget {
            size,
            max_size: size
                .saturating_mul(MAX_GROWTH_FACTOR)
                .max(size.saturating_add(MIN_GROWTH_HEADROOM)),
        }
    }

    /// Charges merging `value` into every target, or says why not.
    pub(super) fn charge(
        &mut self,
        doc: &Value,
        targets: &[Vec<Seg>],
        value: &Value,
        verb: &str,
    ) -> Result<(), String> {
        let m = measure(value);
        for path in targets {
            // An array target takes a non-array value as one more element.
            let element = matches!(node(doc, path), Some(Value::Array(_))) && !value.is_array();
            let depth = path.len() + m.depth + usize::from(element);
            if depth > MAX_DOCUMENT_DEPTH {
                return Err(format!(
                    "at {}: the {verb} would nest the document {depth} levels deep, over the \
                     limit of {MAX_DOCUMENT_DEPTH}",
                    pointer(path)
                ));
            }
        }
        let added = m.size.saturating_mul(targets.len());
        let size = self.size.saturating_add(added);
        if size > self.max_size {
            return Err(format!(
                "the {verb} of {} into {} target(s) would grow the document to about {} in \
                 memory, over the limit of {} ({MAX_GROWTH_FACTOR}× its size before the overlays, \
                 and at least {} more)",
                mib(m.size),
                targets.len(),
                mib(size),
                mib(self.max_size),
                mib(MIN_GROWTH_HEADROOM),
            ));
        }
        self.size = size;
        Ok(())
    }
}

fn mib(bytes: usize) -> String {
    format!("{:.1} MiB", bytes as f64 / f64::from(1u32 << 20))
}

struct Measure {
    /// Estimated bytes in memory.
    size: usize,
    /// Containers on the deepest path (0 for a primitive).
    depth: usize,
}

/// Estimates `v`'s memory: a `Value` slot per node, string and key bytes,
/// and an index map's per-entry overhead. Iterative: the value may be
/// deeper than the stack allows (callers may build any `Value`).
fn measure(v: &Value) -> Measure {
    const SLOT: usize = std::mem::size_of::<Value>();
    // Hash, key `String` and index slot of one map entry.
    const ENTRY: usize = 8 + std::mem::size_of::<String>() + 16;
    let mut out = Measure { size: 0, depth: 0 };
    let mut stack = vec![(v, 0usize)];
    while let Some((v, depth)) = stack.pop() {
        out.size = out.size.saturating_add(SLOT);
        match v {
            Value::String(s) => out.size = out.size.saturating_add(s.len()),
            Value::Array(a) => {
                out.depth = out.depth.max(depth + 1);
                stack.extend(a.iter().map(|c| (c, depth + 1)));
            }
            Value::Object(m) => {
                out.depth = out.depth.max(depth + 1);
                for (k, c) in m {
                    out.size = out.size.saturating_add(ENTRY + k.len());
                    stack.push((c, depth + 1));
                }
            }
            _ => {}
        }
    }
    out
}
