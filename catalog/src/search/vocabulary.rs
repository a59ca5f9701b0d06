//! The search vocabulary: synonyms and equivalent forms, normalised once, and how a run of query words matches an entry.

use rust_stemmers::{Algorithm, Stemmer};

use super::words::*;

/// Groups of words an agent and an API's documentation use for the same
/// thing. A query word of a group also looks for the others, at
/// [`SYNONYM_WEIGHT`]. Kept to verbs of CRUD-style APIs and a few nouns
/// every API has: a general thesaurus would drown the exact words.
/// Written unstemmed; stemmed when the table is used.
pub(super) const SYNONYMS: &[&[&str]] = &[
    &["delete", "remove", "destroy", "erase"],
    &["list", "show", "all", "browse", "enumerate"],
    &[
        "create", "add", "new", "make", "register", "set up", "sign up",
    ],
    &["update", "edit", "modify", "change", "patch", "rename"],
    &[
        "get", "fetch", "retrieve", "read", "view", "lookup", "find", "show",
    ],
    &["check", "verify", "validate", "test", "lint"],
    &["search", "find", "query", "lookup", "filter"],
    &["user", "member", "account", "person", "people"],
    &["organization", "team", "company"],
    &["repo", "repository", "project"],
    &["start", "run", "launch", "begin", "trigger", "submit"],
    &["stop", "cancel", "terminate", "halt", "abort", "call off"],
    &["upload", "attach", "send", "put"],
    &["download", "export", "fetch"],
    &[
        "picture",
        "image",
        "photo",
        "avatar",
        "thumbnail",
        "snapshot",
    ],
    &["message", "msg", "chat", "post", "text", "sms"],
    &["disable", "deactivate", "suspend", "turn", "off"],
    &["enable", "activate", "turn", "on"],
];

/// How much a synonym's match counts against the word itself.
pub(super) const SYNONYM_WEIGHT: f32 = 0.4;

/// Short forms and what they stand for: the same word, not a neighbour in
/// meaning, so each finds the other at [`EQUIVALENT_WEIGHT`]. An entry
/// may be several words ("garbage collection"), matched when they follow
/// each other in the query (so may one of [`SYNONYMS`]: "set up"). Written
/// unstemmed, like [`SYNONYMS`].
pub(super) const EQUIVALENTS: &[&[&str]] = &[
    &["org", "organization", "organisation"],
    &["repo", "repository"],
    &["config", "configuration", "settings"],
    &["app", "application"],
    &["admin", "administrator"],
    &["info", "information", "details"],
    &["auth", "authentication"],
    &["env", "environment"],
    &["stats", "statistics"],
    &["sync", "synchronize", "synchronise"],
    &["msg", "message"],
    &["doc", "document"],
    &["dir", "directory"],
    &["gc", "garbage collection"],
    &["sms", "text message"],
    &["vlm", "vision language model"],
    &["id", "identifier"],
    &["url", "link"],
];

/// How much a compound's parts, or two words' compound, count
/// ([`SearchIndex::compounds`]); a part has at least
/// [`COMPOUND_PART_LEN`] letters.
pub(super) const COMPOUND_WEIGHT: f32 = 0.6;
pub(super) const COMPOUND_PART_LEN: usize = 3;

/// How much a match of an [`EQUIVALENTS`] form counts against the word
/// itself.
pub(super) const EQUIVALENT_WEIGHT: f32 = 0.9;

/// [`EQUIVALENTS`], normalised as indexed words are, each entry as its
/// words' terms; built once.
pub(super) fn equivalents() -> &'static [Vec<Vec<String>>] {
    static TABLE: std::sync::OnceLock<Vec<Vec<Vec<String>>>> = std::sync::OnceLock::new();
    TABLE.get_or_init(|| normalise_table(EQUIVALENTS))
}

/// [`SYNONYMS`], normalised as [`equivalents`] are; built once.
pub(super) fn synonyms() -> &'static [Vec<Vec<String>>] {
    static TABLE: std::sync::OnceLock<Vec<Vec<Vec<String>>>> = std::sync::OnceLock::new();
    TABLE.get_or_init(|| normalise_table(SYNONYMS))
}

/// A table of word groups, each entry as the terms of its words.
pub(super) fn normalise_table(table: &[&[&str]]) -> Vec<Vec<Vec<String>>> {
    let stemmer = Stemmer::create(Algorithm::English);
    table
        .iter()
        .map(|g| {
            g.iter()
                .map(|e| {
                    e.split(' ')
                        .filter_map(|w| normalise(&stemmer, w))
                        .collect()
                })
                .collect()
        })
        .collect()
}

/// Which entry of `group`, if any, the query's words end with: `recent`
/// holds the terms of the words before `term`, the latest last.
pub(super) fn entry_ending(group: &[Vec<String>], recent: &[String], term: &str) -> Option<usize> {
    group.iter().position(|e| match e.split_last() {
        Some((last, before)) => last == term && recent.ends_with(before),
        None => false,
    })
}
