//! Result bodies sent by reference: the upstream's bytes go from its
//! response straight into the HTTP response to the MCP client, never
//! through rmcp's types.
//!
//! rmcp's `CallToolResult` holds `structuredContent` as a
//! `serde_json::Value` and the text as a `String`; serialising it builds the
//! whole message again, and a session keeps every message for a minute so a
//! client can resume its stream. For a 10 MB JSON array that is a ~150 MB
//! tree, the text twice over and the message twice — the issue's 734 MB.
//! So the call pipeline hands rmcp a result whose big fields are short
//! *markers* ([`Payload::register`]) and keeps the bytes here; the MCP
//! endpoint's response body ([`Spliced`], installed by
//! [`crate::edge::intake`]) replaces each marker, as the message streams out,
//! with the bytes rendered in place — raw JSON for `structuredContent`, a
//! JSON string for text, base64 for blobs — a chunk at a time. A result
//! then costs its body once, plus a chunk.
//!
//! A marker is the string `"tg-payload-<process secret>-<id>-s"` where a
//! JSON string goes, and the object `{"tg-payload-<secret>-<id>-v":0}`
//! where `structuredContent` goes (an object, which rmcp passes to every
//! protocol version as it is). The secret is random per process and never
//! leaves it (every marker is replaced), so neither an upstream nor a
//! client can forge one.
//!
//! A payload is dropped, and its budget share returned, once every marker
//! of it has been sent; at once if the connection breaks while it is sent;
//! and after [`PAYLOAD_TTL`] if its message is never sent (the client went
//! away before). A message rmcp sends again after that (a resumed stream)
//! carries a notice instead of the data.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Context, Poll};
use std::time::Duration;

use base64::Engine;
use bytes::{Bytes, BytesMut};
use http_body::{Body, Frame, SizeHint};
use memchr::memmem::Finder;

use crate::call::upstream::BudgetPermit;

/// How long a payload whose message is not sent is kept. A message is
/// normally sent within milliseconds of the result; this bounds how long a
/// client that leaves before can pin its share of the budget.
pub(crate) const PAYLOAD_TTL: Duration = Duration::from_secs(30);

/// Bytes of a payload rendered per frame.
const CHUNK: usize = 64 * 1024;
/// Payloads at least this large get their own expiry timer.
const LARGE: usize = 64 * 1024;

/// What a marker of a payload no longer held is replaced with.
const GONE_TEXT: &str = "\"(this result is no longer held by the gateway; call the tool again)\"";

/// What a payload's bytes are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Form {
    /// JSON text checked by [`crate::call::rawjson::Document::parse`], sent
    /// between `prefix` and `suffix` (raw JSON, e.g. `{"result":` and `}`).
    Json { prefix: String, suffix: String },
    /// UTF-8 text.
    Text,
    /// Bytes, sent base64-encoded.
    Binary,
}

/// How a marker asks for its payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum As {
    /// As a JSON value (only [`Form::Json`]): `structuredContent`.
    Value,
    /// As a JSON string: text, or base64 for [`Form::Binary`].
    String,
}

/// One result body held for the response.
pub(crate) struct Payload {
    bytes: Bytes,
    form: Form,
    /// Budget of the call that fetched it, released with the bytes.
    _permit: Option<BudgetPermit>,
}

impl Payload {
    pub(crate) fn json(bytes: Bytes, permit: Option<BudgetPermit>) -> Self {
        Self::wrapped_json(bytes, "", "", permit)
    }

    /// JSON text sent inside `prefix`…`suffix`, e.g. `{"result":` … `}`.
    pub(crate) fn wrapped_json(
        bytes: Bytes,
        prefix: &str,
        suffix: &str,
        permit: Option<BudgetPermit>,
    ) -> Self {
        Payload {
            bytes,
            form: Form::Json {
                prefix: prefix.to_string(),
                suffix: suffix.to_string(),
            },
            _permit: permit,
        }
    }

