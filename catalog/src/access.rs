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
/// as a token bucket, enforced by each gateway replica on its own.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RateLimit {
    /// Sustained rate. Required; more than 0.
    pub requests_per_second: f64,
    /// Calls allowed at once above the rate. Default: the rate, rounded
    /// up, at least 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub burst: Option<u32>,
}

/// Sends the verified caller's subject to the upstream in a header.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ForwardIdentity {
    /// The header, e.g. `X-Forwarded-User`. Whatever the client sent in it
    /// is replaced, so a client cannot forge it.
    pub header: String,
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
