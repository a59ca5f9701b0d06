//! The Kubernetes API calls each toolgate binary makes, as RBAC authorizes
//! them, recorded in the repository so the install's RBAC can be checked
//! against them without running anything.
//!
//! A recording test runs a binary through a representative scenario against
//! the in-memory API server as its own user, takes the distinct calls it
//! made ([`calls_of`]) and hands them to [`check_or_record`], which compares
//! them with the file kept in [`DIR`] (one file per binary and
//! configuration). With [`REFRESH_ENV`]`=1` it rewrites the file instead.
//! `tests/tests/apiserver/deploy.rs` then renders the chart with each
//! file's `values` (and the kustomize base, for files with default values)
//! and checks that the rules bound to the file's ServiceAccount allow every
//! recorded call and that every rule is used by one.
//!
//! File format (YAML):
//!
//! ```yaml
//! # free text: who made these calls, how to refresh
//! serviceAccount: toolgate-operator   # in the release namespace
//! values: {"operator": {"watchNamespace": "team-a"}}  # chart values matching how it ran
//! calls:
//!   - {verb: "get", group: "", resource: "secrets", namespace: "team-a"}
//!   - {verb: "update", group: "coordination.k8s.io", resource: "leases", namespace: "toolgate-system", name: "toolgate-operator"}
//! ```
//!
//! A third ServiceAccount (say, an uninstall hook) needs only its own file.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::apiserver::ApiServerHandle;

/// The recordings, relative to the `toolgate-tests` package.
pub const DIR: &str = "tests/fixtures/rbac";

/// Set to `1` to rewrite the recordings instead of comparing with them.
pub const REFRESH_ENV: &str = "TOOLGATE_RECORD_RBAC";

/// `namespace` of a call across all namespaces (a cluster-wide list or
/// watch), or of a cluster-scoped resource: only a ClusterRole bound by a
/// ClusterRoleBinding allows it.
pub const ALL_NAMESPACES: &str = "*";

/// One kind of call, with what an RBAC rule matches on.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Call {
    pub verb: String,
    /// API group; empty for the core group.
    pub group: String,
    /// `plural` or `plural/subresource`, as RBAC rules name them.
    pub resource: String,
    /// The namespace, or [`ALL_NAMESPACES`].
    pub namespace: String,
    /// The object's name, for objects whose name the binary's settings fix
    /// (so a rule may pin it with `resourceNames`); empty otherwise, and
    /// always for create.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
}

impl std::fmt::Display for Call {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let group = if self.group.is_empty() {
            "core"
        } else {
            &self.group
        };
        write!(f, "{} {group}/{}", self.verb, self.resource)?;
        if !self.name.is_empty() {
            write!(f, " {:?}", self.name)?;
        }
        match self.namespace.as_str() {
            ALL_NAMESPACES => write!(f, " in all namespaces"),
            ns => write!(f, " in namespace {ns}"),
        }
    }
}

/// What a recording file holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Recording {
    /// The ServiceAccount the binary runs as, in the release namespace, as
    /// the chart and the kustomize base name it.
    pub service_account: String,
    /// Chart values that configure the binary the way the test ran it
    /// (`{}`: the defaults); the checker renders the chart with them.
    pub values: Value,
    pub calls: BTreeSet<Call>,
}

impl Recording {
    /// The file's text: `header` (comment lines) then the fields, one call
    /// per line so a change reads as a one-line diff.
    pub fn to_text(&self, header: &str) -> String {
        let mut out = String::new();
        for line in header.lines() {
            out.push_str(&format!("# {line}\n").replace("# \n", "#\n"));
        }
        out.push_str(&format!(
            "serviceAccount: {}\nvalues: {}\ncalls:\n",
            Value::from(self.service_account.as_str()),
            self.values
        ));
        let q = |s: &str| Value::from(s).to_string();
        for c in &self.calls {
            out.push_str(&format!(
                "  - {{verb: {}, group: {}, resource: {}, namespace: {}",
                q(&c.verb),
                q(&c.group),
                q(&c.resource),
                q(&c.namespace)
            ));
            if !c.name.is_empty() {
                out.push_str(&format!(", name: {}", q(&c.name)));
            }
            out.push_str("}\n");
        }
        out
    }

    pub fn parse(text: &str) -> Result<Recording, String> {
        yaml_serde::from_str(text).map_err(|e| e.to_string())
    }
}

