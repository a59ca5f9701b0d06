//! The upstream call: one pooled `reqwest` client per upstream, a timeout
//! covering the whole exchange, a hard cap on the response body, and an
//! optional concurrency limit.
//!
//! The body is read chunk by chunk and the read stops as soon as it passes
//! the cap (the connection is dropped), so a hostile or broken upstream can
//! cost at most `maxResponseBytes` of memory per call. Redirects are not
//! followed: a 3xx could point outside the upstream's base URL, so it takes
//! the "unexpected status" path instead.

use std::sync::{Arc, Once};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use http::{HeaderMap, HeaderName, HeaderValue};
use reqwest::Url;
use tokio::sync::Semaphore;

use crate::auth::{Auth, AuthError};
use crate::config::{
    ResponseValidation, SecretError, UpstreamConfig, DEFAULT_ERROR_STATUS,
    DEFAULT_MAX_RESPONSE_BYTES, DEFAULT_SUCCESS_STATUS, DEFAULT_TIMEOUT_SECONDS,
};
use crate::request::{PreparedRequest, RequestBody};

/// Installs the `ring` rustls provider once per process. reqwest is built
/// without a provider of its own so that only one (ring) is linked.
pub fn install_crypto_provider() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

/// Everything needed to call one upstream. Shared by snapshots: a reload
/// that leaves an upstream's settings alone keeps its connection pool and
/// its cached OAuth2 token.
#[derive(Debug)]
pub struct UpstreamRuntime {
    pub prefix: String,
    pub base_url: Url,
    client: reqwest::Client,
    auth: Auth,
    headers: HeaderMap,
    pub timeout: Duration,
    pub max_response_bytes: u64,
    semaphore: Option<Arc<Semaphore>>,
    success_status: Vec<u16>,
    error_status: Vec<u16>,
    pub response_validation: ResponseValidation,
}

/// A complete upstream response (body within the cap).
#[derive(Debug, Clone)]
pub struct UpstreamResponse {
    pub status: u16,
    /// `Content-Type` without parameters, lower-cased.
    pub media_type: Option<String>,
    pub body: Bytes,
}

/// Where a status goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatusClass {
    Success,
    Error,
    Unexpected,
}

/// A call that produced no usable response. Shown to callers: it says what
/// happened, never where (no URL, no address).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UpstreamError {
    #[error("upstream did not answer within {0:?}")]
    Timeout(Duration),
    #[error("could not reach the upstream: {0}")]
    Unreachable(String),
    #[error("upstream response exceeds the limit of {limit} bytes")]
    TooLarge { limit: u64 },
    #[error(transparent)]
    Auth(#[from] AuthError),
}

/// An upstream setting that is not usable. Never shown to MCP clients.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct RuntimeError {
    pub field: String,
    pub message: String,
}

impl From<SecretError> for RuntimeError {
    fn from(e: SecretError) -> Self {
        RuntimeError {
            field: e.field,
            message: e.message,
        }
    }
}

