//! Writing one payload in place of its marker, a chunk at a time: raw
//! JSON, a JSON string (escaped as it goes) or base64.

use std::sync::Arc;

use base64::Engine;
use bytes::Bytes;

use super::{table, As, Form, Payload, CHUNK, GONE_TEXT};

/// One payload being written out.
pub(super) struct Render {
    id: u64,
    payload: Option<Arc<Payload>>,
    want: As,
    /// 0: opening; 1: the bytes; 2: closing; 3: done.
    stage: u8,
    pos: usize,
    /// Inside a JSON string of the payload (for whitespace removal).
    in_string: bool,
    escaped: bool,
}

impl Drop for Render {
    fn drop(&mut self) {
        // Still holding the payload: not sent in full.
        if self.payload.is_some() {
            table().abandon(self.id);
        }
    }
}

impl Render {
    pub(super) fn new(id: u64, payload: Arc<Payload>, want: As) -> Self {
        Render {
            id,
            payload: Some(payload),
            want,
            stage: 0,
            pos: 0,
            in_string: false,
            escaped: false,
        }
    }

    pub(super) fn gone(want: As) -> Self {
        Render {
            id: 0,
            payload: None,
            want,
            stage: 0,
            pos: 0,
            in_string: false,
            escaped: false,
        }
    }

    pub(super) fn next_chunk(&mut self) -> Option<Bytes> {
        let Some(p) = self.payload.clone() else {
            if self.stage > 0 {
                return None;
            }
            self.stage = 3;
            return Some(Bytes::from_static(match self.want {
                As::Value => b"null",
                As::String => GONE_TEXT.as_bytes(),
            }));
        };
        loop {
            match self.stage {
                0 => {
                    self.stage = 1;
                    let open = match (&p.form, self.want) {
                        (Form::Json { prefix, .. }, As::Value) => prefix.as_bytes().to_vec(),
                        (Form::Json { prefix, .. }, As::String) => {
                            let mut s = b"\"".to_vec();
                            escape_into(prefix.as_bytes(), &mut s);
                            s
                        }
                        (_, _) => b"\"".to_vec(),
                    };
                    if !open.is_empty() {
                        return Some(Bytes::from(open));
                    }
                }
                1 => {
                    if self.pos >= p.bytes.len() {
                        self.stage = 2;
                        continue;
                    }
                    let chunk = self.render_chunk(&p);
                    if !chunk.is_empty() {
                        return Some(chunk);
                    }
                }
                2 => {
                    self.stage = 3;
                    let close = match (&p.form, self.want) {
                        (Form::Json { suffix, .. }, As::Value) => suffix.as_bytes().to_vec(),
                        (Form::Json { suffix, .. }, As::String) => {
                            let mut s = Vec::new();
                            escape_into(suffix.as_bytes(), &mut s);
                            s.push(b'"');
                            s
                        }
                        (_, _) => b"\"".to_vec(),
                    };
                    if !close.is_empty() {
                        return Some(Bytes::from(close));
                    }
                }
                _ => {
                    self.payload = None;
                    table().sent(self.id);
                    return None;
                }
            }
        }
    }

    fn render_chunk(&mut self, p: &Payload) -> Bytes {
        let bytes = &p.bytes;
        match (&p.form, self.want) {
            (Form::Binary, _) => {
                // Whole 3-byte groups until the last chunk: no padding inside.
                let end = (self.pos + CHUNK / 3 * 3).min(bytes.len());
                let out = base64::engine::general_purpose::STANDARD.encode(&bytes[self.pos..end]);
                self.pos = end;
                Bytes::from(out)
            }
            (Form::Text, _) => {
                let end = (self.pos + CHUNK).min(bytes.len());
                let src = bytes.slice(self.pos..end);
                self.pos = end;
                escaped(src)
            }
            (Form::Json { .. }, want) => {
                let end = (self.pos + CHUNK).min(bytes.len());
                let src = bytes.slice(self.pos..end);
                self.pos = end;
                let min = self.minify(&src);
                match want {
                    As::Value => min,
                    As::String => escaped(min),
                }
            }
        }
    }

    /// `src` without whitespace outside strings (what `Value::to_string`
    /// would print); the same bytes when there is none.
    fn minify(&mut self, src: &Bytes) -> Bytes {
        let mut out: Option<Vec<u8>> = None;
        for (i, &b) in src.iter().enumerate() {
            let drop = if self.in_string {
                if self.escaped {
                    self.escaped = false;
                } else if b == b'\\' {
                    self.escaped = true;
                } else if b == b'"' {
                    self.in_string = false;
                }
                false
            } else if b == b'"' {
                self.in_string = true;
                false
            } else {
                matches!(b, b' ' | b'\t' | b'\n' | b'\r')
            };
            match (&mut out, drop) {
                (Some(o), false) => o.push(b),
                (Some(_), true) => {}
                (None, true) => {
                    let mut o = Vec::with_capacity(src.len());
                    o.extend_from_slice(&src[..i]);
                    out = Some(o);
                }
                (None, false) => {}
            }
        }
        match out {
            Some(o) => Bytes::from(o),
            None => src.clone(),
        }
    }
}

pub(super) fn escape_needed(b: &[u8]) -> bool {
    b.iter().any(|&c| c == b'"' || c == b'\\' || c < 0x20)
}

/// JSON string escaping as serde_json does it: `"`, `\` and control
/// characters; every other byte as is. Bytes, not `str`: a chunk may end
/// inside a character, which the next chunk completes.
pub(super) fn escape_into(b: &[u8], out: &mut Vec<u8>) {
    let mut start = 0;
    for (i, &c) in b.iter().enumerate() {
        let esc: &[u8] = match c {
            b'"' => b"\\\"",
            b'\\' => b"\\\\",
            b'\n' => b"\\n",
            b'\r' => b"\\r",
            b'\t' => b"\\t",
            0x08 => b"\\b",
            0x0c => b"\\f",
            c if c < 0x20 => b"",
            _ => continue,
        };
        out.extend_from_slice(&b[start..i]);
        if esc.is_empty() {
            out.extend_from_slice(format!("\\u{c:04x}").as_bytes());
        } else {
            out.extend_from_slice(esc);
        }
        start = i + 1;
    }
    out.extend_from_slice(&b[start..]);
}

/// `b` escaped, or `b` itself when nothing needs escaping.
pub(super) fn escaped(b: Bytes) -> Bytes {
    if !escape_needed(&b) {
        return b;
    }
    let mut out = Vec::with_capacity(b.len() + b.len() / 4);
    escape_into(&b, &mut out);
    Bytes::from(out)
}
