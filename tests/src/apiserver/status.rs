//! API errors rendered as `meta.k8s.io/v1` `Status` objects.
//!
//! Faithful: HTTP code, `reason`, `message` wording for the common cases
//! (NotFound, AlreadyExists, Conflict, Invalid, Gone, MethodNotAllowed,
//! BadRequest, Forbidden) and `details` with name/group/kind and, for Invalid, `causes`.
//! Simplified: `retryAfterSeconds` is never set.

use serde_json::{json, Value};

/// One failure as the Kubernetes API would report it.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    pub code: u16,
    pub reason: &'static str,
    pub message: String,
    pub details: Option<Value>,
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({}): {}", self.code, self.reason, self.message)
    }
}

impl std::error::Error for ApiError {}

/// `configmaps` or `mcpupstreams.toolgate.dev`, the way the API server names
/// a resource in messages.
pub(crate) fn qualified(group: &str, plural: &str) -> String {
    if group.is_empty() {
        plural.to_string()
    } else {
        format!("{plural}.{group}")
    }
}

fn details(group: &str, kind: &str, name: &str) -> Value {
    json!({"name": name, "group": group, "kind": kind})
}

impl ApiError {
    pub fn new(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            code,
            reason,
            message: message.into(),
            details: None,
        }
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }

    pub fn not_found(group: &str, plural: &str, name: &str) -> Self {
        ApiError {
            details: Some(details(group, plural, name)),
            ..Self::new(
                404,
                "NotFound",
                format!("{} \"{name}\" not found", qualified(group, plural)),
            )
        }
    }

    /// A path the server does not serve at all (unknown group, version or
    /// resource type).
    pub fn no_route(path: &str) -> Self {
        Self::new(
            404,
            "NotFound",
            format!("the server could not find the requested resource ({path})"),
        )
    }

    /// What the real server answers when the authorizer (RBAC) denies a
    /// request, in its wording: `secrets "x" is forbidden: User "u" cannot
    /// get resource "secrets" in API group "" in the namespace "ns"`.
    pub fn forbidden(
        user: &str,
        verb: &str,
        group: &str,
        plural: &str,
        name: &str,
        namespace: &str,
    ) -> Self {
        let what = if name.is_empty() {
            qualified(group, plural)
        } else {
            format!("{} \"{name}\"", qualified(group, plural))
        };
        let scope = if namespace.is_empty() {
            "at the cluster scope".to_string()
        } else {
            format!("in the namespace \"{namespace}\"")
        };
        ApiError {
            details: Some(details(group, plural, name)),
            ..Self::new(
                403,
                "Forbidden",
                format!("{what} is forbidden: User \"{user}\" cannot {verb} resource \"{plural}\" in API group \"{group}\" {scope}"),
            )
        }
    }

    pub fn already_exists(group: &str, plural: &str, name: &str) -> Self {
        ApiError {
            details: Some(details(group, plural, name)),
            ..Self::new(
                409,
                "AlreadyExists",
                format!("{} \"{name}\" already exists", qualified(group, plural)),
            )
        }
    }

    pub fn conflict(group: &str, plural: &str, name: &str, why: &str) -> Self {
        ApiError {
            details: Some(details(group, plural, name)),
            ..Self::new(
                409,
                "Conflict",
                format!(
                    "Operation cannot be fulfilled on {} \"{name}\": {why}",
                    qualified(group, plural)
                ),
            )
        }
    }

    /// 403: the request is refused whoever sends it (`why` says why), as
    /// admission refuses content in a terminating namespace.
    pub fn refused(group: &str, plural: &str, name: &str, why: &str) -> Self {
        ApiError {
            details: Some(details(group, plural, name)),
            ..Self::new(
                403,
                "Forbidden",
                format!(
                    "{} \"{name}\" is forbidden: {why}",
                    qualified(group, plural)
                ),
            )
        }
    }

    pub fn modified(group: &str, plural: &str, name: &str) -> Self {
        Self::conflict(
            group,
            plural,
            name,
            "the object has been modified; please apply your changes to the latest version and try again",
        )
    }

    /// 422 with one cause per field error; `causes` are `(field, message)`.
    pub fn invalid(group: &str, kind: &str, name: &str, causes: &[(String, String)]) -> Self {
        let list: Vec<String> = causes
            .iter()
            .map(|(field, msg)| {
                if field.is_empty() {
                    msg.clone()
                } else {
                    format!("{field}: {msg}")
                }
            })
            .collect();
        let joined = if list.len() == 1 {
            list[0].clone()
        } else {
            format!("[{}]", list.join(", "))
        };
        let kind_group = if group.is_empty() {
            kind.to_string()
        } else {
            format!("{kind}.{group}")
        };
        let mut d = details(group, kind, name);
        d["causes"] = causes
            .iter()
            .map(|(field, msg)| json!({"reason": "FieldValueInvalid", "message": msg, "field": field}))
            .collect();
        ApiError {
            details: Some(d),
            ..Self::new(
                422,
                "Invalid",
                format!("{kind_group} \"{name}\" is invalid: {joined}"),
            )
        }
    }

    pub fn gone(message: impl Into<String>) -> Self {
        Self::new(410, "Expired", message)
    }

    pub fn method_not_allowed(message: impl Into<String>) -> Self {
        Self::new(405, "MethodNotAllowed", message)
    }

    pub fn unsupported_media_type(content_type: &str) -> Self {
        Self::new(
            415,
            "UnsupportedMediaType",
            format!("the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml, application/strategic-merge-patch+json (got {content_type:?})"),
        )
    }

    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(500, "InternalError", message)
    }

    /// The `Status` object sent as the response body or inside a watch
    /// `ERROR` event.
    pub fn to_status(&self) -> Value {
        let mut status = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        if let Some(d) = &self.details {
            status["details"] = d.clone();
        }
        status
    }
}
