//! API keys from a mounted file, followed as it changes.
//!
//! The file maps names to keys; the name is the caller's subject:
//!
//! ```yaml
//! ci-bot: 3q2+7w8s9x0z1y2v4u5t6r7p   # name: key
//! ops-team:                           # or with scopes for access rules
//!   key: Zm9vYmFyYmF6cXV4cXV1eGNvcmdl
//!   scopes: [pets.read, pets.write]
//! ```
//!
//! A presented key is hashed (SHA-256) and compared with every stored
//! key's hash in constant time (`subtle`), so neither the comparison nor
//! its position in the file tells an attacker how close a guess was.
//!
//! A file that does not parse at start-up is fatal; once running, the last
//! good keys keep serving and the error is logged, naming the file (never
//! a key: parse errors are reduced to their line and column).

use std::collections::BTreeMap;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arc_swap::ArcSwap;
use serde::Deserialize;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;
use tokio_util::sync::CancellationToken;

use crate::file_watch::{FileChange, FileWatch, WatchOptions};

/// Shortest key accepted: shorter ones are guessable.
pub(crate) const MIN_KEY_BYTES: usize = 16;
/// Largest key file read.
const MAX_FILE_BYTES: usize = 1024 * 1024;

/// One key.
#[derive(Debug)]
pub(crate) struct ApiKey {
    pub name: String,
    pub scopes: BTreeSet<String>,
    digest: [u8; 32],
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Entry {
    Key(String),
    Full {
        key: String,
        #[serde(default)]
        scopes: Vec<String>,
    },
}

/// The keys in force.
pub(crate) struct ApiKeys {
    path: PathBuf,
    keys: ArcSwap<Vec<ApiKey>>,
}

impl std::fmt::Debug for ApiKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiKeys")
            .field("path", &self.path)
            .field("keys", &self.keys.load().len())
            .finish()
    }
}

impl ApiKeys {
    /// Reads `path` (an error is fatal) and follows it until `cancel`.
    pub(crate) fn load_and_follow(
        path: &Path,
        watch: WatchOptions,
        cancel: CancellationToken,
    ) -> Result<Arc<Self>, String> {
        let bytes = read(path)?;
        let keys = parse(&bytes)?;
        tracing::info!(file = %path.display(), keys = keys.len(), "API keys loaded");
        let me = Arc::new(ApiKeys {
            path: path.to_path_buf(),
            keys: ArcSwap::from_pointee(keys),
        });
        let follow = me.clone();
        let w = FileWatch::after(path.to_path_buf(), watch, Some(&bytes));
        tokio::spawn(w.run(cancel, move |change| {
            follow.changed(change);
            async {}
        }));
        Ok(me)
    }

    fn changed(&self, change: FileChange) {
        let file = self.path.display();
        match change {
            FileChange::Content(bytes) => match parse(&bytes) {
                Ok(keys) => {
                    tracing::info!(%file, keys = keys.len(), "API keys reloaded");
                    self.keys.store(Arc::new(keys));
                }
                Err(e) => {
                    tracing::error!(%file, error = %e, "API key file is invalid; keeping the keys loaded before")
                }
            },
            FileChange::Gone => {
                tracing::error!(%file, "API key file is gone; keeping the keys loaded before")
            }
            FileChange::Unreadable(e) => {
                tracing::error!(%file, error = %e, "API key file cannot be read; keeping the keys loaded before")
            }
        }
    }

    /// The key `presented` is, if any.
    pub(crate) fn check(&self, presented: &str) -> Option<(String, BTreeSet<String>)> {
        let digest: [u8; 32] = Sha256::digest(presented.as_bytes()).into();
        let keys = self.keys.load();
        let mut found = None;
        // Every key is compared, matched or not.
        for k in keys.iter() {
            if bool::from(k.digest.ct_eq(&digest)) {
                found = Some((k.name.clone(), k.scopes.clone()));
            }
        }
        found
    }
}

fn read(path: &Path) -> Result<Vec<u8>, String> {
    let meta = std::fs::metadata(path).map_err(|e| format!("{}: {e}", path.display()))?;
    if meta.len() > MAX_FILE_BYTES as u64 {
        return Err(format!(
            "{}: larger than {MAX_FILE_BYTES} bytes",
            path.display()
        ));
    }
    std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))
}

/// Parses the key file. Errors never quote the file's content.
fn parse(bytes: &[u8]) -> Result<Vec<ApiKey>, String> {
    if bytes.len() > MAX_FILE_BYTES {
        return Err(format!("larger than {MAX_FILE_BYTES} bytes"));
    }
    let text = std::str::from_utf8(bytes).map_err(|_| "not UTF-8".to_string())?;
    if text.trim().is_empty() {
        return Ok(Vec::new());
    }
    let entries: BTreeMap<String, Entry> = yaml_serde::from_str(text).map_err(|e| {
        // NB: serde messages quote offending values, which may be keys.
        let at = e
            .location()
            .map(|l| format!(" (line {}, column {})", l.line(), l.column()))
            .unwrap_or_default();
        format!("not a map of name: key or name: {{key, scopes}}{at}")
    })?;
    let mut out: Vec<ApiKey> = Vec::with_capacity(entries.len());
    for (name, entry) in entries {
        let (key, scopes) = match entry {
            Entry::Key(k) => (k, Vec::new()),
            Entry::Full { key, scopes } => (key, scopes),
        };
        if name.is_empty() {
            return Err("a key has an empty name".into());
        }
        if key.len() < MIN_KEY_BYTES {
            return Err(format!("key {name:?}: shorter than {MIN_KEY_BYTES} bytes"));
        }
        let digest: [u8; 32] = Sha256::digest(key.as_bytes()).into();
        if let Some(other) = out.iter().find(|k| k.digest == digest) {
            return Err(format!(
                "keys {:?} and {name:?} are the same key",
                other.name
            ));
        }
        out.push(ApiKey {
            name,
            scopes: scopes.into_iter().collect(),
            digest,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_entry_forms_parse_and_match() {
        let keys = parse(
            b"bot: aaaaaaaaaaaaaaaaaaaa\nops: {key: bbbbbbbbbbbbbbbbbbbb, scopes: [pets.read]}\n",
        )
        .unwrap();
        let k = ApiKeys {
            path: "x".into(),
            keys: ArcSwap::from_pointee(keys),
        };
        assert_eq!(k.check("aaaaaaaaaaaaaaaaaaaa").unwrap().0, "bot");
        let (name, scopes) = k.check("bbbbbbbbbbbbbbbbbbbb").unwrap();
        assert_eq!((name.as_str(), scopes.len()), ("ops", 1));
        assert!(k.check("aaaaaaaaaaaaaaaaaaab").is_none());
        assert!(k.check("").is_none());
    }

    #[test]
    fn errors_never_quote_a_key() {
        for bad in [
            "bot: [secret-value-123456789]\n",
            "bot: {key: 1234567890123456789}\n",
            "- secret-value-123456789\n",
            "bot: tinykey\n",
            "a: secret-value-123456789\nb: secret-value-123456789\n",
        ] {
            let e = parse(bad.as_bytes()).unwrap_err();
            assert!(
                !e.contains("secret-value") && !e.contains("1234567890") && !e.contains("tinykey"),
                "{e}"
            );
        }
    }
}
