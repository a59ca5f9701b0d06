//! Who may see and call an upstream's tools, and how often: the data of
//! `McpUpstream.spec.access` / `spec.rateLimit` (and `upstreams.<prefix>`
//! of the gateway config), shared by the operator, which checks it, and
//! the gateway, which enforces it.
//!
//! The same types are embedded in the McpUpstream schema (feature
//! `schemars`), so the CRD and the gateway config read alike.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

/// Rules granting callers access to an upstream's tools. A caller may see
/// and call a tool when at least one rule grants it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct AccessPolicy {
    /// Any rule that matches grants its tools. Empty: nobody.
    #[cfg_attr(feature = "schemars", schemars(length(max = 64)))]
    pub rules: Vec<AccessRule>,
}

/// One grant: the tools `tools` (narrowed by `readOnly`) to callers that
/// hold every scope in `scopes` and for whom `when` is true.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct AccessRule {
    /// Scopes the caller must all hold. Empty: no scope needed.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    #[cfg_attr(feature = "schemars", schemars(length(max = 64)))]
    pub scopes: Vec<String>,
    /// Globs (`*`, `?`) over tool names without the prefix, e.g.
    /// `get_*`. Default: `["*"]`.
    #[cfg_attr(feature = "schemars", schemars(length(max = 256)))]
    pub tools: Vec<String>,
    /// Only tools annotated `readOnlyHint: true`.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub read_only: bool,
    /// A CEL expression over `subject` (string), `scopes` (list of
    /// strings) and `claims` (map) that must be true, e.g.
    /// `"sre" in claims.groups`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schemars", schemars(length(max = 4096)))]
    pub when: Option<String>,
}

impl Default for AccessRule {
    fn default() -> Self {
        AccessRule {
            scopes: Vec::new(),
            tools: vec!["*".into()],
            read_only: false,
            when: None,
        }
    }
}

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
}

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

    /// Checks `header` (the name's syntax and that it is not reserved).
    pub fn check(&self) -> Result<(), SettingError> {
        let h = &self.header;
        let token = |c: char| c.is_ascii_alphanumeric() || "!#$%&'*+.^_`|~-".contains(c);
        if h.is_empty() || h.len() > 256 || !h.chars().all(token) {
            return Err(SettingError {
                field: "header",
                message: format!("{h:?} is not an HTTP header name"),
            });
        }
        if Self::RESERVED.iter().any(|r| r.eq_ignore_ascii_case(h)) {
            return Err(SettingError {
                field: "header",
                message: format!("{h} is set by the gateway itself; choose another header, e.g. X-Forwarded-User"),
            });
        }
        Ok(())
    }
}

/// A verified caller, as access rules see it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Principal {
    /// `sub` of a token, the name of an API key.
    pub subject: String,
    pub scopes: BTreeSet<String>,
    /// Every claim of the token (an API key has none).
    pub claims: serde_json::Map<String, serde_json::Value>,
}

/// Access to an upstream whose config has no `access` policy.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum DefaultAccess {
    /// Every caller the gateway admitted.
    #[default]
    Allow,
    /// Nobody: each upstream must grant access itself.
    Deny,
}
