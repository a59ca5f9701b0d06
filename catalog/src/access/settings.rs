//! Per-upstream settings beside access rules: the per-caller rate limit
//! and the identity forwarded to the upstream.

use serde::{Deserialize, Serialize};

/// Calls per caller (its subject, else its IP address) to one upstream,
/// as a token bucket, enforced by each gateway replica on its own: with N
/// replicas a caller may make up to N times the rate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RateLimit {
    /// Sustained rate, e.g. `0.5` (one call every two seconds). Required;
    /// more than 0, at most 1000000.
    #[cfg_attr(
        feature = "schemars",
        schemars(
            range(max = MAX_REQUESTS_PER_SECOND),
            extend("minimum" = 0, "exclusiveMinimum" = true)
        )
    )]
    pub requests_per_second: f64,
    /// Calls allowed at once above the rate. Optional; absent means the
    /// rate rounded up, at least 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schemars", schemars(range(min = 1, max = MAX_BURST)))]
    pub burst: Option<u32>,
}

/// Upper bound of [`RateLimit::requests_per_second`]: beyond it a limit
/// limits nothing, and the bucket's period would round to zero.
pub const MAX_REQUESTS_PER_SECOND: f64 = 1_000_000.0;
/// Upper bound of [`RateLimit::burst`].
pub const MAX_BURST: u32 = 1_000_000;

/// A setting that is out of range, and which field (relative to the
/// setting, e.g. `requestsPerSecond`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct SettingError {
    pub field: &'static str,
    pub message: String,
}

impl RateLimit {
    /// Checks the bounds the schema states, for configs that did not go
    /// through it (the gateway config file).
    pub fn check(&self) -> Result<(), SettingError> {
        let rps = self.requests_per_second;
        if !(rps.is_finite() && rps > 0.0 && rps <= MAX_REQUESTS_PER_SECOND) {
            return Err(SettingError {
                field: "requestsPerSecond",
                message: format!("{rps} is not more than 0 and at most {MAX_REQUESTS_PER_SECOND}"),
            });
        }
        if let Some(b) = self.burst {
            if !(1..=MAX_BURST).contains(&b) {
                return Err(SettingError {
                    field: "burst",
                    message: format!("{b} is not between 1 and {MAX_BURST}"),
                });
            }
        }
        Ok(())
    }

    /// The burst, default applied (after [`RateLimit::check`]).
    pub fn effective_burst(&self) -> u32 {
        self.burst
            .unwrap_or_else(|| self.requests_per_second.ceil().clamp(1.0, MAX_BURST as f64) as u32)
    }
}

/// Sends the verified caller's subject to the upstream in a header.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ForwardIdentity {
    /// The header, e.g. `X-Forwarded-User`. Whatever the client or the
    /// settings put in it is replaced, so a client cannot forge it; without
    /// a verified caller (no inbound authentication) it is removed. Not one
    /// of the headers the gateway sets itself (`Authorization`, `Host`,
    /// `Content-Type`, ...). Required.
    #[cfg_attr(
        feature = "schemars",
        schemars(length(min = 1, max = 256), pattern(HEADER_NAME_PATTERN))
    )]
    pub header: String,
    /// A second header carrying who vouched for the subject: the issuer's
    /// URL for JWTs and introspected tokens, `api-key` for API keys. A
    /// subject names a person only together with its issuer; set this
    /// whenever the gateway trusts more than one issuer (or issuers and
    /// API keys), and have the upstream key on both headers. Same rules
    /// as `header`, and not the same header.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "schemars",
        schemars(length(min = 1, max = 256), pattern(HEADER_NAME_PATTERN))
    )]
    pub issuer_header: Option<String>,
}

/// What [`ForwardIdentity::issuer_header`] carries for an API key.
pub const API_KEY_ISSUER: &str = "api-key";

/// An HTTP header name (RFC 9110 `token`), as a schema `pattern`.
pub const HEADER_NAME_PATTERN: &str = "^[!#$%&'*+.^_`|~0-9A-Za-z-]+$";

impl ForwardIdentity {
    /// Headers the gateway or the HTTP client set themselves (credentials,
    /// framing, the body's type): the subject must not replace them.
    pub const RESERVED: &'static [&'static str] = &[
        "authorization",
        "proxy-authorization",
        "cookie",
        "host",
        "content-length",
        "content-type",
        "content-encoding",
        "transfer-encoding",
        "connection",
        "keep-alive",
        "te",
        "trailer",
        "upgrade",
    ];

    /// Checks `header` and `issuerHeader` (the names' syntax, that they
    /// are not reserved, and that they differ).
    pub fn check(&self) -> Result<(), SettingError> {
        Self::check_name("header", &self.header)?;
        if let Some(i) = &self.issuer_header {
            Self::check_name("issuerHeader", i)?;
            if i.eq_ignore_ascii_case(&self.header) {
                return Err(SettingError {
                    field: "issuerHeader",
                    message: format!(
                        "{i} is also `header`: the subject and its issuer need two headers"
                    ),
                });
            }
        }
        Ok(())
    }

    fn check_name(field: &'static str, h: &str) -> Result<(), SettingError> {
        let token = |c: char| c.is_ascii_alphanumeric() || "!#$%&'*+.^_`|~-".contains(c);
        if h.is_empty() || h.len() > 256 || !h.chars().all(token) {
            return Err(SettingError {
                field,
                message: format!("{h:?} is not an HTTP header name"),
            });
        }
        if Self::RESERVED.iter().any(|r| r.eq_ignore_ascii_case(h)) {
            return Err(SettingError {
                field,
                message: format!("{h} is set by the gateway itself; choose another header, e.g. X-Forwarded-User"),
            });
        }
        Ok(())
    }
}
