//! HTML in operation summaries and descriptions, reduced to text.
//!
//! Documents generated from HTML-producing tools (Javadoc, Sphinx, some
//! API portals) carry `<p>`, `<br/>`, `<code>` and entities in their
//! descriptions; an agent reads them as noise and they eat the description
//! length limit. Descriptions are mostly Markdown with some HTML, so this
//! is not an HTML parser: only tags of elements that descriptions use are
//! removed (block ones become line breaks), Markdown and any `<` that does
//! not open such a tag (`a < b`, `List<String>`) stay as written, and
//! entities are decoded last, so `&lt;b&gt;` becomes the text `<b>`.
//!
//! NB: hand-written rather than a crate of the field: the HTML-to-text
//! crates (`html2text` and the like) bring a full html5ever parser and
//! would also rewrite the Markdown around the tags. This scan is linear
//! (a tag is looked for up to the next `<` and at most [`MAX_TAG`] bytes),
//! slices only at ASCII positions, and so cannot panic on any input;
//! entity decoding is the `html-escape` crate's, with the full HTML5 table.

use std::borrow::Cow;

/// Longest tag (with attributes) recognised; a longer one stays as text.
const MAX_TAG: usize = 1024;

/// Elements whose tags start a paragraph.
const PARAGRAPH: &[&str] = &[
    "address",
    "article",
    "blockquote",
    "dl",
    "figure",
    "footer",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "header",
    "hr",
    "nav",
    "ol",
    "p",
    "pre",
    "section",
    "table",
    "ul",
];

/// Elements whose tags start a line.
const LINE: &[&str] = &[
    "br",
    "caption",
    "dd",
    "details",
    "div",
    "dt",
    "figcaption",
    "li",
    "summary",
    "tbody",
    "td",
    "tfoot",
    "th",
    "thead",
    "tr",
];

/// Elements whose tags are dropped, keeping their content.
const INLINE: &[&str] = &[
    "a", "abbr", "b", "big", "center", "cite", "del", "dfn", "em", "font", "i", "img", "ins",
    "mark", "q", "s", "small", "span", "strike", "strong", "sub", "sup", "u", "var",
];

/// Elements whose tags become Markdown's code span delimiter, "`".
const CODE: &[&str] = &["code", "kbd", "samp", "tt"];

/// `text` with HTML tags of known elements removed, comments dropped and
/// entities decoded; borrowed when there is nothing to do.
pub fn to_text(text: &str) -> Cow<'_, str> {
    if !text.contains(['<', '&']) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    let mut stripped = false;
    while let Some(open) = rest.find('<') {
        out.push_str(&rest[..open]);
        let tail = &rest[open..];
        if let Some(after) = tail.strip_prefix("<!--") {
            stripped = true;
            rest = after.find("-->").map_or("", |end| &after[end + 3..]);
            continue;
        }
        let Some((len, kind)) = tag(tail) else {
            out.push('<');
            rest = &tail[1..];
            continue;
        };
        stripped = true;
        rest = &tail[len..];
        let breaks = match kind {
            Tag::Inline => continue,
            Tag::Code => {
                out.push('`');
                continue;
            }
            Tag::Paragraph => 2,
            Tag::Line | Tag::Item => 1,
        };
        // Whitespace around a block tag is layout of the HTML source.
        rest = rest.trim_start();
        // One break of the larger kind where several meet.
        let kept = out.trim_end_matches([' ', '\t', '\n', '\r']).len();
        let trailing = out[kept..].matches('\n').count().min(2);
        out.truncate(kept);
        if !out.is_empty() {
            out.push_str(if breaks.max(trailing) == 2 {
                "\n\n"
            } else {
                "\n"
            });
        }
        if kind == Tag::Item {
            out.push_str("- ");
        }
    }
    out.push_str(rest);
    let decoded = html_escape::decode_html_entities(&out).into_owned();
    if !stripped {
        return Cow::Owned(decoded);
    }
    Cow::Owned(tidy(&decoded))
}

/// What a removed tag leaves in the text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tag {
    Inline,
    Code,
    Paragraph,
    Line,
    /// A list item's start: a line starting `- `.
    Item,
}

