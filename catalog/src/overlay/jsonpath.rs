//! The JSONPaths an overlay may use: checked for size, nesting, `..` and
//! functions before `serde_json_path` parses them.

use serde_json_path::JsonPath;

/// Longest JSONPath (`target` or `copy`) an overlay may use, in bytes.
/// Real targets are well under 200 bytes. Not configurable.
pub const MAX_JSONPATH_BYTES: usize = 4096;

/// Deepest nesting of brackets and parentheses (outside string literals) a
/// JSONPath may use; `$.paths.*[?(@.tags[?@ == 'x'])]` nests 4 deep. Not
/// configurable.
///
/// NB: why so low. `serde_json_path`'s parser recurses and backtracks per
/// level: 1,200 nested parentheses overflow a 2 MiB stack (a tokio worker,
/// where the operator parses overlays), and nested filter queries
/// (`$[?@[?@[?@...]]]`) take about twice as long per level, so 18 levels
/// already cost a second in a debug build and 32 would take hours. At 10
/// the worst case parses in about 2 ms (debug build).
pub const MAX_JSONPATH_NESTING: usize = 10;

/// Most descendant segments (`..`) a JSONPath may use, filters included.
/// Not configurable.
///
/// NB: why. serde_json_path builds a located path for every node a query
/// selects, and each `..` applies to every node the previous step
/// selected: `$..*` on a 3 MB document is ~300,000 nodes with paths about
/// 10 long, `$..*..*` ten times that, each further `..` ten times more, so
/// two already risk gigabytes. Filters with `..` inside a `..` query cost
/// time the same way.
pub const MAX_JSONPATH_DESCENDANTS: usize = 1;

/// The RFC 9535 functions overlays may not use: serde_json_path compiles
/// the regular expression again for every node it tests, so one
/// `$..[?match(@, '((a{1,30}){1,30}){1,30}')]` costs 33 ms per node (debug
/// build) — hours on a large document, in a compile that cannot be
/// interrupted.
pub const FORBIDDEN_JSONPATH_FUNCTIONS: [&str; 2] = ["match", "search"];

/// Parses an RFC 9535 JSONPath after checking it against
/// [`MAX_JSONPATH_BYTES`], [`MAX_JSONPATH_NESTING`],
/// [`MAX_JSONPATH_DESCENDANTS`] and [`FORBIDDEN_JSONPATH_FUNCTIONS`], so
/// that hostile input costs a linear scan, not the parser's stack or time
/// nor the evaluator's.
pub(super) fn parse_jsonpath(path: &str) -> Result<JsonPath, String> {
    if path.len() > MAX_JSONPATH_BYTES {
        return Err(format!(
            "the JSONPath is {} bytes, over the limit of {MAX_JSONPATH_BYTES}",
            path.len()
        ));
    }
    let shape = jsonpath_shape(path);
    if shape.nesting > MAX_JSONPATH_NESTING {
        return Err(format!(
            "the JSONPath nests brackets and parentheses {} deep, over the limit of \
             {MAX_JSONPATH_NESTING}",
            shape.nesting
        ));
    }
    if shape.descendants > MAX_JSONPATH_DESCENDANTS {
        return Err(format!(
            "the JSONPath has {} descendant segments (`..`), over the limit of \
             {MAX_JSONPATH_DESCENDANTS}: each multiplies the nodes the query selects",
            shape.descendants
        ));
    }
    if let Some(f) = shape.regex_function {
        return Err(format!(
            "the JSONPath calls {f}(), which overlays do not support: it compiles its regular \
             expression again for every node tested; select by comparison (==) instead"
        ));
    }
    JsonPath::parse(path).map_err(|e| e.to_string())
}

/// What [`parse_jsonpath`] checks before parsing.
struct Shape {
    /// Deepest nesting of `[` and `(`.
    nesting: usize,
    /// `..` occurrences.
    descendants: usize,
    /// The first forbidden function called, if any.
    regex_function: Option<&'static str>,
}

/// Scans a JSONPath outside quoted names and string literals (RFC 9535
/// strings are `'...'` or `"..."` with backslash escapes). Closers are not
/// matched against openers: the parser reports malformed paths; this only
/// bounds what it is handed.
fn jsonpath_shape(path: &str) -> Shape {
    let mut shape = Shape {
        nesting: 0,
        descendants: 0,
        regex_function: None,
    };
    let mut depth = 0usize;
    let mut quote = None;
    let mut escaped = false;
    let mut prev = 0u8;
    // The identifier just before the current byte (a function name when a
    // `(` follows it, spaces aside).
    let mut word = String::new();
    for b in path.bytes() {
        match quote {
            Some(q) => {
                if escaped {
                    escaped = false;
                } else if b == b'\\' {
                    escaped = true;
                } else if b == q {
                    quote = None;
                }
                prev = 0;
                continue;
            }
            None => match b {
                b'\'' | b'"' => quote = Some(b),
                b'[' | b'(' => {
                    if b == b'(' {
                        if let Some(f) = FORBIDDEN_JSONPATH_FUNCTIONS.iter().find(|f| **f == word) {
                            shape.regex_function.get_or_insert(f);
                        }
                    }
                    depth += 1;
                    shape.nesting = shape.nesting.max(depth);
                }
                b']' | b')' => depth = depth.saturating_sub(1),
                // `...` counts once: the third dot starts a name (an error).
                b'.' if prev == b'.' => {
                    shape.descendants += 1;
                    prev = 0;
                    word.clear();
                    continue;
                }
                _ => {}
            },
        }
        if b.is_ascii_alphanumeric() || b == b'_' {
            if !prev.is_ascii_alphanumeric() && prev != b'_' {
                word.clear();
            }
            // Function names are short; longer words cannot match.
            if word.len() < 8 {
                word.push(char::from(b));
            }
        } else if b != b' ' && b != b'(' {
            word.clear();
        }
        prev = b;
    }
    shape
}