    /// Text; invalid UTF-8 is replaced (U+FFFD), as `from_utf8_lossy`.
    pub(crate) fn text(bytes: Bytes, permit: Option<BudgetPermit>) -> Self {
        let bytes = match String::from_utf8_lossy(&bytes) {
            std::borrow::Cow::Borrowed(_) => bytes,
            std::borrow::Cow::Owned(s) => Bytes::from(s.into_bytes()),
        };
        Payload {
            bytes,
            form: Form::Text,
            _permit: permit,
        }
    }

    pub(crate) fn binary(bytes: Bytes, permit: Option<BudgetPermit>) -> Self {
        Payload {
            bytes,
            form: Form::Binary,
            _permit: permit,
        }
    }

    /// Holds the payload for `uses` markers and returns its handle.
    pub(crate) fn register(self, uses: u8) -> Handle {
        let table = table();
        let id = table.next.fetch_add(1, Ordering::Relaxed);
        let large = self.bytes.len() >= LARGE;
        let expires = std::time::Instant::now() + PAYLOAD_TTL;
        {
            let mut held = table.lock();
            held.sweep();
            held.map.insert(id, (Arc::new(self), uses.max(1), expires));
        }
        // Small payloads go with the next sweep; a large one is dropped on
        // time even if no call comes (its budget share may be what waiting
        // calls need).
        if large {
            if let Ok(rt) = tokio::runtime::Handle::try_current() {
                rt.spawn(async move {
                    tokio::time::sleep(PAYLOAD_TTL).await;
                    table.lock().map.remove(&id);
                });
            }
        }
        Handle { id }
    }
}

/// A registered payload; its markers go where the bytes would.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Handle {
    id: u64,
}

impl Handle {
    /// The marker for a JSON string (text, base64).
    pub(crate) fn string(&self) -> String {
        format!("{}{}-s", &table().prefix[1..], self.id)
    }

    /// The marker for a JSON value (`structuredContent`).
    pub(crate) fn value(&self) -> serde_json::Value {
        let mut m = serde_json::Map::new();
        m.insert(
            format!("{}{}-v", &table().prefix[1..], self.id),
            serde_json::Value::from(0),
        );
        serde_json::Value::Object(m)
    }
}

struct Table {
    /// `"tg-payload-<secret>-`: what every marker starts with, its quote
    /// included.
    prefix: String,
    next: AtomicU64,
    held: Mutex<Held>,
}

/// Payloads by id: the payload, markers left to send, expiry.
struct Held {
    map: HashMap<u64, (Arc<Payload>, u8, std::time::Instant)>,
    swept: std::time::Instant,
}

impl Held {
    /// Drops expired payloads, at most once a second.
    fn sweep(&mut self) {
        let now = std::time::Instant::now();
        if now.duration_since(self.swept) >= Duration::from_secs(1) {
            self.swept = now;
            self.map.retain(|_, (_, _, expires)| *expires > now);
        }
    }
}

impl Table {
    fn lock(&self) -> std::sync::MutexGuard<'_, Held> {
        self.held.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The payload of a marker.
    fn get(&self, id: u64) -> Option<Arc<Payload>> {
        self.lock().map.get(&id).map(|(p, _, _)| p.clone())
    }

    /// One marker of `id` was sent in full; after the last, the payload
    /// goes.
    fn sent(&self, id: u64) {
        let mut held = self.lock();
        if let Some((_, uses, expires)) = held.map.get_mut(&id) {
            *uses = uses.saturating_sub(1);
            *expires = std::time::Instant::now() + PAYLOAD_TTL;
            if *uses == 0 {
                held.map.remove(&id);
            }
        }
    }

    /// The connection broke while a marker of `id` was sent: its message
    /// is lost, and so is the payload's reason to be held.
    fn abandon(&self, id: u64) {
        self.lock().map.remove(&id);
    }
}

