//! What one upstream's inputs make: the key they are compiled under, the
//! compile itself, and the version served (reused while the key holds).

use std::collections::BTreeMap;
use std::sync::Arc;

use catalog::{Overlay, UpstreamCatalog, UpstreamSource};
use sha2::{Digest, Sha256};

use super::LocalError;
use crate::config::UpstreamConfig;

/// An upstream as served: its tools and how to reach it, replaced together.
#[derive(Clone)]
pub(super) struct Version {
    /// sha256 of everything the catalog was compiled from.
    pub(super) input_hash: String,
    pub(super) document: String,
    pub(super) catalog: Arc<UpstreamCatalog>,
    pub(super) runtime: UpstreamConfig,
    /// See [`Compiled::refused`].
    pub(super) refused: Option<catalog::NameConflicts>,
}

/// One upstream's inputs, read.
pub(super) struct Inputs {
    pub(super) document: String,
    pub(super) spec: Vec<u8>,
    /// `(path, bytes)`, in order.
    pub(super) overlays: Vec<(String, Vec<u8>)>,
    pub(super) options: catalog::CompileOptions,
}

impl Inputs {
    /// The compile's key ([`catalog::input_hash`]).
    pub(super) fn hash(&self, prefix: &str, strict: bool) -> String {
        let overlays: Vec<_> = self
            .overlays
            .iter()
            .map(|(name, bytes)| catalog::OverlayInput {
                name,
                bytes,
                strict,
            })
            .collect();
        catalog::input_hash(prefix, &self.document, &self.spec, &overlays, &self.options)
    }

    /// Compiles, off the async workers (it is CPU-bound); for a `lint`,
    /// name conflicts are returned beside the catalog instead of failing
    /// ([`catalog::lint_upstream`]).
    pub(super) async fn compile(
        self,
        prefix: String,
        strict: bool,
        lint: bool,
    ) -> Result<(UpstreamCatalog, Option<catalog::NameConflicts>), String> {
        tokio::task::spawn_blocking(move || {
            let mut overlays = Vec::with_capacity(self.overlays.len());
            for (name, bytes) in &self.overlays {
                overlays.push(Overlay::parse(name, bytes, strict).map_err(|e| e.to_string())?);
            }
            let src = UpstreamSource {
                prefix: &prefix,
                document: &self.document,
                spec: &self.spec,
                overlays: &overlays,
                options: &self.options,
            };
            if lint {
                let linted = catalog::lint_upstream(&src).map_err(|e| e.to_string())?;
                return Ok((linted.catalog, linted.refused));
            }
            catalog::compile_upstream(&src)
                .map(|c| (c, None))
                .map_err(|e| e.to_string())
        })
        .await
        .map_err(|e| format!("the compiler failed: {e}"))?
    }
}

/// The version of an upstream its inputs make: the served one when they
/// did not change, else freshly compiled.
pub(super) async fn version(
    prefix: String,
    runtime: UpstreamConfig,
    read: Result<Inputs, String>,
    previous: Option<Version>,
    strict: bool,
    lint: bool,
) -> Result<(String, Version), LocalError> {
    let inputs = match read {
        Ok(i) => i,
        Err(message) => return Err(LocalError::Upstream { prefix, message }),
    };
    let input_hash = inputs.hash(&prefix, strict);
    let document = inputs.document.clone();
    let (catalog, refused) = match previous {
        Some(v) if v.input_hash == input_hash => (v.catalog, v.refused),
        _ => match inputs.compile(prefix.clone(), strict, lint).await {
            // As the operator: refused whole, not served without the tool.
            Ok((c, refused)) => match c.transform_failure() {
                Some(why) => {
                    let message = format!("{document}: {why}");
                    return Err(LocalError::Upstream { prefix, message });
                }
                None => {
                    log_compiled(&c, &document);
                    (Arc::new(c), refused)
                }
            },
            Err(message) => return Err(LocalError::Upstream { prefix, message }),
        },
    };
    let version = Version {
        input_hash,
        document,
        catalog,
        runtime,
        refused,
    };
    Ok((prefix, version))
}

pub(super) fn log_compiled(c: &UpstreamCatalog, document: &str) {
    for w in &c.warnings {
        if w.code == catalog::WarningCode::OverlayTargetUnmatched {
            let at = w.at.as_ref().map(catalog::Location::pointer);
            tracing::warn!(upstream = %c.prefix, at = at.as_deref().unwrap_or_default(), "{}", w.message);
        }
    }
    tracing::info!(
        upstream = %c.prefix,
        document,
        tools = c.tools.len(),
        rejected = c.rejected.len(),
        warnings = c.warnings.len(),
        "compiled"
    );
}

/// Identifies a set of versions: what the catalog was compiled from and
/// how each upstream is reached.
pub(super) fn set_hash(candidates: &BTreeMap<String, Version>) -> String {
    let mut h = Sha256::new();
    for (prefix, v) in candidates {
        h.update(prefix.as_bytes());
        h.update([0]);
        h.update(v.input_hash.as_bytes());
        h.update(serde_json::to_vec(&v.runtime).unwrap_or_default());
        h.update([0]);
    }
    hex::encode(h.finalize())
}
