//! A linear pre-scan of YAML flow-collection nesting (`[` and `{`).
//!
//! NB: why. yaml_serde refuses documents nested deeper than 128 levels, but
//! only once its loader has read every event of the document, and libyaml's
//! scanner walks the list of open flow levels for every token (up to the
//! last 1,024 characters of them). So `a: [[[[...` of 1 MB is refused only
//! after minutes of scanning (debug build; seconds in release) and 100+ MB
//! of events. This scan finds the first flow collection nested deeper than
//! the limit in one pass, before the parser sees the text.
//!
//! Hand-written because no YAML crate offers a depth limit that applies
//! while scanning. It follows YAML just far enough to count only real flow
//! collections: quoted scalars, comments and block scalars (`|`, `>`) are
//! skipped, and in block context only a `[`/`{` that starts a node opens
//! one (a plain scalar such as `range [0, 1)` may hold brackets). Inside
//! flow collections plain scalars cannot hold brackets, so every bracket
//! counts. Where it guesses, it errs towards counting less: the parser's
//! own 128-level limit still decides whether a document is valid.

/// Deepest flow-collection nesting a YAML document may have; deeper is a
/// parse error. yaml_serde's own limit (128 levels, flow and block
/// together) refuses such documents anyway; this only makes it fail fast.
pub const MAX_YAML_FLOW_DEPTH: usize = 128;

/// `Err((line, column))` (1-based) of the first flow collection nested
/// deeper than `max`.
pub fn check_flow_depth(text: &str, max: usize) -> Result<(), (usize, usize)> {
    let b = text.as_bytes();
    let n = b.len();
    let mut i = 0;
    let mut depth = 0usize;
    let (mut line, mut line_start) = (1usize, 0usize);
    // Only indentation so far on this line, and how much.
    let mut at_line_start = true;
    // A node may begin here (so a quote or bracket starts a scalar or a
    // collection rather than being part of a plain scalar).
    let mut node_start = true;
    // Previous byte was whitespace (or a line start): `#` starts a comment.
    let mut after_space = true;
    // Column of the innermost block node begun on this line (a key, a `-`
    // or `?`): a block scalar's content is indented deeper than it.
    let mut block_col = 0usize;
    // A quoted scalar or a flow collection just ended, so a `:` right here
    // is a value indicator even without a space after it (`"a":[1]`).
    let mut adjacent_value = false;
    while i < n {
        let c = b[i];
        if c == b'\n' {
            line += 1;
            i += 1;
            line_start = i;
            at_line_start = true;
            after_space = true;
            adjacent_value = false;
            if depth == 0 {
                node_start = true;
            }
            continue;
        }
        let col = i - line_start;
        if at_line_start {
            if c == b' ' || c == b'\t' {
                i += 1;
                continue;
            }
            at_line_start = false;
            if depth == 0 {
                block_col = col;
                // `---` starts a document; its root node may follow on
                // the same line.
                if col == 0 && b[i..].starts_with(b"---") && ends_token(b.get(i + 3).copied()) {
                    i += 3;
                    node_start = true;
                    continue;
                }
            }
        }
        let next = b.get(i + 1).copied();
        match c {
            b' ' | b'\t' | b'\r' => {
                after_space = true;
                i += 1;
                continue;
            }
            b'#' if after_space => {
                while i < n && b[i] != b'\n' {
                    i += 1;
                }
                continue;
            }
            b'\'' | b'"' if node_start => {
                i += 1;
                while i < n {
                    let q = b[i];
                    if q == b'\n' {
                        line += 1;
                        line_start = i + 1;
                    } else if c == b'"' && q == b'\\' {
                        i += 1;
                    } else if q == c {
                        // `''` is an escaped quote inside a single-quoted scalar.
                        if c == b'\'' && b.get(i + 1) == Some(&b'\'') {
                            i += 1;
                        } else {
                            break;
                        }
                    }
                    i += 1;
                }
                i += 1;
                node_start = false;
                after_space = false;
                adjacent_value = true;
                continue;
            }
            b'[' | b'{' if depth > 0 || node_start => {
                depth += 1;
                if depth > max {
                    return Err((line, col + 1));
                }
                node_start = true;
            }
            b']' | b'}' if depth > 0 => {
                depth -= 1;
                node_start = false;
                adjacent_value = true;
                after_space = false;
                i += 1;
                continue;
            }
            b',' if depth > 0 => node_start = true,
            b'|' | b'>' if depth == 0 && node_start => {
                // Block scalar: skip its header, then every line that is
                // blank or indented deeper than the node it belongs to.
                while i < n && b[i] != b'\n' {
                    i += 1;
                }
                loop {
                    let start = i + 1;
                    if start >= n {
                        i = n;
                        break;
                    }
                    let mut j = start;
                    while j < n && (b[j] == b' ' || b[j] == b'\t') {
                        j += 1;
                    }
                    let blank = j >= n || b[j] == b'\n' || b[j] == b'\r';
                    if blank || j - start > block_col {
                        line += 1;
                        i = match b[start..].iter().position(|&x| x == b'\n') {
                            Some(p) => start + p,
                            None => n,
                        };
                        if i >= n {
                            break;
                        }
                    } else {
                        break;
                    }
                }
                continue;
            }
            b'-' | b'?' if depth == 0 && node_start && ends_token(next) => {
                block_col = col;
            }
            b':' if ends_token(next)
                || adjacent_value
                || (depth > 0 && matches!(next, Some(b',' | b'[' | b']' | b'{' | b'}'))) =>
            {
                node_start = true;
            }
            b'&' | b'!' if node_start => {
                // An anchor or tag before the node: the node starts after it.
                while i < n && !matches!(b[i], b' ' | b'\t' | b'\r' | b'\n') {
                    i += 1;
                }
                continue;
            }
            _ => {
                if depth == 0 && node_start {
                    block_col = col;
                }
                node_start = false;
            }
        }
        after_space = false;
        adjacent_value = false;
        i += 1;
    }
    Ok(())
}

