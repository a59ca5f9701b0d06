//! Outbound HTTP basics that every client of the gateway shares: calls
//! to upstreams, outbound credentials (OAuth2, token exchange) and the
//! inbound side's key and introspection fetches. A leaf.

/// Installs the `ring` rustls provider once per process (see `host`).
pub use host::install_crypto_provider;

/// A transport error in general terms: the reqwest message carries the URL.
pub(crate) fn describe_transport_error(e: &reqwest::Error) -> String {
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
