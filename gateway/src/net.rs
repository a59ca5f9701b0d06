//! Outbound HTTP basics that every client of the gateway shares: calls
//! to upstreams, outbound credentials (OAuth2, token exchange) and the
//! inbound side's key and introspection fetches. A leaf.

use std::sync::Once;

/// Installs the `ring` rustls provider once per process. reqwest is built
/// without a provider of its own so that only one (ring) is linked.
pub fn install_crypto_provider() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

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