fn table() -> &'static Table {
    static TABLE: OnceLock<Table> = OnceLock::new();
    TABLE.get_or_init(|| {
        // A v4 UUID: 122 random bits, from the same source as session ids.
        let secret: String = rmcp::transport::common::server_side_http::session_id()
            .chars()
            .filter(char::is_ascii_alphanumeric)
            .collect();
        Table {
            prefix: format!("\"tg-payload-{secret}-"),
            next: AtomicU64::new(1),
            held: Mutex::new(Held {
                map: HashMap::new(),
                swept: std::time::Instant::now(),
            }),
        }
    })
}

/// Longest marker after its prefix: up to 20 digits and `-v":0}`.
const MARKER_TAIL: usize = 26;

/// A response body with every marker replaced by its payload.
pub(crate) struct Spliced<B> {
    inner: B,
    finder: Finder<'static>,
    /// Read from `inner`, not yet passed on or replaced.
    pending: Bytes,
    render: Option<Render>,
    inner_done: bool,
    trailers: Option<http::HeaderMap>,
}

impl<B> Spliced<B> {
    pub(crate) fn new(inner: B) -> Self {
        Spliced {
            inner,
            finder: Finder::new(table().prefix.as_bytes()).into_owned(),
            pending: Bytes::new(),
            render: None,
            inner_done: false,
            trailers: None,
        }
    }
}

/// What the head of `pending` is.
#[derive(Debug, PartialEq)]
enum Scan {
    /// Pass on this many bytes as they are.
    Literal(usize),
    /// A marker of this many bytes: replace it.
    Marker { len: usize, id: u64, want: As },
    /// Maybe the start of a marker: need more bytes to tell.
    NeedMore,
}

/// `buf` at a marker's prefix (`"tg-payload-<secret>-`, found by `finder`),
/// opened by `{` for a value marker.
fn scan(finder: &Finder<'_>, buf: &[u8], at_end: bool) -> Scan {
    let prefix = finder.needle();
    match finder.find(buf) {
        Some(i) if i > 1 && buf[i - 1] == b'{' => Scan::Literal(i - 1),
        Some(1) if buf[0] == b'{' => marker(
            &buf[1 + prefix.len()..],
            1 + prefix.len(),
            b"-v\":0}",
            As::Value,
            at_end,
        ),
        Some(0) => marker(
            &buf[prefix.len()..],
            prefix.len(),
            b"-s\"",
            As::String,
            at_end,
        ),
        Some(i) => Scan::Literal(i),
        None if at_end => Scan::Literal(buf.len()),
        None => {
            // Keep back a tail that could start a marker: the start of the
            // prefix, after a `{` for a value marker.
            let n = buf.len();
            let keep = (0..prefix.len().min(n + 1))
                .rev()
                .find(|&k| buf.ends_with(&prefix[..k]) && (k > 0 || buf.ends_with(b"{")))
                .map_or(0, |k| {
                    if k < n && buf[n - k - 1] == b'{' {
                        k + 1
                    } else {
                        k
                    }
                });
            if keep == n {
                Scan::NeedMore
            } else {
                Scan::Literal(n - keep)
            }
        }
    }
}

/// A marker whose prefix (`head` bytes) is done: `tail` should be its id
/// and then `end`.
fn marker(tail: &[u8], head: usize, end: &[u8], want: As, at_end: bool) -> Scan {
    let digits = tail.iter().take_while(|b| b.is_ascii_digit()).count();
    match tail.get(digits..digits + end.len()) {
        Some(e) if e == end && (1..=20).contains(&digits) => {
            match std::str::from_utf8(&tail[..digits])
                .ok()
                .and_then(|d| d.parse().ok())
            {
                Some(id) => Scan::Marker {
                    len: head + digits + end.len(),
                    id,
                    want,
                },
                None => Scan::Literal(1),
            }
        }
        None if !at_end && tail.len() < MARKER_TAIL => Scan::NeedMore,
        _ => Scan::Literal(1),
    }
}

