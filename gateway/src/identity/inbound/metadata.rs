//! RFC 9728 protected resource metadata: how an MCP client that got a 401
//! finds where to obtain a token.
//!
//! The challenge names the metadata URL (§5.1), which is the resource's
//! origin, then `/.well-known/oauth-protected-resource`, then the
//! resource's path (§3.1): for `https://mcp.example.com/mcp` it is
//! `https://mcp.example.com/.well-known/oauth-protected-resource/mcp`.
//! The gateway serves the document there and at the bare well-known path
//! (clients of earlier MCP revisions ask there), and under any suffix: an
//! ingress may serve the gateway under a path of its own.

use http::HeaderValue;
use serde_json::{json, Value};

/// The metadata of the configured resource.
#[derive(Debug, Clone)]
pub(crate) struct ProtectedResource {
    pub resource: String,
    /// Where the document is served, as clients reach it.
    pub metadata_url: String,
    document: Value,
}

pub(crate) const WELL_KNOWN: &str = "/.well-known/oauth-protected-resource";

impl ProtectedResource {
    /// `resource` as configured (and validated): clients compare it with
    /// the URL they use, so it is published as written.
    pub(crate) fn new(
        resource: &str,
        url: &reqwest::Url,
        authorization_servers: Vec<String>,
        scopes_supported: &[String],
    ) -> Self {
        let path = url.path().trim_end_matches('/');
        let metadata_url = format!("{}{WELL_KNOWN}{path}", url.origin().ascii_serialization());
        let mut document = json!({
            "resource": resource,
            "authorization_servers": authorization_servers,
            "bearer_methods_supported": ["header"],
        });
        if !scopes_supported.is_empty() {
            document["scopes_supported"] = json!(scopes_supported);
        }
        ProtectedResource {
            resource: resource.to_string(),
            metadata_url,
            document,
        }
    }

    pub(crate) fn document(&self) -> &Value {
        &self.document
    }

    /// The `WWW-Authenticate` challenge: with `error="invalid_token"` and
    /// `description` when a token was sent and refused.
    pub(crate) fn challenge(&self, description: Option<&str>) -> HeaderValue {
        // The URL is a serialized `Url`: ASCII, and `"` percent-encoded.
        let mut v = format!("Bearer resource_metadata=\"{}\"", self.metadata_url);
        if let Some(d) = description {
            v.push_str(&format!(
                ", error=\"invalid_token\", error_description=\"{d}\""
            ));
        }
        HeaderValue::from_str(&v).unwrap_or_else(|_| HeaderValue::from_static("Bearer"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_url_inserts_the_well_known_path_before_the_resource_path() {
        let r = |u: &str| {
            ProtectedResource::new(u, &reqwest::Url::parse(u).unwrap(), vec![], &[]).metadata_url
        };
        assert_eq!(
            r("https://mcp.example.com/mcp"),
            "https://mcp.example.com/.well-known/oauth-protected-resource/mcp"
        );
        assert_eq!(
            r("https://mcp.example.com:8443/"),
            "https://mcp.example.com:8443/.well-known/oauth-protected-resource"
        );
        assert_eq!(
            r("http://127.0.0.1:9/a/mcp/"),
            "http://127.0.0.1:9/.well-known/oauth-protected-resource/a/mcp"
        );
    }
}
