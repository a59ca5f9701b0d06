//! Talking to identity providers: one HTTP client with timeouts, and
//! response bodies read no further than a cap, so a misbehaving or
//! compromised endpoint cannot make the gateway buffer without end.

use std::time::Duration;

use bytes::{Bytes, BytesMut};

/// Whole request, body included.
pub(crate) const TIMEOUT: Duration = Duration::from_secs(10);
/// Largest discovery document or JWKS read.
pub(crate) const MAX_DOCUMENT_BYTES: usize = 1024 * 1024;
/// Largest introspection answer read.
pub(crate) const MAX_INTROSPECTION_BYTES: usize = 64 * 1024;

/// The client for discovery, JWKS and introspection.
pub(crate) fn client() -> Result<reqwest::Client, String> {
    crate::net::install_crypto_provider();
    reqwest::Client::builder()
        .timeout(TIMEOUT)
        .connect_timeout(TIMEOUT.min(Duration::from_secs(5)))
        // NB: an IdP that redirects its JWKS elsewhere is misconfigured;
        // following it would let whoever controls the redirect target
        // choose the keys tokens are verified with.
        .redirect(reqwest::redirect::Policy::none())
        .user_agent(concat!("toolgate/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| format!("http client: {e}"))
}

/// Why a fetch failed: said in logs, never to clients.
#[derive(Debug, thiserror::Error)]
pub(crate) enum FetchError {
    #[error("request failed: {0}")]
    Request(String),
    #[error("answered HTTP {0}")]
    Status(u16),
    #[error("answer larger than {0} bytes")]
    TooLarge(usize),
    #[error("answer is not the expected JSON: {0}")]
    Json(String),
}

/// Reads `resp`'s body, refusing a non-2xx status and anything past `cap`
/// bytes (a larger `Content-Length` is refused unread).
pub(crate) async fn body(mut resp: reqwest::Response, cap: usize) -> Result<Bytes, FetchError> {
    if !resp.status().is_success() {
        return Err(FetchError::Status(resp.status().as_u16()));
    }
    if resp.content_length().is_some_and(|n| n > cap as u64) {
        return Err(FetchError::TooLarge(cap));
    }
    let mut out = BytesMut::new();
    while let Some(chunk) = resp
        .chunk()
        .await
        .map_err(|e| FetchError::Request(e.without_url().to_string()))?
    {
        if out.len() + chunk.len() > cap {
            return Err(FetchError::TooLarge(cap));
        }
        out.extend_from_slice(&chunk);
    }
    Ok(out.freeze())
}

/// GETs `url` and parses its JSON answer.
pub(crate) async fn get_json<T: serde::de::DeserializeOwned>(
    client: &reqwest::Client,
    url: &reqwest::Url,
) -> Result<T, FetchError> {
    let resp = client
        .get(url.clone())
        .header(http::header::ACCEPT, "application/json")
        .send()
        .await
        .map_err(|e| FetchError::Request(e.without_url().to_string()))?;
    let bytes = body(resp, MAX_DOCUMENT_BYTES).await?;
    serde_json::from_slice(&bytes).map_err(|e| FetchError::Json(e.to_string()))
}
