//! Where tests and benches find the public spec corpus (`shared/specs`,
//! described by its INDEX.md). Dev-only: no crate depends on it outside
//! `[dev-dependencies]`.
//!
//! The folder is `$TOOLGATE_SPECS` when that is set and not empty, else
//! `shared/specs` beside the checkout (`<repo>/../shared/specs`), which is
//! where `.ci/run` expects it. The copies this replaced differed in two
//! ways; the more robust of each is kept: the variable is read with
//! `var_os`, so a non-UTF-8 path still works instead of silently falling
//! back, and an empty value counts as unset. A corpus that is not there
//! panics naming the folder tried and `TOOLGATE_SPECS`, rather than failing
//! later on some file.

use std::path::{Path, PathBuf};

/// The corpus folder; panics when it has no INDEX.md.
pub fn specs_dir() -> PathBuf {
    let dir = match std::env::var_os("TOOLGATE_SPECS") {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir),
        // This crate sits at <repo>/tests/corpus.
        _ => Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/specs"),
    };
    if !dir.join("INDEX.md").is_file() {
        panic!(
            "spec corpus not found at {} (no INDEX.md): set TOOLGATE_SPECS to the specs folder",
            dir.display()
        );
    }
    dir
}

/// The path of corpus document `name` (e.g. `oai-petstore-v3.yaml`); panics
/// when it does not exist.
pub fn spec(name: &str) -> PathBuf {
    let path = specs_dir().join(name);
    if !path.is_file() {
        panic!(
            "{name} is not in the spec corpus at {} (set TOOLGATE_SPECS to the specs folder)",
            path.display()
        );
    }
    path
}

/// The bytes of corpus document `name`; panics when it cannot be read.
pub fn read(name: &str) -> Vec<u8> {
    let path = spec(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Every document of the corpus (`*.json`, `*.yaml`), sorted by path.
pub fn documents() -> Vec<PathBuf> {
    let dir = specs_dir();
    let entries =
        std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("spec corpus {}: {e}", dir.display()));
    let mut docs: Vec<PathBuf> = entries
        .map(|e| {
            e.unwrap_or_else(|e| panic!("spec corpus {}: {e}", dir.display()))
                .path()
        })
        .filter(|p| {
            matches!(
                p.extension().and_then(|e| e.to_str()),
                Some("json" | "yaml")
            )
        })
        .collect();
    docs.sort();
    docs
}

/// The tool prefix of corpus document `path`: its file name without the
/// extension, lowercased, with `_` for every run of other characters (so
/// `gitea-v1.26.3-swagger.json` is `gitea_v1_26_3_swagger`).
pub fn prefix(path: &Path) -> String {
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().to_ascii_lowercase())
        .unwrap_or_default();
    let mut out = String::new();
    for c in stem.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c);
        } else if !out.is_empty() && !out.ends_with('_') {
            out.push('_');
        }
    }
    out.truncate(30);
    out.trim_end_matches('_').to_string()
}

/// A gateway config (`toolgate serve --config`) serving every corpus
/// document from one process, each under its [`prefix`], all calling
/// `base_url`.
pub fn gateway_config(base_url: &str) -> String {
    let mut out = String::from("upstreams:\n");
    for doc in documents() {
        out.push_str(&format!(
            "  {}:\n    openapi: {{file: {:?}}}\n    baseUrl: {base_url:?}\n",
            prefix(&doc),
            doc.display().to_string()
        ));
    }
    out
}