/// If `s` (starting at `<`) is a tag of a known element: its length in
/// bytes and what it leaves.
fn tag(s: &str) -> Option<(usize, Tag)> {
    let inner = s.get(1..)?;
    let inner = inner.strip_prefix('/').unwrap_or(inner);
    let name_len = inner
        .find(|c: char| !c.is_ascii_alphanumeric())
        .unwrap_or(inner.len());
    let name = inner[..name_len].to_ascii_lowercase();
    let closing = s.as_bytes().get(1) == Some(&b'/');
    let kind = if PARAGRAPH.contains(&name.as_str()) {
        Tag::Paragraph
    } else if name == "li" && !closing {
        Tag::Item
    } else if LINE.contains(&name.as_str()) {
        Tag::Line
    } else if INLINE.contains(&name.as_str()) {
        Tag::Inline
    } else if CODE.contains(&name.as_str()) {
        Tag::Code
    } else {
        return None;
    };
    // The name must end the way a tag's does.
    let next = inner[name_len..].chars().next()?;
    if !(next == '>' || next == '/' || next.is_ascii_whitespace()) {
        return None;
    }
    // Up to the first '>' after the tag's own '<', unless another '<'
    // comes first; byte slicing is safe as `s` starts with ASCII '<'.
    let window = s.as_bytes().get(1..s.len().min(MAX_TAG))?;
    let close = window.iter().position(|b| *b == b'>' || *b == b'<')?;
    (window[close] == b'>').then_some((close + 2, kind))
}

/// Line breaks from block tags, made readable: trailing spaces trimmed,
/// at most one blank line in a row, none at the ends. Leading spaces stay
/// (Markdown indentation).
fn tidy(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut blank = 0;
    for line in s.split('\n').map(str::trim_end) {
        if line.trim_start().is_empty() {
            blank += 1;
            continue;
        }
        if !out.is_empty() {
            out.push_str(if blank > 0 { "\n\n" } else { "\n" });
        }
        blank = 0;
        out.push_str(if out.is_empty() {
            line.trim_start()
        } else {
            line
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::to_text;

    #[test]
    fn tags_of_known_elements_become_text() {
        assert_eq!(
            to_text("<b>Required scope: </b><code>attachments:read</code>"),
            "Required scope: `attachments:read`"
        );
        assert_eq!(
            to_text("<p>Creates a <b>pet</b>.</p><p>See <a href=\"https://x.test/a?b=1&amp;c\">the docs</a>.</p>"),
            "Creates a pet.\n\nSee the docs."
        );
        assert_eq!(to_text("One<br/>two<BR>three"), "One\ntwo\nthree");
        assert_eq!(
            to_text("<ul>\n  <li>a</li>\n  <li>b</li>\n</ul>"),
            "- a\n- b"
        );
    }

    #[test]
    fn text_that_only_looks_like_html_stays() {
        for s in [
            "a < b and c > d",
            "Returns List<String> or Map<K, V>",
            "Use <id> as placeholder",
            "AT&T and R&D",
            "# Title\n\n* item\n* item",
            "<",
            "<p",
            "<b x=\"1\" <i>",
        ] {
            let t = to_text(s);
            assert!(!t.is_empty());
            if !s.contains("<i>") {
                assert_eq!(t, s, "{s:?}");
            }
        }
    }

    #[test]
    fn entities_are_decoded_after_tags_are_removed() {
        assert_eq!(
            to_text("&lt;b&gt; is bold &amp; &copy; &#x41;"),
            "<b> is bold & © A"
        );
        assert_eq!(to_text("x <!-- hidden --> y"), "x  y");
        assert_eq!(to_text("x <!-- never closed"), "x");
    }

    #[test]
    fn any_input_is_handled() {
        let odd = [
            "<<<>>>",
            "</",
            "</>",
            "<b",
            "<b/",
            "<é>",
            "é<b>é</b>é",
            "&#xFFFFFFFF;",
            "&",
            "&;",
            "<p>\u{0}</p>",
        ];
        for s in odd {
            let _ = to_text(s);
        }
        let long = format!("<b {}>", "x".repeat(5000));
        assert_eq!(to_text(&long), long);
    }
}