/// The distinct calls `user` made to `server`, as RBAC authorizes them.
/// `pinned` lists the `(resource, name)` pairs whose names the binary's
/// settings fix; every other name is left out.
pub fn calls_of(server: &ApiServerHandle, user: &str, pinned: &[(&str, &str)]) -> BTreeSet<Call> {
    server
        .requests()
        .into_keys()
        .filter(|k| k.user == user)
        .map(|k| {
            let name = if pinned.iter().any(|(r, n)| *r == k.resource && *n == k.name) {
                k.name.clone()
            } else {
                String::new()
            };
            Call {
                resource: if k.subresource.is_empty() {
                    k.resource
                } else {
                    format!("{}/{}", k.resource, k.subresource)
                },
                namespace: if k.namespace.is_empty() {
                    ALL_NAMESPACES.to_string()
                } else {
                    k.namespace
                },
                verb: k.verb,
                group: k.group,
                name,
            }
        })
        .collect()
}

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(DIR)
}

/// Every recording in [`DIR`], by file name.
pub fn load_all() -> Vec<(String, Recording)> {
    let mut out = Vec::new();
    let entries = std::fs::read_dir(dir()).unwrap_or_else(|e| panic!("{DIR}: {e}"));
    for entry in entries {
        let path = entry.expect("a directory entry").path();
        if path.extension().is_none_or(|e| e != "yaml") {
            continue;
        }
        let text =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let rec = Recording::parse(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        out.push((name, rec));
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// Compares `fresh` with the recording `file` in [`DIR`] and panics with
/// the difference and `refresh` (the command that rewrites it) when they
/// differ; with [`REFRESH_ENV`]`=1`, writes `fresh` there instead.
/// `header` becomes the file's leading comment.
pub fn check_or_record(file: &str, header: &str, fresh: &Recording, refresh: &str) {
    let path = dir().join(file);
    if std::env::var(REFRESH_ENV).is_ok_and(|v| v == "1") {
        std::fs::create_dir_all(dir()).unwrap_or_else(|e| panic!("{DIR}: {e}"));
        std::fs::write(&path, fresh.to_text(header))
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        return;
    }
    let how = format!(
        "refresh it with `{REFRESH_ENV}=1 {refresh}`, then review the diff and the RBAC in \
         charts/toolgate/templates (the deploy tests check one against the other)"
    );
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!("{DIR}/{file}: {e}: there is no recording yet; {how}");
    });
    let kept = Recording::parse(&text).unwrap_or_else(|e| panic!("{DIR}/{file}: {e}"));
    let mut diff = Vec::new();
    if kept.service_account != fresh.service_account {
        diff.push(format!(
            "serviceAccount: recorded {:?}, now {:?}",
            kept.service_account, fresh.service_account
        ));
    }
    if kept.values != fresh.values {
        diff.push(format!(
            "values: recorded {}, now {}",
            kept.values, fresh.values
        ));
    }
    for c in fresh.calls.difference(&kept.calls) {
        diff.push(format!("+ {c} (a new call)"));
    }
    for c in kept.calls.difference(&fresh.calls) {
        diff.push(format!("- {c} (no longer made)"));
    }
    assert!(
        diff.is_empty(),
        "the API calls differ from {DIR}/{file}:\n  {}\n{how}",
        diff.join("\n  ")
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_recording_reads_back_as_written() {
        let rec = Recording {
            service_account: "toolgate-operator".into(),
            values: serde_json::json!({"operator": {"watchNamespace": "team-a"}}),
            calls: BTreeSet::from([
                Call {
                    verb: "list".into(),
                    group: "".into(),
                    resource: "secrets".into(),
                    namespace: ALL_NAMESPACES.into(),
                    name: "".into(),
                },
                Call {
                    verb: "patch".into(),
                    group: "toolgate.dev".into(),
                    resource: "mcpupstreams/status".into(),
                    namespace: "team-a".into(),
                    name: "".into(),
                },
                Call {
                    verb: "update".into(),
                    group: "coordination.k8s.io".into(),
                    resource: "leases".into(),
                    namespace: "toolgate-system".into(),
                    name: "toolgate-operator".into(),
                },
            ]),
        };
        let text = rec.to_text("who made them\n\nand how to refresh");
        assert!(text.starts_with("# who made them\n#\n# and how"), "{text}");
        assert_eq!(Recording::parse(&text), Ok(rec));
    }
}
