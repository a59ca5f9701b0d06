//! The response body that finds markers as the message streams out and
//! hands each to a [`Render`](super::Render).

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use http_body::{Body, Frame, SizeHint};
use memchr::memmem::Finder;

use super::{table, As, Render};

/// Longest marker after its prefix: up to 20 digits and `-v":0}`.
pub(super) const MARKER_TAIL: usize = 26;

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
pub(super) enum Scan {
    /// Pass on this many bytes as they are.
    Literal(usize),
    /// A marker of this many bytes: replace it.
    Marker { len: usize, id: u64, want: As },
    /// Maybe the start of a marker: need more bytes to tell.
    NeedMore,
}

/// `buf` at a marker's prefix (`"tg-payload-<secret>-`, found by `finder`),
/// opened by `{` for a value marker.
pub(super) fn scan(finder: &Finder<'_>, buf: &[u8], at_end: bool) -> Scan {
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
pub(super) fn marker(tail: &[u8], head: usize, end: &[u8], want: As, at_end: bool) -> Scan {
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
