//! Reading secrets: a [`SecretRef`] names a file, an environment variable,
//! an inline value or a key of the mounted credentials Secret, and
//! [`Resolve`] reads it. A leaf: the config, outbound credentials and
//! inbound introspection all read secrets.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use catalog::runtime::SecretRef;

/// Where `secretKey` references are read from: the operator's credentials
/// Secret, mounted as a volume (one file per key). A mounted Secret is
/// updated in place by the kubelet, and the gateway then needs no RBAC on
/// Secrets at all.
pub const DEFAULT_CREDENTIALS_DIR: &str = "/var/run/toolgate/credentials";

static CREDENTIALS_DIR: OnceLock<PathBuf> = OnceLock::new();

/// Sets the credentials directory once, at start-up (`--credentials-dir`).
pub fn set_credentials_dir(dir: PathBuf) {
    let _ = CREDENTIALS_DIR.set(dir);
}

/// The directory `secretKey` references are read from.
pub fn credentials_dir() -> &'static Path {
    CREDENTIALS_DIR.get_or_init(|| PathBuf::from(DEFAULT_CREDENTIALS_DIR))
}

/// A secret reference that cannot be resolved. Logged by the operator side,
/// never shown to MCP clients.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub(crate) struct SecretError {
    pub field: String,
    pub message: String,
}

/// Reading a [`SecretRef`]'s value: I/O, so it lives here, not with the type.
pub(crate) trait Resolve {
    /// Reads the secret. A file's trailing newline is dropped, as
    /// Kubernetes Secrets written by hand usually carry one.
    fn resolve(&self, field: &str) -> Result<String, SecretError>;
}

impl Resolve for SecretRef {
    fn resolve(&self, field: &str) -> Result<String, SecretError> {
        let err = |message: String| SecretError {
            field: field.to_string(),
            message,
        };
        let read = |path: &Path| {
            std::fs::read_to_string(path)
                .map(|s| s.trim_end_matches(['\n', '\r']).to_string())
                .map_err(|e| err(format!("cannot read {}: {e}", path.display())))
        };
        match (&self.file, &self.env, &self.value, &self.secret_key) {
            (Some(path), None, None, None) => read(path),
            (None, Some(name), None, None) => std::env::var(name)
                .map_err(|_| err(format!("environment variable {name} is not set"))),
            (None, None, Some(v), None) => Ok(v.clone()),
            (None, None, None, Some(key)) => {
                // Keys are config keys (no '/'), so they cannot escape the dir.
                if key.is_empty() || key.contains('/') || key.starts_with('.') {
                    return Err(err(format!("invalid credentials key {key:?}")));
                }
                read(&credentials_dir().join(key))
            }
            _ => Err(err("set exactly one of file, env, value, secretKey".into())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_from_missing_env_names_the_field() {
        let s = SecretRef {
            env: Some("TOOLGATE_TEST_SURELY_UNSET_VAR".into()),
            ..Default::default()
        };
        let e = s.resolve("upstreams.a.auth.token").unwrap_err();
        assert_eq!(e.field, "upstreams.a.auth.token");
    }
}
