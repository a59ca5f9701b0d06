//! Where tests and benches find the public spec corpus (`shared/specs`,
//! described by its INDEX.md), the tool prefix of each document when the
//! corpus is served as one catalog ([`PREFIXES`]), and the tool search
//! evaluation sets over that catalog ([`search_tasks`], held out, and
//! [`search_tasks_dev`], for development). Dev-only: no crate
//! depends on it outside `[dev-dependencies]`.
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

use serde::Deserialize;

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

/// The tool prefix of each corpus document when the whole corpus is one
/// catalog (`(document, prefix)`, in INDEX.md's order). Tests and benches
/// that serve the corpus that way use these, so that a tool has the same
/// name everywhere: the prefix is part of every name, and a name over the
/// length limit is shortened with a hash, which depends on the prefix's
/// length.
pub const PREFIXES: &[(&str, &str)] = &[
    ("gitea-v1.26.3-swagger.json", "gitea"),
    ("argo-workflows-swagger.json", "argo"),
    ("harbor-swagger.yaml", "harbor"),
    ("oai-petstore-expanded-v2.json", "petstore_expanded"),
    ("oai-petstore-v3.yaml", "petstore_oai"),
    ("swagger-petstore-v3.yaml", "petstore"),
    ("box-openapi.json", "box"),
    ("twilio-api_v2010.json", "twilio"),
    ("asana-oas.yaml", "asana"),
    ("spotify-official.yaml", "spotify"),
    ("prowlarr-openapi.json", "prowlarr"),
    ("freee-iv-api-schema.yaml", "freee"),
    ("oai-webhook-example-v31.yaml", "webhooks"),
    ("redocly-museum.yaml", "museum"),
    ("bump-train-travel.yaml", "train"),
    ("frigate-api.yaml", "frigate"),
    ("discord-openapi.json", "discord"),
];

/// The tool prefix of corpus document `name` (see [`PREFIXES`]); panics for
/// a document that is not in the table.
pub fn prefix(name: &str) -> &'static str {
    PREFIXES
        .iter()
        .find(|(document, _)| *document == name)
        .map(|(_, prefix)| *prefix)
        .unwrap_or_else(|| panic!("{name} has no prefix in toolgate_corpus::PREFIXES"))
}

/// One task of the tool search evaluation set (`search-tasks.yaml` beside
/// this crate's manifest; its header says how it was written).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SearchTask {
    /// What an agent is asked, in plain words: the search query.
    pub task: String,
    /// The corpus document `tool` comes from.
    pub document: String,
    /// The full name of the tool that answers the task.
    pub tool: String,
    /// Other tools that answer it equally well.
    #[serde(default)]
    pub also: Vec<String>,
    pub difficulty: Difficulty,
}

impl SearchTask {
    /// `tool` then `also`: a search result that is any of these answers the
    /// task.
    pub fn answers(&self) -> impl Iterator<Item = &str> {
        std::iter::once(self.tool.as_str()).chain(self.also.iter().map(String::as_str))
    }
}

/// How far a task's words are from the tool's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Difficulty {
    /// The task's action and object are words of the tool's name or
    /// summary (up to inflection).
    Easy,
    /// The action or the object is paraphrased.
    Hard,
}

/// The tool search evaluation set (the held-out test set); panics when the
/// file does not parse.
pub fn search_tasks() -> Vec<SearchTask> {
    // Compiled in, so editing the file rebuilds whatever reads it.
    const TASKS: &str = include_str!("../search-tasks.yaml");
    yaml_serde::from_str(TASKS).unwrap_or_else(|e| panic!("search-tasks.yaml: {e}"))
}

/// The tool search development set (`search-tasks-dev.yaml`): what ranking
/// changes are judged on, so that [`search_tasks`] stays held out; panics
/// when the file does not parse.
pub fn search_tasks_dev() -> Vec<SearchTask> {
    const TASKS: &str = include_str!("../search-tasks-dev.yaml");
    yaml_serde::from_str(TASKS).unwrap_or_else(|e| panic!("search-tasks-dev.yaml: {e}"))
}

/// The second tool search development set (`search-tasks-dev2.yaml`),
/// written blind to the ranking: whether a change judged on
/// [`search_tasks_dev`] holds on tasks it was not tuned on; panics when
/// the file does not parse.
pub fn search_tasks_dev2() -> Vec<SearchTask> {
    const TASKS: &str = include_str!("../search-tasks-dev2.yaml");
    yaml_serde::from_str(TASKS).unwrap_or_else(|e| panic!("search-tasks-dev2.yaml: {e}"))
}

/// The tool prefix of the corpus document at `path` (see [`PREFIXES`]);
/// panics for a document that is not in the table.
pub fn prefix_of(path: &Path) -> &'static str {
    prefix(&path.file_name().unwrap_or_default().to_string_lossy())
}

/// A gateway config (`toolgate serve --config`) serving every corpus
/// document from one process, each under its prefix ([`PREFIXES`]), all calling
/// `base_url`.
pub fn gateway_config(base_url: &str) -> String {
    let mut out = String::from("upstreams:\n");
    for doc in documents() {
        out.push_str(&format!(
            "  {}:\n    openapi: {{file: {:?}}}\n    baseUrl: {base_url:?}\n",
            prefix_of(&doc),
            doc.display().to_string()
        ));
    }
    out
}
