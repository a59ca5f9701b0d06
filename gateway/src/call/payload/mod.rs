//! Result bodies sent by reference: the upstream's bytes go from its
//! response straight into the HTTP response to the MCP client, never
//! through rmcp's types.
//!
//! rmcp's `CallToolResult` holds `structuredContent` as a
//! `serde_json::Value` and the text as a `String`; serialising it builds the
//! whole message again, and a session keeps every message for a minute so a
//! client can resume its stream. For a 10 MB JSON array that is a ~150 MB
//! tree, the text twice over and the message twice — the 734 MB.
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
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use bytes::Bytes;

use crate::call::upstream::BudgetPermit;

mod render;
mod splice;
use render::Render;

pub(crate) use splice::Spliced;

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

#[cfg(test)]
mod tests {
    use super::*;
    use base64::Engine;
    use http_body::Frame;
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