impl<B> Body for Spliced<B>
where
    B: Body<Data = Bytes> + Unpin,
{
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        let this = &mut *self;
        loop {
            if let Some(r) = &mut this.render {
                match r.next_chunk() {
                    Some(chunk) => return Poll::Ready(Some(Ok(Frame::data(chunk)))),
                    None => this.render = None,
                }
            }
            if !this.pending.is_empty() {
                match scan(&this.finder, &this.pending, this.inner_done) {
                    Scan::Literal(n) => {
                        let out = this.pending.split_to(n);
                        return Poll::Ready(Some(Ok(Frame::data(out))));
                    }
                    Scan::Marker { len, id, want } => {
                        let _ = this.pending.split_to(len);
                        this.render = Some(match table().get(id) {
                            Some(p) => Render::new(id, p, want),
                            None => Render::gone(want),
                        });
                        continue;
                    }
                    Scan::NeedMore => {}
                }
            }
            if this.inner_done {
                return Poll::Ready(this.trailers.take().map(|t| Ok(Frame::trailers(t))));
            }
            match Pin::new(&mut this.inner).poll_frame(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(None) => this.inner_done = true,
                Poll::Ready(Some(Err(e))) => return Poll::Ready(Some(Err(e))),
                Poll::Ready(Some(Ok(frame))) => match frame.into_data() {
                    Ok(data) if this.pending.is_empty() => this.pending = data,
                    Ok(data) => {
                        // Only when a marker is split across frames.
                        let mut joined = BytesMut::with_capacity(this.pending.len() + data.len());
                        joined.extend_from_slice(&this.pending);
                        joined.extend_from_slice(&data);
                        this.pending = joined.freeze();
                    }
                    Err(frame) => {
                        // Trailers end the body: flush what is pending first.
                        this.trailers = frame.into_trailers().ok();
                        this.inner_done = true;
                    }
                },
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner_done
            && self.pending.is_empty()
            && self.render.is_none()
            && self.trailers.is_none()
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::default()
    }
}

/// One payload being written out.
struct Render {
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
    fn new(id: u64, payload: Arc<Payload>, want: As) -> Self {
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

    fn gone(want: As) -> Self {
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

    fn next_chunk(&mut self) -> Option<Bytes> {
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

fn escape_needed(b: &[u8]) -> bool {
    b.iter().any(|&c| c == b'"' || c == b'\\' || c < 0x20)
}

/// JSON string escaping as serde_json does it: `"`, `\` and control
/// characters; every other byte as is. Bytes, not `str`: a chunk may end
/// inside a character, which the next chunk completes.
fn escape_into(b: &[u8], out: &mut Vec<u8>) {
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
fn escaped(b: Bytes) -> Bytes {
    if !escape_needed(&b) {
        return b;
    }
    let mut out = Vec::with_capacity(b.len() + b.len() / 4);
    escape_into(&b, &mut out);
    Bytes::from(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::{BodyExt, StreamBody};
    use serde_json::{json, Value};

    /// Runs `body` through a splice, delivered in frames of `frame` bytes.
    async fn spliced(body: &str, frame: usize) -> String {
        let chunks: Vec<Result<Frame<Bytes>, std::convert::Infallible>> = body
            .as_bytes()
            .chunks(frame.max(1))
            .map(|c| Ok(Frame::data(Bytes::copy_from_slice(c))))
            .collect();
        let inner = StreamBody::new(futures::stream::iter(chunks));
        let out = Spliced::new(inner).collect().await.unwrap().to_bytes();
        String::from_utf8(out.to_vec()).unwrap()
    }

    fn message(text: &str, structured: Value) -> String {
        json!({"jsonrpc": "2.0", "id": 1, "result": {
            "content": [{"type": "text", "text": text}],
            "structuredContent": structured,
            "isError": false}})
        .to_string()
    }

    #[tokio::test]
    async fn markers_become_the_payload_whatever_the_framing() {
        let body = "{ \"a\" : [1, \"x y\\\"\" ,\n {\"é\":\"\\n\"} ] }";
        let want_value: Value = serde_json::from_str(body).unwrap();
        for frame in [1, 2, 7, 64, 100_000] {
            let h = Payload::wrapped_json(Bytes::from(body), "{\"result\":", "}", None).register(2);
            let msg = message(&h.string(), h.value());
            let out: Value = serde_json::from_str(&spliced(&msg, frame).await).unwrap();
            let wrapped = json!({"result": want_value});
            assert_eq!(out["result"]["structuredContent"], wrapped, "frame {frame}");
            assert_eq!(
                out["result"]["content"][0]["text"],
                json!(wrapped.to_string()),
                "frame {frame}"
            );
            // Both markers sent: the payload is gone.
            assert!(table().get(h.id).is_none());
        }
    }

    #[tokio::test]
    async fn text_and_binary_payloads_render_as_strings() {
        let text = "line 1\nline \"2\"\t\u{1}é".repeat(20_000);
        let h = Payload::text(Bytes::from(text.clone()), None).register(1);
        let msg = json!({"t": h.string()}).to_string();
        let out: Value = serde_json::from_str(&spliced(&msg, 4096).await).unwrap();
        assert_eq!(out["t"], json!(text));

        let bin: Vec<u8> = (0..200_000u32).map(|i| (i * 7) as u8).collect();
        let h = Payload::binary(Bytes::from(bin.clone()), None).register(1);
        let msg = json!({"b": h.string()}).to_string();
        let out: Value = serde_json::from_str(&spliced(&msg, 5000).await).unwrap();
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(out["b"].as_str().unwrap())
            .unwrap();
        assert_eq!(decoded, bin);
    }

    #[tokio::test]
    async fn unknown_markers_become_a_notice_and_look_alikes_pass_through() {
        let gone = format!("{}999999-s", &table().prefix[1..]);
        let mut gone_v = serde_json::Map::new();
        gone_v.insert(format!("{}999999-v", &table().prefix[1..]), json!(0));
        // Our prefix, but not a marker's shape: passed on as it is.
        let odd = format!("{}12-v", &table().prefix[1..]);
        let fake = "tg-payload-0000-1-s";
        for frame in [1, 3, 1000] {
            let msg = json!({"a": gone, "b": gone_v, "c": fake, "d": "tg-payload-",
                "e": odd, "f": {"x{": "{"}})
            .to_string();
            let out: Value = serde_json::from_str(&spliced(&msg, frame).await).unwrap();
            assert!(out["a"].as_str().unwrap().contains("no longer held"));
            assert_eq!(out["b"], Value::Null);
            assert_eq!(out["c"], json!(fake));
            assert_eq!(out["d"], json!("tg-payload-"));
            assert_eq!(out["e"], json!(odd));
            assert_eq!(out["f"], json!({"x{": "{"}));
        }
    }

    #[tokio::test]
    async fn a_payload_whose_stream_breaks_is_released_at_once() {
        let budget = crate::call::upstream::ResponseBudget::new(1 << 20);
        let permit = budget
            .acquire(
                "test",
                300_000,
                tokio::time::Instant::now() + Duration::from_secs(1),
            )
            .await
            .unwrap();
        assert_eq!(budget.available(), (1 << 20) - 300_032);
        let h = Payload::text(Bytes::from(vec![b'x'; 300_000]), Some(permit)).register(1);
        let msg = json!({"t": h.string()}).to_string();
        let frames: Vec<Result<Frame<Bytes>, std::convert::Infallible>> =
            vec![Ok(Frame::data(Bytes::from(msg)))];
        let mut body = Spliced::new(StreamBody::new(futures::stream::iter(frames)));
        // The client reads the head and one chunk, then goes away.
        for _ in 0..3 {
            assert!(body.frame().await.unwrap().unwrap().is_data());
        }
        assert!(table().get(h.id).is_some());
        drop(body);
        assert!(table().get(h.id).is_none());
        assert_eq!(budget.available(), 1 << 20);
    }
}
