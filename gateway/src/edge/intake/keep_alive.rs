//! Keeping an HTTP/1 connection usable after a refusal that left the
//! request body unread.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::Request;
use axum::response::Response;
use bytes::Bytes;
use http::HeaderValue;
use http_body_util::BodyExt;

/// Most request body bytes read and discarded after a response that did
/// not read them (a refusal), so the connection can carry the next request.
pub(crate) const DRAIN_MAX_BYTES: usize = 64 * 1024;
/// Longest wait for the rest of such a body.
pub(super) const DRAIN_TIME: Duration = Duration::from_secs(1);

/// Keeps an HTTP/1 connection usable after a response that left the
/// request body unread (401, 403, 404, 400, 413 … before the body): hyper
/// then closes the connection if the rest of the body is not already in
/// its buffer, without saying so, and the client's next request on it
/// fails ("server disconnected"; a client that sends the body a moment
/// after the headers loses every one). So the rest of a small body
/// (up to [`DRAIN_MAX_BYTES`], within a second) is read and discarded
/// before the response goes; a larger or slower one, or one the client
/// holds back for `Expect: 100-continue`, is not read and the response
/// says `Connection: close`. HTTP/2 resets the stream alone.
pub(crate) async fn keep_alive_after_refusal(
    req: Request,
    next: axum::middleware::Next,
) -> Response {
    if req.version() >= http::Version::HTTP_2 {
        return next.run(req).await;
    }
    let (parts, body) = req.into_parts();
    if http_body::Body::is_end_stream(&body) {
        return next.run(Request::from_parts(parts, body)).await;
    }
    let holds_back = parts
        .headers
        .get(http::header::EXPECT)
        .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"100-continue"));
    let declared = parts
        .headers
        .get(http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    let slot = Arc::new(std::sync::Mutex::new(Lent {
        body: Some(body),
        ended: false,
    }));
    let req = Request::from_parts(parts, Body::new(Borrowed(slot.clone())));
    let mut res = next.run(req).await;
    let rest = {
        let mut lent = slot.lock().unwrap_or_else(|p| p.into_inner());
        if lent.ended {
            None
        } else {
            lent.body.take()
        }
    };
    let Some(rest) = rest else {
        return res;
    };
    if http_body::Body::is_end_stream(&rest) {
        return res;
    }
    let drained =
        !holds_back && declared.is_none_or(|n| n <= DRAIN_MAX_BYTES as u64) && drain(rest).await;
    if !drained {
        res.headers_mut()
            .insert(http::header::CONNECTION, HeaderValue::from_static("close"));
    }
    res
}

/// Reads and discards `body` to its end; `false` past the byte or time
/// bound, or on an error.
pub(super) async fn drain(body: Body) -> bool {
    let read = async {
        let mut body = body;
        let mut seen = 0usize;
        while let Some(frame) = body.frame().await {
            let Ok(frame) = frame else {
                return false;
            };
            if let Some(data) = frame.data_ref() {
                seen += data.len();
                if seen > DRAIN_MAX_BYTES {
                    return false;
                }
            }
        }
        true
    };
    tokio::time::timeout(DRAIN_TIME, read)
        .await
        .unwrap_or(false)
}

/// The request body, lent to the handler: what it leaves unread comes
/// back to [`keep_alive_after_refusal`].
pub(super) struct Lent {
    body: Option<Body>,
    ended: bool,
}

pub(super) struct Borrowed(Arc<std::sync::Mutex<Lent>>);

impl http_body::Body for Borrowed {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Bytes>, axum::Error>>> {
        let mut lent = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let Some(body) = lent.body.as_mut() else {
            return std::task::Poll::Ready(None);
        };
        let polled = std::pin::Pin::new(body).poll_frame(cx);
        if matches!(polled, std::task::Poll::Ready(None)) {
            lent.ended = true;
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        let lent = self.0.lock().unwrap_or_else(|p| p.into_inner());
        lent.ended || lent.body.as_ref().is_none_or(|b| b.is_end_stream())
    }

    fn size_hint(&self) -> http_body::SizeHint {
        let lent = self.0.lock().unwrap_or_else(|p| p.into_inner());
        lent.body
            .as_ref()
            .map_or_else(|| http_body::SizeHint::with_exact(0), |b| b.size_hint())
    }
}
