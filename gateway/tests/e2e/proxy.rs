//! A round-robin HTTP reverse proxy on loopback, standing in for a
//! Kubernetes Service/ingress in front of gateway replicas.
//!
//! Every request goes to the next backend in rotation, whatever its
//! `Mcp-Session-Id` (toolgate's session ids are valid on every replica, so
//! no affinity is configured). Responses, SSE included, are streamed
//! through unbuffered. Backends leave and rejoin the rotation at runtime,
//! like a terminating pod leaving the Endpoints before its SIGTERM. Each
//! forwarded request is logged with its backend, so tests can prove where
//! traffic went.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use tokio_util::sync::CancellationToken;

/// One forwarded request.
#[derive(Debug, Clone)]
pub struct Hit {
    pub backend: String,
    pub http_method: String,
    /// The JSON-RPC method of a POST body, if it has one.
    pub rpc: Option<String>,
    pub session: Option<String>,
}

struct Backend {
    name: String,
    url: String,
    in_rotation: bool,
}

struct Inner {
    backends: Mutex<Vec<Backend>>,
    next: AtomicUsize,
    log: Mutex<Vec<Hit>>,
    client: reqwest::Client,
}

pub struct Proxy {
    pub url: String,
    inner: Arc<Inner>,
    cancel: CancellationToken,
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}

impl Proxy {
    pub async fn start() -> Proxy {
        gateway::net::install_crypto_provider();
        let inner = Arc::new(Inner {
            backends: Mutex::new(Vec::new()),
            next: AtomicUsize::new(0),
            log: Mutex::new(Vec::new()),
            client: reqwest::Client::builder().build().unwrap(),
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let app = axum::Router::new()
            .fallback(forward)
            .with_state(inner.clone());
        let cancel = CancellationToken::new();
        let c = cancel.clone();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(async move { c.cancelled().await })
                .await;
        });
        Proxy { url, inner, cancel }
    }

    /// Adds `name` at `url` to the rotation, or moves it there (a restarted
    /// replica comes back on a new port).
    pub fn add(&self, name: &str, url: &str) {
        let mut b = self.inner.backends.lock().unwrap();
        b.retain(|b| b.name != name);
        b.push(Backend {
            name: name.to_string(),
            url: url.to_string(),
            in_rotation: true,
        });
    }

    /// Takes `name` out of the rotation; requests already forwarded to it
    /// carry on.
    pub fn remove(&self, name: &str) {
        let mut b = self.inner.backends.lock().unwrap();
        for b in b.iter_mut().filter(|b| b.name == name) {
            b.in_rotation = false;
        }
    }

    pub fn hits(&self) -> Vec<Hit> {
        self.inner.log.lock().unwrap().clone()
    }

    /// Forwarded requests per backend matching `f`.
    pub fn count(&self, backend: &str, f: impl Fn(&Hit) -> bool) -> usize {
        self.hits()
            .iter()
            .filter(|h| h.backend == backend && f(h))
            .count()
    }
}

fn pick(inner: &Inner) -> Option<(String, String)> {
    let b = inner.backends.lock().unwrap();
    let live: Vec<&Backend> = b.iter().filter(|b| b.in_rotation).collect();
    if live.is_empty() {
        return None;
    }
    let n = inner.next.fetch_add(1, Ordering::SeqCst) % live.len();
    Some((live[n].name.clone(), live[n].url.clone()))
}

async fn forward(State(inner): State<Arc<Inner>>, req: Request) -> Response {
    let Some((name, base)) = pick(&inner) else {
        return (StatusCode::SERVICE_UNAVAILABLE, "no backend").into_response();
    };
    let (parts, body) = req.into_parts();
    let body = axum::body::to_bytes(body, usize::MAX)
        .await
        .unwrap_or_default();
    let rpc = serde_json::from_slice::<serde_json::Value>(&body)
        .ok()
        .and_then(|v| v.get("method")?.as_str().map(str::to_string));
    let session = parts
        .headers
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    inner.log.lock().unwrap().push(Hit {
        backend: name.clone(),
        http_method: parts.method.to_string(),
        rpc,
        session,
    });
    let path = parts
        .uri
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .to_string();
    let mut out = inner
        .client
        .request(parts.method.clone(), format!("{base}{path}"))
        .body(body);
    for (k, v) in &parts.headers {
        if !is_hop_header(k.as_str()) {
            out = out.header(k, v);
        }
    }
    let resp = match out.send().await {
        Ok(r) => r,
        Err(e) => return (StatusCode::BAD_GATEWAY, format!("{name}: {e}")).into_response(),
    };
    let mut builder = Response::builder().status(resp.status());
    for (k, v) in resp.headers() {
        if !is_hop_header(k.as_str()) {
            builder = builder.header(k, v);
        }
    }
    // Streamed chunk by chunk: SSE events reach the client as they come.
    builder
        .body(Body::from_stream(resp.bytes_stream()))
        .unwrap_or_else(|e| (StatusCode::BAD_GATEWAY, e.to_string()).into_response())
}

fn is_hop_header(name: &str) -> bool {
    matches!(
        name,
        "host" | "connection" | "keep-alive" | "transfer-encoding" | "content-length" | "upgrade"
    )
}