impl UpstreamRuntime {
    /// Builds the runtime of upstream `prefix`, resolving its secrets.
    pub fn new(prefix: &str, base_url: Url, cfg: &UpstreamConfig) -> Result<Self, RuntimeError> {
        install_crypto_provider();
        let field = |f: &str| format!("upstreams.{prefix}.{f}");
        let bad = |f: &str, m: String| RuntimeError {
            field: field(f),
            message: m,
        };
        if !matches!(base_url.scheme(), "http" | "https") || base_url.cannot_be_a_base() {
            return Err(bad(
                "baseUrl",
                format!("{base_url} is not an http(s) base URL"),
            ));
        }
        let secs = cfg.timeout_seconds.unwrap_or(DEFAULT_TIMEOUT_SECONDS);
        if !(secs.is_finite() && secs > 0.0 && secs <= 86_400.0) {
            return Err(bad(
                "timeoutSeconds",
                format!("{secs} is not a positive duration"),
            ));
        }
        let timeout = Duration::from_secs_f64(secs);
        let client = reqwest::Client::builder()
            .timeout(timeout)
            .connect_timeout(timeout.min(Duration::from_secs(10)))
            .redirect(reqwest::redirect::Policy::none())
            .pool_idle_timeout(Duration::from_secs(90))
            .user_agent(concat!("toolgate/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| bad("", format!("http client: {e}")))?;
        let auth = Auth::from_config(&cfg.auth, &field("auth"), client.clone())?;
        let mut headers = HeaderMap::new();
        for (k, v) in &cfg.headers {
            let name = HeaderName::from_bytes(k.as_bytes())
                .map_err(|_| bad("headers", format!("'{k}' is not a header name")))?;
            let value = HeaderValue::from_str(v)
                .map_err(|_| bad("headers", format!("value of '{k}' is not a header value")))?;
            headers.insert(name, value);
        }
        if cfg.max_concurrency == Some(0) {
            return Err(bad("maxConcurrency", "must be at least 1".into()));
        }
        Ok(UpstreamRuntime {
            prefix: prefix.to_string(),
            base_url,
            client,
            auth,
            headers,
            timeout,
            max_response_bytes: cfg.max_response_bytes.unwrap_or(DEFAULT_MAX_RESPONSE_BYTES),
            semaphore: cfg.max_concurrency.map(|n| Arc::new(Semaphore::new(n))),
            success_status: cfg
                .success_status
                .clone()
                .unwrap_or_else(|| DEFAULT_SUCCESS_STATUS.to_vec()),
            error_status: cfg
                .error_status
                .clone()
                .unwrap_or_else(|| DEFAULT_ERROR_STATUS.to_vec()),
            response_validation: cfg.response_validation,
        })
    }

    pub fn classify(&self, status: u16) -> StatusClass {
        if self.success_status.contains(&status) {
            StatusClass::Success
        } else if self.error_status.contains(&status) {
            StatusClass::Error
        } else {
            StatusClass::Unexpected
        }
    }

    /// Sends the request and reads the whole body, within the cap.
    pub async fn send(
        &self,
        prepared: PreparedRequest,
        with_auth: bool,
    ) -> Result<UpstreamResponse, UpstreamError> {
        let _permit = match &self.semaphore {
            Some(s) => s.clone().acquire_owned().await.ok(),
            None => None,
        };
        let mut req = self.to_reqwest(prepared);
        if with_auth {
            self.auth.apply(&mut req).await?;
        }
        let resp = self
            .client
            .execute(req)
            .await
            .map_err(|e| self.transport_error(&e))?;
        let status = resp.status().as_u16();
        let media_type = resp
            .headers()
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(|s| {
                s.split(';')
                    .next()
                    .unwrap_or("")
                    .trim()
                    .to_ascii_lowercase()
            })
            .filter(|s| !s.is_empty());
        let limit = self.max_response_bytes;
        if resp.content_length().is_some_and(|n| n > limit) {
            return Err(UpstreamError::TooLarge { limit });
        }
        let mut resp = resp;
        let mut buf = BytesMut::new();
        while let Some(chunk) = resp.chunk().await.map_err(|e| self.transport_error(&e))? {
            if (buf.len() + chunk.len()) as u64 > limit {
                return Err(UpstreamError::TooLarge { limit });
            }
            buf.extend_from_slice(&chunk);
        }
        Ok(UpstreamResponse {
            status,
            media_type,
            body: buf.freeze(),
        })
    }

    fn to_reqwest(&self, p: PreparedRequest) -> reqwest::Request {
        let mut req = reqwest::Request::new(p.method, p.url);
        let h = req.headers_mut();
        for (k, v) in p.headers {
            h.append(k, v);
        }
        for (k, v) in &self.headers {
            h.insert(k.clone(), v.clone());
        }
        match p.body {
            RequestBody::Empty => {}
            RequestBody::Bytes { content_type, data } => {
                if let Ok(ct) = HeaderValue::from_str(&content_type) {
                    h.insert(http::header::CONTENT_TYPE, ct);
                }
                *req.body_mut() = Some(data.into());
            }
            RequestBody::Multipart(fields) => {
                let mut form = reqwest::multipart::Form::new();
                for f in fields {
                    let mut part = reqwest::multipart::Part::bytes(f.data);
                    if let Some(name) = f.filename {
                        part = part.file_name(name);
                    }
                    if let Some(ct) = f.content_type {
                        part = match part.mime_str(&ct) {
                            Ok(p) => p,
                            Err(_) => reqwest::multipart::Part::bytes(Vec::new()),
                        };
                    }
                    form = form.part(f.name, part);
                }
                if let Ok(ct) = HeaderValue::from_str(&format!(
                    "multipart/form-data; boundary={}",
                    form.boundary()
                )) {
                    req.headers_mut().insert(http::header::CONTENT_TYPE, ct);
                }
                *req.body_mut() = Some(reqwest::Body::wrap_stream(form.into_stream()));
            }
        }
        req
    }

    fn transport_error(&self, e: &reqwest::Error) -> UpstreamError {
        if e.is_timeout() {
            UpstreamError::Timeout(self.timeout)
        } else {
            UpstreamError::Unreachable(describe_transport_error(e))
        }
    }
}

/// A transport error in general terms: the reqwest message carries the URL.
pub fn describe_transport_error(e: &reqwest::Error) -> String {
    if e.is_timeout() {
        "timed out".into()
    } else if e.is_connect() {
        "connection failed".into()
    } else if e.is_body() || e.is_decode() {
        "connection broke while reading the response".into()
    } else {
        "request failed".into()
    }
}

/// The text of a body for messages: UTF-8 (lossy), at most `max` chars.
pub fn excerpt(body: &[u8], max: usize) -> String {
    let text = String::from_utf8_lossy(&body[..body.len().min(max * 4)]);
    crate::validate::truncate(text.trim(), max)
}
