//! A bound on each field of a log line. Most fields are ours, but some
//! carry text a client chose (a JSON-RPC id, a tool name inside an error,
//! a header, a URL), logged by us or by a library (rmcp logs every error
//! answer at WARN with its id): one 4 MiB request must not become a 4 MB
//! log line. Each field value is cut at [`MAX_FIELD_BYTES`] with a marker,
//! in text and JSON logs alike.

use std::fmt::{self, Write as _};

use tracing::field::{Field, Visit};
use tracing_subscriber::field::RecordFields;
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::FormatFields;

/// Most bytes of one field's value in a log line; more are cut. Generous
/// for our own messages and error chains, small against a request body.
pub const MAX_FIELD_BYTES: usize = 2048;

/// `value` formatted with `fmt`, cut at [`MAX_FIELD_BYTES`] on a character
/// boundary: formatting stops storing past the bound, so a huge value
/// costs its formatting time but never its size in memory.
pub fn capped(fmt: impl FnOnce(&mut Capped) -> fmt::Result) -> String {
    let mut c = Capped {
        buf: String::new(),
        total: 0,
    };
    let _ = fmt(&mut c);
    c.finish()
}

/// A string sink that keeps the first [`MAX_FIELD_BYTES`] and counts the rest.
pub struct Capped {
    buf: String,
    total: usize,
}

impl fmt::Write for Capped {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        self.total += s.len();
        let room = MAX_FIELD_BYTES.saturating_sub(self.buf.len());
        if s.len() <= room {
            self.buf.push_str(s);
        } else {
            let mut end = room;
            while !s.is_char_boundary(end) {
                end -= 1;
            }
            self.buf.push_str(&s[..end]);
        }
        Ok(())
    }
}

impl Capped {
    fn finish(mut self) -> String {
        let cut = self.total - self.buf.len();
        if cut > 0 {
            let _ = write!(self.buf, "…[{cut} more bytes]");
        }
        self.buf
    }
}

/// The text format's fields (tracing-subscriber's layout, `message`
/// first without its name, then `name=value`), each value bounded.
pub(crate) struct BoundedFields;

impl<'writer> FormatFields<'writer> for BoundedFields {
    fn format_fields<R: RecordFields>(&self, writer: Writer<'writer>, fields: R) -> fmt::Result {
        let mut v = TextVisitor {
            writer,
            first: true,
            result: Ok(()),
        };
        fields.record(&mut v);
        v.result
    }
}

struct TextVisitor<'a> {
    writer: Writer<'a>,
    first: bool,
    result: fmt::Result,
}

impl TextVisitor<'_> {
    fn put(&mut self, field: &Field, value: String) {
        if self.result.is_err() || field.name().starts_with("log.") {
            return;
        }
        let sep = if self.first { "" } else { " " };
        self.first = false;
        self.result = if field.name() == "message" {
            write!(self.writer, "{sep}{value}")
        } else {
            write!(self.writer, "{sep}{}={value}", field.name())
        };
    }
}

impl Visit for TextVisitor<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        let text = if field.name() == "message" {
            capped(|w| w.write_str(value))
        } else {
            capped(|w| write!(w, "{value:?}"))
        };
        self.put(field, text);
    }

    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.put(field, capped(|w| write!(w, "{value}")));
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.put(field, capped(|w| write!(w, "{value:?}")));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_values_are_cut_on_a_char_boundary_with_a_marker() {
        let long = "é".repeat(MAX_FIELD_BYTES);
        let out = capped(|w| w.write_str(&long));
        let kept = out.split('…').next().unwrap_or_default();
        assert!(kept.len() <= MAX_FIELD_BYTES, "{}", kept.len());
        assert!(
            out.ends_with(&format!("…[{} more bytes]", long.len() - kept.len())),
            "{}",
            &out[out.len() - 40..]
        );
        assert_eq!(capped(|w| w.write_str("short")), "short");
    }
}
