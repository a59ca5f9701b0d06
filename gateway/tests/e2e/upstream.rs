//! The test upstream: an axum server on 127.0.0.1:0 that records every
//! request it receives (raw path and query as they arrived on the wire) and
//! answers by path.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Router;
use serde_json::{json, Value};

/// One request as the upstream saw it.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub method: String,
    /// Raw path, percent-encoding preserved.
    pub path: String,
    pub query: Option<String>,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Recorded {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

/// The exact bytes served by `/image`.
pub const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89\xff\x00";

/// Size of `/big`: just over the default 10 MiB cap.
pub const BIG: usize = 10 * 1024 * 1024 + 1;

#[derive(Clone, Default)]
struct Inner {
    requests: Arc<Mutex<Vec<Recorded>>>,
    tokens_issued: Arc<AtomicUsize>,
}

pub struct TestUpstream {
    pub url: String,
    inner: Inner,
}

impl TestUpstream {
    pub async fn start() -> TestUpstream {
        let inner = Inner::default();
        let app = Router::new().fallback(handle).with_state(inner.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        TestUpstream { url, inner }
    }

    /// Requests received so far, token endpoint excluded.
    pub fn requests(&self) -> Vec<Recorded> {
        self.inner
            .requests
            .lock()
            .unwrap()
            .iter()
            .filter(|r| r.path != "/token")
            .cloned()
            .collect()
    }

    pub fn count(&self) -> usize {
        self.requests().len()
    }

    pub fn last(&self) -> Recorded {
        self.requests()
            .pop()
            .expect("the upstream received no request")
    }

    pub fn tokens_issued(&self) -> usize {
        self.inner.tokens_issued.load(Ordering::SeqCst)
    }
}

async fn handle(State(inner): State<Inner>, req: Request) -> Response {
    let (parts, body) = req.into_parts();
    let body = axum::body::to_bytes(body, 64 * 1024 * 1024)
        .await
        .unwrap_or_default();
    let rec = Recorded {
        method: parts.method.to_string(),
        path: parts.uri.path().to_string(),
        query: parts.uri.query().map(str::to_string),
        headers: parts.headers.clone(),
        body: body.clone(),
    };
    inner.requests.lock().unwrap().push(rec.clone());
    // `/base/...` routes like `/...`, for upstreams whose base URL has a path.
    let path = rec.path.strip_prefix("/base").unwrap_or(&rec.path);
    match path {
        "/token" => {
            let n = inner.tokens_issued.fetch_add(1, Ordering::SeqCst) + 1;
            // `scope=short` asks for a token that lives one second.
            let life = if rec.body.windows(11).any(|w| w == b"scope=short") { 1 } else { 3600 };
            // Slow enough that concurrent callers pile up behind a refresh.
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            json_response(
                StatusCode::OK,
                json!({"access_token": format!("tok-{n}"), "token_type": "Bearer", "expires_in": life}),
            )
        }
        "/pets/7" => json_response(StatusCode::OK, json!({"id": 7, "name": "rex"})),
        "/pets/404" => Response::builder()
            .status(404)
            .header("content-type", "application/problem+json")
            .body(Body::from(
                json!({"type": "about:blank", "title": "Pet not found", "status": 404, "detail": "no pet with id 404"})
                    .to_string(),
            ))
            .unwrap(),
        "/pets/500" => json_response(StatusCode::INTERNAL_SERVER_ERROR, json!({"message": "boom"})),
        "/pets/bad" => json_response(StatusCode::OK, json!({"id": "not-an-integer"})),
        "/teapot" => (StatusCode::IM_A_TEAPOT, "I'm a teapot, not a coffee machine").into_response(),
        "/empty" => StatusCode::NO_CONTENT.into_response(),
        "/image" => Response::builder()
            .header("content-type", "image/png")
            .body(Body::from(PNG))
            .unwrap(),
        "/big" => {
            // Streamed without Content-Length so only the running count
            // can stop it.
            let chunk = Bytes::from(vec![b'x'; 64 * 1024]);
            let n = BIG.div_ceil(chunk.len());
            let stream = futures::stream::iter((0..n).map(move |_| Ok::<_, std::io::Error>(chunk.clone())));
            Response::builder()
                .header("content-type", "text/plain")
                .body(Body::from_stream(stream))
                .unwrap()
        }
        "/slow" => {
            tokio::time::sleep(std::time::Duration::from_millis(300)).await;
            json_response(StatusCode::OK, json!({"slow": true}))
        }
        _ => json_response(StatusCode::OK, echo(&rec)),
    }
}

fn echo(r: &Recorded) -> Value {
    json!({
        "method": r.method,
        "path": r.path,
        "query": r.query,
        "body": String::from_utf8_lossy(&r.body),
    })
}

fn json_response(status: StatusCode, v: Value) -> Response {
    (
        status,
        [("content-type", "application/json")],
        v.to_string(),
    )
        .into_response()
}