fn ends_token(x: Option<u8>) -> bool {
    matches!(x, None | Some(b' ' | b'\t' | b'\r' | b'\n'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn depth_ok(text: &str, max: usize) -> bool {
        check_flow_depth(text, max).is_ok()
    }

    #[test]
    fn counts_flow_collections_in_block_and_flow_context() {
        assert!(depth_ok("a: [[1]]\n", 2));
        assert!(!depth_ok("a: [[1]]\n", 1));
        assert!(!depth_ok("a: {b: [{c: 1}]}\n", 2));
        assert!(!depth_ok("- [[x]]\n", 1));
        assert!(!depth_ok("[[x]]\n", 1));
        assert!(!depth_ok("a: &x !!seq [[x]]\n", 1));
        assert!(!depth_ok("--- [[x]]\n", 1));
        assert!(!depth_ok("a: !!seq\n  [[x]]\n", 1));
        assert!(!depth_ok("{\"a\":[[1]]}\n", 2));
        assert_eq!(check_flow_depth("a: 1\nb:\n  - [[[x]]]\n", 2), Err((3, 7)));
    }

    #[test]
    fn brackets_that_are_text_do_not_count() {
        let text = "\
a: range [0, 1) and [[[[ more
b: 'it''s [[[[['
c: \"[[[[ \\\" [[[[\"
d: x # [[[[[ comment
e: |
  [[[[[ code sample
  {{{{{
f: [don't, stop]
h:
  - key: >-
      [[[[[ folded
    next: x
g: [\"[[[[\", '[[[[', a#b]
";
        assert!(depth_ok(text, 1), "{:?}", check_flow_depth(text, 1));
    }

    #[test]
    fn a_block_scalar_ends_where_its_indentation_does() {
        // `b` is a sibling key (not indented past `a`), so its flow counts.
        assert!(!depth_ok("- a: |\n  b: [[x]]\n", 1));
        assert!(!depth_ok("a: |\n  text\nb: [[x]]\n", 1));
    }
}
