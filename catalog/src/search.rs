//! Tool search: a ranked full-text index over a whole catalog, built once
//! per catalog version, so an agent can find the few tools a task needs
//! instead of reading thousands.
//!
//! Pure and self-contained: no async, no network, no model download.
//!
//! **What is indexed**, per tool, as separate fields with their own
//! weight ([`FIELDS`]): the name without its prefix, split into words (on
//! `__`, `_`, `.`, camelCase and letter/digit boundaries); the title; the
//! description; the names and descriptions of the top-level input
//! parameters; those of the properties one level down (a request body's
//! fields, also through `allOf`/`anyOf`/`oneOf` and `items`); the tags
//! (`Tool::toolsets`); the upstream (its prefix and its document's
//! title); the words of the HTTP path; and what the HTTP method does
//! ("delete remove" for `DELETE`, [`METHOD_WORDS`]).
//!
//! **Ranking** is BM25F (Robertson and Zaragoza, "The Probabilistic
//! Relevance Framework: BM25 and Beyond", 2009, §3.5): each field's term
//! frequency is length-normalised with its own `b`, weighted, summed into
//! one pseudo-frequency, then saturated once with `k1`. Saturating once
//! (rather than adding per-field BM25 scores) keeps a word that appears in
//! name, title and description from counting three times as much as it
//! should. Words are lower-cased, English-stemmed (Snowball/Porter2 from
//! `rust-stemmers`), and function words are dropped; long words are also
//! indexed by their first letters, which the stemmer keeps apart
//! (`subscribe`/`subscription`); Chinese, Japanese and Korean text, which
//! has no spaces, is indexed by character pairs. A small synonym table
//! ([`SYNONYMS`]) adds the usual other words for the verbs an agent's
//! task and an API's documentation disagree on most (delete/remove,
//! list/show, set up/create, ...); a table of short forms
//! ([`EQUIVALENTS`]: org/organization, gc/garbage collection, ...) finds
//! either spelling at almost full weight. Entries of both may be phrases.
//! Compounds the query and the catalog write differently are joined or
//! split against the index's own words ("pet store"/*petstore*,
//! "webhook"/*hook*, [`SearchIndex::compounds`]). A tool's score is then
//! scaled by the share of the query's words it matched, so one rare word
//! does not outweigh the rest of the task.
//! Last, the task's leading verb or question word says whether it reads
//! or changes something ("show the settings of a hook", "which apps have
//! access", against "disable a hook"); a tool whose HTTP method disagrees
//! (a read answered by anything but `GET`/`HEAD`, a change by a `GET`) is
//! scaled down ([`Intent`]). Documentation words are shared between a
//! resource's read and write operations, so without this "show a hook's
//! settings" ranks the tool that edits them first. Likewise a task that
//! asks for one item ("one", "a specific") or for many ("list", "all",
//! "every") discounts tools whose path says the other (a path ending in a
//! parameter addresses one item, [`Count`]).
//!
//! Measured on the corpus (`cargo bench -p catalog --bench search`, see
//! docs/measurements.md), each of these helps a little and none much: the
//! rest of what separates the task's words from the tool's is meaning, not
//! spelling. Changes are judged on the development task sets
//! (`search-tasks-dev.yaml`, `--dev`, and `search-tasks-dev2.yaml`,
//! `--dev2`, written blind to the ranking); the test set is held out.
//!
//! NB: the scoring is written here rather than taken from a BM25 crate:
//! the crates of the field (`bm25`, `probly-search`) score one text per
//! document and keep strings per document, while this needs per-field
//! weights and length normalisation (BM25F), a caller's filter over dense
//! tool ids, and a compact index that the gateway keeps per catalog
//! version; the formula itself is a dozen lines.
//!
//! **Compact.** Terms are interned once (`u32` ids); postings are one
//! array of `(u32 tool, f32 weight)` in term order with an offset per
//! term, their BM25F pseudo-frequencies computed at build time, so a query
//! touches only the postings of its own terms. [`SearchIndex::heap_bytes`]
//! reports what an index holds.
//!
//! **Bounded.** A query is at most [`MAX_QUERY_BYTES`] and
//! [`MAX_QUERY_TERMS`] words and asks for at most [`MAX_LIMIT`] results
//! ([`Query::parse`] refuses more, naming the bound); indexed words longer
//! than [`MAX_WORD_BYTES`] are cut.
//!
//! ```
//! # let spec = br#"{"openapi": "3.0.3", "info": {"title": "Pets", "version": "1"},
//! #   "paths": {"/pets": {"get": {"operationId": "listPets", "summary": "List all pets",
//! #     "responses": {"200": {"description": "ok"}}},
//! #   "post": {"operationId": "createPet", "summary": "Create a pet",
//! #     "responses": {"201": {"description": "ok"}}}}}}"#;
//! # let options = catalog::CompileOptions::default();
//! # let upstream = catalog::compile_upstream(&catalog::UpstreamSource {
//! #     prefix: "pets", document: "pets.json", spec, overlays: &[], options: &options,
//! # }).unwrap();
//! use catalog::search::{Query, SearchIndex};
//! let catalog = catalog::Catalog::new(vec![upstream]);
//! let index = SearchIndex::build(&catalog);
//! let query = Query::parse("add a new pet").unwrap();
//! let hits = index.search(&query, |_tool| true);
//! assert_eq!(catalog.upstreams[0].tools[hits[0].tool].name, "pets__create_pet");
//! ```

use std::collections::HashMap;

use rust_stemmers::{Algorithm, Stemmer};
use serde::de::{Deserializer, IgnoredAny, MapAccess, Visitor};
use serde::Deserialize;

use crate::model::{Catalog, Tool, UpstreamCatalog};

/// Longest query text, in bytes.
pub const MAX_QUERY_BYTES: usize = 1024;
/// Most words in a query (before function words are dropped).
pub const MAX_QUERY_TERMS: usize = 64;
/// Most results one search returns.
pub const MAX_LIMIT: usize = 50;
/// Results when the caller does not say.
pub const DEFAULT_LIMIT: usize = 10;
/// Indexed words are cut to this many bytes: an identifier-like run of
/// letters longer than this is no word a query would contain.
pub const MAX_WORD_BYTES: usize = 40;

/// The indexed fields of a tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Field {
    Name,
    Title,
    Description,
    Params,
    Body,
    Tags,
    Upstream,
    Path,
    Method,
}

/// `(field, weight, b)`: how much a word counts in each field, and how
/// much the field's length discounts it (BM25's `b`: 0 none, 1 fully).
/// Names and titles are short and chosen with care: a word there says
/// most about what the tool does. Descriptions say more but also describe
/// parameters and results. Parameter names and descriptions are noisy
/// (every list tool has `limit`), so they count little and are fully
/// length-normalised. The upstream's words are the same for all its tools:
/// they only help a query that names the API ("gitea", "spotify"). The
/// HTTP method's verbs ([`METHOD_WORDS`]) speak for tools whose document
/// describes nothing but a path.
const FIELDS: [(Field, f32, f32); 9] = [
    (Field::Name, 3.0, 0.5),
    (Field::Title, 2.0, 0.5),
    (Field::Description, 1.0, 0.75),
    (Field::Params, 0.3, 1.0),
    (Field::Body, 0.2, 1.0),
    (Field::Tags, 1.0, 0.5),
    (Field::Upstream, 0.5, 0.0),
    (Field::Path, 1.0, 0.5),
    (Field::Method, 0.5, 0.0),
];
const FIELD_COUNT: usize = FIELDS.len();

/// What an HTTP method does, in the words a task uses for it.
const METHOD_WORDS: &[(&str, &str)] = &[
    ("GET", "get read"),
    ("POST", "post create add new"),
    ("PUT", "put update replace set"),
    ("PATCH", "patch update edit modify"),
    ("DELETE", "delete remove"),
];

/// BM25's term-frequency saturation.
const K1: f32 = 1.2;

/// Words of at least this many letters are also indexed by their first
/// [`TRUNCATED_LEN`] letters, which matches what the stemmer keeps apart
/// (`subscribe`/`subscription`, `permission`/`permit`), at
/// [`TRUNCATED_WEIGHT`]; an exact match then scores on both.
const TRUNCATE_FROM: usize = 6;
const TRUNCATED_LEN: usize = 5;
const TRUNCATED_WEIGHT: f32 = 0.5;

/// Function words: frequent in task descriptions and in documentation, and
/// carrying nothing about which tool fits. Their IDF is low anyway, but
/// dropping them keeps a wordy query from favouring wordy descriptions.
const STOP_WORDS: &[&str] = &[
    "a", "about", "already", "am", "an", "and", "any", "are", "as", "at", "be", "been", "being",
    "but", "by", "can", "could", "did", "do", "does", "each", "every", "for", "from", "has",
    "have", "how", "i", "if", "in", "into", "is", "it", "its", "just", "may", "me", "might",
    "must", "my", "of", "on", "one", "or", "our", "own", "please", "should", "so", "some", "that",
    "the", "their", "them", "then", "there", "these", "they", "this", "those", "to", "too", "us",
    "very", "via", "want", "was", "we", "what", "when", "where", "which", "who", "whole", "whose",
    "why", "will", "with", "would", "you", "your",
];

/// Groups of words an agent and an API's documentation use for the same
/// thing. A query word of a group also looks for the others, at
/// [`SYNONYM_WEIGHT`]. Kept to verbs of CRUD-style APIs and a few nouns
/// every API has: a general thesaurus would drown the exact words.
/// Written unstemmed; stemmed when the table is used.
const SYNONYMS: &[&[&str]] = &[
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
const SYNONYM_WEIGHT: f32 = 0.4;

/// Short forms and what they stand for: the same word, not a neighbour in
/// meaning, so each finds the other at [`EQUIVALENT_WEIGHT`]. An entry
/// may be several words ("garbage collection"), matched when they follow
/// each other in the query (so may one of [`SYNONYMS`]: "set up"). Written
/// unstemmed, like [`SYNONYMS`].
const EQUIVALENTS: &[&[&str]] = &[
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
const COMPOUND_WEIGHT: f32 = 0.6;
const COMPOUND_PART_LEN: usize = 3;

/// How much a match of an [`EQUIVALENTS`] form counts against the word
/// itself.
const EQUIVALENT_WEIGHT: f32 = 0.9;

/// How much a tool that matches only some of the query's words is
/// discounted: its score times (matched words / words) to this power.
const COVERAGE_POWER: f32 = 1.0;

/// How much a tool whose HTTP method disagrees with the query's
/// [`Intent`] keeps of its score: a read answered by a tool that changes
/// something, and a change answered by a `GET`. A read task rarely wants
/// a write tool; a change is sometimes done by a `GET` (an API that
/// triggers by `GET`), so it is discounted less. Chosen on the
/// development sets (0.8/0.8, 0.6/0.8 and 0.5/0.7 measured; the last best
/// on both).
const READ_MISMATCH: f32 = 0.5;
const WRITE_MISMATCH: f32 = 0.7;

/// What a tool keeps of its score when the query asks for one item and
/// its path addresses a collection, or the other way round ([`Count`]).
/// A weaker sign than the intent (a collection path may take an id in its
/// query string), so a milder discount; 0.8 and 0.6 measured on the
/// development sets, equal at 5.
const COUNT_MISMATCH: f32 = 0.8;

/// Whether a query asks for one item or for many, by its words
/// ([`ONE_WORDS`], [`MANY_WORDS`]); neither or both is `Any`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Count {
    Any,
    One,
    Many,
}

/// Words of a task about one item. Sorted.
const ONE_WORDS: &[&str] = &[
    "given",
    "individual",
    "one",
    "particular",
    "single",
    "specific",
];
/// Words of a task about many items. Sorted.
const MANY_WORDS: &[&str] = &["all", "each", "enumerate", "every", "list"];

impl Count {
    /// The count a query's words, lower-cased, ask for.
    fn of(words: &[String]) -> Count {
        let has = |list: &[&str]| {
            words
                .iter()
                .any(|w| list.binary_search(&w.as_str()).is_ok())
        };
        match (has(ONE_WORDS), has(MANY_WORDS)) {
            (true, false) => Count::One,
            (false, true) => Count::Many,
            _ => Count::Any,
        }
    }

    /// What a tool keeps of its score; `item` says whether its path
    /// addresses one item.
    fn factor(self, item: bool) -> f32 {
        match (self, item) {
            (Count::One, false) | (Count::Many, true) => COUNT_MISMATCH,
            _ => 1.0,
        }
    }
}

/// Whether a query reads or changes something, as its leading word says
/// ([`Intent::of`]): a verb of [`READ_VERBS`] or [`WRITE_VERBS`], or a
/// question word (a question asks to read).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Intent {
    /// No leading verb the tables know, or a read verb followed by a
    /// change ("find and delete ...").
    Unknown,
    Read,
    Write,
}

/// Leading words of a task that reads: verbs, and question words (a
/// question asks for something to read). Sorted.
#[rustfmt::skip]
const READ_VERBS: &[&str] = &[
    "are", "browse", "can", "check", "compare", "could", "count", "describe", "did", "display",
    "do", "does", "download", "explore", "export", "fetch", "find", "get", "has", "have", "how",
    "identify", "inspect", "is", "list", "look", "lookup", "preview", "print", "query", "read",
    "retrieve", "search", "see", "should", "show", "tell", "view", "was", "were", "what", "when",
    "where", "which", "who", "whom", "whose", "why",
];

/// Leading words of a task that changes something. Sorted.
#[rustfmt::skip]
const WRITE_VERBS: &[&str] = &[
    "abort", "accept", "activate", "add", "apply", "approve", "archive", "assign", "attach", "ban",
    "block", "cancel", "change", "clear", "close", "comment", "copy", "create", "deactivate",
    "decline", "delete", "deny", "destroy", "detach", "disable", "dismiss", "drop", "edit",
    "enable", "erase", "follow", "generate", "grant", "hide", "import", "install", "invite",
    "kick", "launch", "link", "lock", "make", "mark", "merge", "modify", "move", "mute", "pause",
    "pin", "ping", "place", "play", "post", "publish", "purge", "put", "queue", "react",
    "register", "reject", "remove", "rename", "reopen", "replace", "reply", "reset", "resolve",
    "restart", "restore", "resume", "retry", "revoke", "rotate", "run", "save", "schedule", "send",
    "set", "share", "skip", "star", "start", "stop", "submit", "subscribe", "suspend", "sync",
    "tag", "terminate", "test", "transfer", "trigger", "turn", "unarchive", "unassign", "unblock",
    "undo", "unfollow", "uninstall", "unlink", "unlock", "unmute", "unpin", "unpublish", "unstar",
    "unsubscribe", "unwatch", "update", "upload", "validate", "verify", "write",
];

/// Words before a task's verb that say nothing about it ("please", "I
/// want to", "help me"). `can`/`could`/`will`/`would` are skipped only
/// before "you" ("can you delete ..."); otherwise they ask a question.
#[rustfmt::skip]
const LEADING_FILLERS: &[&str] = &[
    "also", "go", "help", "i", "just", "kindly", "let", "lets", "like", "me", "need", "now",
    "please", "s", "to", "us", "want", "we",
];

impl Intent {
    /// The intent of a query's words, lower-cased: after
    /// [`LEADING_FILLERS`], a verb of [`WRITE_VERBS`] is a change; one of
    /// [`READ_VERBS`] is a read unless one of the next two words is a
    /// change verb.
    fn of(words: &[String]) -> Intent {
        let known = |list: &[&str], w: &str| list.binary_search(&w).is_ok();
        let mut i = 0;
        while i < words.len() {
            let w = words[i].as_str();
            let asks_you = matches!(w, "can" | "could" | "will" | "would")
                && words.get(i + 1).is_some_and(|n| n == "you");
            if asks_you {
                i += 2;
            } else if known(LEADING_FILLERS, w) {
                i += 1;
            } else {
                break;
            }
        }
        let Some(first) = words.get(i) else {
            return Intent::Unknown;
        };
        if known(WRITE_VERBS, first) {
            Intent::Write
        } else if known(READ_VERBS, first) {
            let changes = words[i + 1..].iter().take(2).any(|w| known(WRITE_VERBS, w));
            if changes {
                Intent::Unknown
            } else {
                Intent::Read
            }
        } else {
            Intent::Unknown
        }
    }

    /// What a tool keeps of its score under this intent; `reads` says
    /// whether its HTTP method is `GET` or `HEAD`.
    fn factor(self, reads: bool) -> f32 {
        match (self, reads) {
            (Intent::Read, false) => READ_MISMATCH,
            (Intent::Write, true) => WRITE_MISMATCH,
            _ => 1.0,
        }
    }
}

/// [`EQUIVALENTS`], normalised as indexed words are, each entry as its
/// words' terms; built once.
fn equivalents() -> &'static [Vec<Vec<String>>] {
    static TABLE: std::sync::OnceLock<Vec<Vec<Vec<String>>>> = std::sync::OnceLock::new();
    TABLE.get_or_init(|| normalise_table(EQUIVALENTS))
}

/// [`SYNONYMS`], normalised as [`equivalents`] are; built once.
fn synonyms() -> &'static [Vec<Vec<String>>] {
    static TABLE: std::sync::OnceLock<Vec<Vec<Vec<String>>>> = std::sync::OnceLock::new();
    TABLE.get_or_init(|| normalise_table(SYNONYMS))
}

/// A table of word groups, each entry as the terms of its words.
fn normalise_table(table: &[&[&str]]) -> Vec<Vec<Vec<String>>> {
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
fn entry_ending(group: &[Vec<String>], recent: &[String], term: &str) -> Option<usize> {
    group.iter().position(|e| match e.split_last() {
        Some((last, before)) => last == term && recent.ends_with(before),
        None => false,
    })
}

/// A query refused before it ran, and which bound it broke.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QueryError {
    #[error("query is {bytes} bytes; at most {MAX_QUERY_BYTES} are allowed")]
    TooLong { bytes: usize },
    #[error("query has {terms} words; at most {MAX_QUERY_TERMS} are allowed")]
    TooManyTerms { terms: usize },
    #[error("limit must be between 1 and {MAX_LIMIT}, not {limit}")]
    Limit { limit: u64 },
}

/// One term a query looks for.
#[derive(Debug, Clone, PartialEq)]
struct QueryTerm {
    term: String,
    weight: f32,
    /// The query words it stands for, one bit each (a query has at most
    /// [`MAX_QUERY_TERMS`], 64): what coverage counts. Two for the
    /// compound of two words.
    words: u64,
}

/// A parsed search query: its terms, how many results, and an optional
/// upstream prefix to search within.
#[derive(Debug, Clone, PartialEq)]
pub struct Query {
    /// Each term once, at its highest weight: a word's own terms at 1,
    /// its truncation at [`TRUNCATED_WEIGHT`], its synonyms at
    /// [`SYNONYM_WEIGHT`].
    terms: Vec<QueryTerm>,
    /// The query's plain words, lower-cased and unstemmed, with their
    /// position among the words: what [`SearchIndex::compounds`] joins
    /// and splits.
    plain: Vec<(String, u8)>,
    /// Query words with at least one term.
    words: usize,
    /// Whether the query reads or changes something.
    intent: Intent,
    /// Whether it is about one item or many.
    count: Count,
    limit: usize,
    prefix: Option<String>,
}

impl Query {
    /// Parses `text`, with [`DEFAULT_LIMIT`] results over every upstream.
    pub fn parse(text: &str) -> Result<Query, QueryError> {
        if text.len() > MAX_QUERY_BYTES {
            return Err(QueryError::TooLong { bytes: text.len() });
        }
        let mut count = 0usize;
        split_words(text, |_| count += 1);
        if count > MAX_QUERY_TERMS {
            return Err(QueryError::TooManyTerms { terms: count });
        }
        let stemmer = Stemmer::create(Algorithm::English);
        let mut terms: Vec<QueryTerm> = Vec::new();
        let mut add =
            |term: String, weight: f32, word: u8| match terms.iter_mut().find(|t| t.term == term) {
                Some(t) if t.weight < weight => {
                    t.weight = weight;
                    t.words = 1 << word;
                }
                Some(_) => {}
                None => terms.push(QueryTerm {
                    term,
                    weight,
                    words: 1 << word,
                }),
            };
        let mut words = 0u8;
        // The terms of the words so far: where a phrase of the tables
        // starts.
        let mut recent: Vec<String> = Vec::new();
        let mut plain = Vec::new();
        // Every word, function words too ("which", "can"): what the intent
        // and the count are read from.
        let mut lowered: Vec<String> = Vec::new();
        split_words(text, |w| {
            let mut any = false;
            let lower = match w {
                Word::Plain(p) => Some(p.to_lowercase()).filter(|l| l.is_ascii()),
                Word::Cjk(_) => None,
            };
            lowered.extend(lower.clone());
            let mut last = None;
            terms_of(&stemmer, w, |term| {
                any = true;
                match term {
                    Term::Exact(t) => {
                        for group in equivalents() {
                            if let Some(hit) = entry_ending(group, &recent, &t) {
                                let others = group.iter().enumerate().filter(|(i, _)| *i != hit);
                                for (_, e) in others {
                                    for s in e {
                                        add(s.clone(), EQUIVALENT_WEIGHT, words);
                                    }
                                }
                            }
                        }
                        for group in synonyms() {
                            if entry_ending(group, &recent, &t).is_some() {
                                for s in group.iter().flatten() {
                                    add(s.clone(), SYNONYM_WEIGHT, words);
                                }
                            }
                        }
                        last = Some(t.clone());
                        add(t, 1.0, words);
                    }
                    Term::Truncated(t) => add(t, TRUNCATED_WEIGHT, words),
                }
            });
            if any {
                if let Some(lower) = lower.filter(|l| l.len() <= MAX_WORD_BYTES) {
                    plain.push((lower, words));
                }
                words += 1;
            }
            recent.extend(last);
        });
        terms.retain(|t| t.weight > 0.0);
        Ok(Query {
            terms,
            plain,
            words: words as usize,
            intent: Intent::of(&lowered),
            count: Count::of(&lowered),
            limit: DEFAULT_LIMIT,
            prefix: None,
        })
    }

    /// At most `limit` results (1 to [`MAX_LIMIT`]).
    pub fn with_limit(mut self, limit: u64) -> Result<Query, QueryError> {
        if limit == 0 || limit > MAX_LIMIT as u64 {
            return Err(QueryError::Limit { limit });
        }
        self.limit = limit as usize;
        Ok(self)
    }

    /// Only tools of the upstream with this prefix.
    pub fn with_prefix(mut self, prefix: impl Into<String>) -> Query {
        self.prefix = Some(prefix.into());
        self
    }

    /// How many results the query asks for.
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// Whether no word of the query can match anything (empty, or only
    /// function words).
    pub fn is_empty(&self) -> bool {
        self.terms.is_empty()
    }
}

/// One result: the tool's position in catalog order (upstreams in
/// catalog order, then their tools: the order of [`Catalog::upstreams`]
/// and [`UpstreamCatalog::tools`]) and its score.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Hit {
    pub tool: usize,
    pub score: f32,
}

/// One tool holding one term: its BM25F pseudo-frequency.
#[derive(Debug, Clone, Copy)]
struct Posting {
    tool: u32,
    weight: f32,
}

/// The index of one catalog version. Immutable; share it behind an `Arc`.
pub struct SearchIndex {
    terms: HashMap<Box<str>, u32, foldhash::fast::RandomState>,
    /// Per term.
    idf: Vec<f32>,
    /// Term `t`'s postings are `postings[offsets[t]..offsets[t + 1]]`,
    /// by tool.
    offsets: Vec<u32>,
    postings: Vec<Posting>,
    /// Per tool: index into `prefixes`.
    tool_prefix: Vec<u32>,
    prefixes: Vec<Box<str>>,
    /// Per tool: what its method and path say ([`Shape`]).
    tool_shape: Vec<Shape>,
}

/// What a tool's HTTP method and path say about it, for [`Intent`] and
/// [`Count`].
#[derive(Debug, Clone, Copy)]
struct Shape {
    /// The method reads (`GET`, `HEAD`).
    reads: bool,
    /// The path ends in a parameter: it addresses one item.
    item: bool,
}

impl Shape {
    fn of(tool: &Tool) -> Shape {
        let method = tool.plan.method.as_str();
        Shape {
            reads: method.eq_ignore_ascii_case("GET") || method.eq_ignore_ascii_case("HEAD"),
            item: tool.plan.path.trim_end_matches('/').ends_with('}'),
        }
    }
}

impl std::fmt::Debug for SearchIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SearchIndex")
            .field("tools", &self.tool_prefix.len())
            .field("terms", &self.idf.len())
            .field("postings", &self.postings.len())
            .finish()
    }
}

impl SearchIndex {
    /// Indexes every tool of `catalog`, in catalog order.
    pub fn build(catalog: &Catalog) -> SearchIndex {
        let mut b = Builder::default();
        for u in &catalog.upstreams {
            for t in &u.tools {
                b.add(u, t);
            }
        }
        b.finish()
    }

    /// The tools held.
    pub fn len(&self) -> usize {
        self.tool_prefix.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tool_prefix.is_empty()
    }

    /// Distinct indexed terms.
    pub fn term_count(&self) -> usize {
        self.idf.len()
    }

    /// Heap bytes the index holds (capacities, interned words included;
    /// allocator overhead not).
    pub fn heap_bytes(&self) -> usize {
        let words: usize = self.terms.keys().map(|k| k.len()).sum();
        let prefixes: usize = self.prefixes.iter().map(|p| p.len()).sum();
        // A hashbrown slot is the entry plus one control byte.
        self.terms.capacity() * (std::mem::size_of::<(Box<str>, u32)>() + 1)
            + words
            + self.idf.capacity() * 4
            + self.offsets.capacity() * 4
            + self.postings.capacity() * std::mem::size_of::<Posting>()
            + self.tool_prefix.capacity() * 4
            + self.tool_shape.capacity() * std::mem::size_of::<Shape>()
            + self.prefixes.capacity() * std::mem::size_of::<Box<str>>()
            + prefixes
    }

    /// What each term of `query` adds to `tool`'s score before the
    /// coverage discount: why a tool ranks where it does.
    pub fn explain(&self, query: &Query, tool: usize) -> Vec<(String, f32)> {
        let compounds = self.compounds(query);
        query
            .terms
            .iter()
            .chain(&compounds)
            .filter_map(|q| {
                let t = *self.terms.get(q.term.as_str())? as usize;
                let list = &self.postings[self.offsets[t] as usize..self.offsets[t + 1] as usize];
                let i = list.binary_search_by_key(&(tool as u32), |p| p.tool).ok()?;
                Some((
                    q.term.clone(),
                    self.contribution(t, q.weight, list[i].weight),
                ))
            })
            .collect()
    }

    /// Terms for the compounds the query and the catalog write apart: two
    /// adjacent query words written as one in the catalog ("pet store",
    /// *petstore*; "download client", *downloadclient*), and a query word
    /// the catalog writes as two ("webhook", *web* and *hook*), each part
    /// a word the catalog has. The index decides, not a dictionary: only
    /// joins and splits into words some tool has are looked for, at
    /// [`COMPOUND_WEIGHT`].
    fn compounds(&self, query: &Query) -> Vec<QueryTerm> {
        let stemmer = Stemmer::create(Algorithm::English);
        let known = |w: &str| -> Option<String> {
            let t = normalise(&stemmer, w)?;
            self.terms.contains_key(t.as_str()).then_some(t)
        };
        let mut out: Vec<QueryTerm> = Vec::new();
        let mut push = |term: String, words: u64| {
            if !query.terms.iter().any(|t| t.term == term) && !out.iter().any(|t| t.term == term) {
                out.push(QueryTerm {
                    term,
                    weight: COMPOUND_WEIGHT,
                    words,
                });
            }
        };
        for pair in query.plain.windows(2) {
            let ((a, i), (b, j)) = (&pair[0], &pair[1]);
            let (i, j) = (*i, *j);
            if j == i + 1 && a.len() + b.len() <= MAX_WORD_BYTES {
                if let Some(t) = known(&format!("{a}{b}")) {
                    push(t, 1 << i | 1 << j);
                }
            }
        }
        for (w, i) in &query.plain {
            if w.len() < 2 * COMPOUND_PART_LEN {
                continue;
            }
            for cut in COMPOUND_PART_LEN..=w.len() - COMPOUND_PART_LEN {
                let (a, b) = w.split_at(cut);
                if let (Some(x), Some(y)) = (known(a), known(b)) {
                    push(x, 1 << i);
                    push(y, 1 << i);
                    break;
                }
            }
        }
        out
    }

    fn contribution(&self, term: usize, query_weight: f32, weight: f32) -> f32 {
        self.idf[term] * query_weight * weight * (K1 + 1.0) / (K1 + weight)
    }

    /// The best matches of `query` among the tools `allowed` accepts
    /// (called with a tool's catalog position, only for tools that match,
    /// best first, until `query`'s limit is reached), best first; ties in
    /// catalog order.
    pub fn search(&self, query: &Query, mut allowed: impl FnMut(usize) -> bool) -> Vec<Hit> {
        let prefix = match &query.prefix {
            None => None,
            Some(p) => match self.prefixes.iter().position(|q| **q == **p) {
                Some(i) => Some(i as u32),
                None => return Vec::new(),
            },
        };
        let mut scores = vec![0f32; self.len()];
        // Which query words each tool matched: query words are at most
        // MAX_QUERY_TERMS (64), one bit each.
        let mut matched = vec![0u64; self.len()];
        let mut touched: Vec<u32> = Vec::new();
        for q in query.terms.iter().chain(&self.compounds(query)) {
            let Some(&t) = self.terms.get(q.term.as_str()) else {
                continue;
            };
            let t = t as usize;
            let range = self.offsets[t] as usize..self.offsets[t + 1] as usize;
            for p in &self.postings[range] {
                let doc = p.tool as usize;
                if prefix.is_some_and(|pi| self.tool_prefix[doc] != pi) {
                    continue;
                }
                if scores[doc] == 0.0 {
                    touched.push(p.tool);
                }
                scores[doc] += self.contribution(t, q.weight, p.weight);
                matched[doc] |= q.words;
            }
        }
        let words = query.words.max(1) as f32;
        for &doc in &touched {
            let doc = doc as usize;
            let coverage = matched[doc].count_ones() as f32 / words;
            let shape = self.tool_shape[doc];
            scores[doc] *= coverage.powf(COVERAGE_POWER)
                * query.intent.factor(shape.reads)
                * query.count.factor(shape.item);
        }
        touched.sort_unstable_by(|&a, &b| {
            scores[b as usize]
                .total_cmp(&scores[a as usize])
                .then(a.cmp(&b))
        });
        let mut hits = Vec::with_capacity(query.limit);
        for doc in touched {
            let doc = doc as usize;
            if allowed(doc) {
                hits.push(Hit {
                    tool: doc,
                    score: scores[doc],
                });
                if hits.len() == query.limit {
                    break;
                }
            }
        }
        hits
    }
}

/// Collects tools' words, then computes the postings once the average
/// field lengths are known.
#[derive(Default)]
struct Builder {
    terms: HashMap<Box<str>, u32, foldhash::fast::RandomState>,
    /// `(tool, term, frequency per field)`, by tool.
    entries: Vec<(u32, u32, [u16; FIELD_COUNT])>,
    /// Per tool: words per field.
    lengths: Vec<[u32; FIELD_COUNT]>,
    tool_prefix: Vec<u32>,
    prefixes: Vec<Box<str>>,
    tool_shape: Vec<Shape>,
}

impl Builder {
    fn add(&mut self, upstream: &UpstreamCatalog, tool: &Tool) {
        let stemmer = Stemmer::create(Algorithm::English);
        let id = self.lengths.len() as u32;
        let prefix = match self.prefixes.iter().position(|p| **p == *upstream.prefix) {
            Some(i) => i,
            None => {
                self.prefixes.push(upstream.prefix.as_str().into());
                self.prefixes.len() - 1
            }
        };
        self.tool_prefix.push(prefix as u32);
        self.tool_shape.push(Shape::of(tool));
        let mut freq: Vec<(u32, [u16; FIELD_COUNT])> = Vec::new();
        let mut lengths = [0u32; FIELD_COUNT];
        let terms = &mut self.terms;
        let mut put = |field: usize, text: &str| {
            split_words(text, |w| {
                let mut counted = false;
                terms_of(&stemmer, w, |term| {
                    let term = match term {
                        Term::Exact(t) => {
                            if !counted {
                                lengths[field] += 1;
                                counted = true;
                            }
                            t
                        }
                        Term::Truncated(t) => t,
                    };
                    let next = terms.len() as u32;
                    let t = *terms.entry(term.into_boxed_str()).or_insert(next);
                    match freq.iter_mut().find(|(x, _)| *x == t) {
                        Some((_, f)) => f[field] = f[field].saturating_add(1),
                        None => {
                            let mut f = [0u16; FIELD_COUNT];
                            f[field] = 1;
                            freq.push((t, f));
                        }
                    }
                });
            });
        };
        let params = Params::of(tool.input_schema.as_str());
        for (i, (field, _, _)) in FIELDS.iter().enumerate() {
            match field {
                Field::Name => put(i, upstream.base_name(&tool.name).unwrap_or(&tool.name)),
                Field::Title => put(i, tool.title.as_deref().unwrap_or_default()),
                Field::Description => put(i, tool.description.as_deref().unwrap_or_default()),
                Field::Params => {
                    for (name, description) in &params.top {
                        put(i, name);
                        put(i, description.as_deref().unwrap_or_default());
                    }
                }
                Field::Body => {
                    for (name, description) in &params.nested {
                        put(i, name);
                        put(i, description.as_deref().unwrap_or_default());
                    }
                }
                Field::Tags => {
                    for tag in &tool.toolsets {
                        put(i, tag);
                    }
                }
                Field::Upstream => {
                    put(i, &upstream.prefix);
                    put(i, upstream.source.title.as_deref().unwrap_or_default());
                }
                Field::Path => put(i, &tool.plan.path),
                Field::Method => {
                    let method = tool.plan.method.as_str();
                    if let Some((_, words)) = METHOD_WORDS
                        .iter()
                        .find(|(m, _)| m.eq_ignore_ascii_case(method))
                    {
                        put(i, words);
                    }
                }
            }
        }
        self.lengths.push(lengths);
        freq.sort_unstable_by_key(|(t, _)| *t);
        self.entries
            .extend(freq.into_iter().map(|(t, f)| (id, t, f)));
    }

    fn finish(self) -> SearchIndex {
        let tools = self.lengths.len();
        let mut avg = [0f32; FIELD_COUNT];
        for l in &self.lengths {
            for (a, n) in avg.iter_mut().zip(l) {
                *a += *n as f32;
            }
        }
        for a in &mut avg {
            *a /= tools.max(1) as f32;
        }
        let term_count = self.terms.len();
        // Counting sort by term: entries are in tool order, so each
        // term's postings come out in tool order too.
        let mut df = vec![0u32; term_count];
        for (_, t, _) in &self.entries {
            df[*t as usize] += 1;
        }
        let mut offsets = Vec::with_capacity(term_count + 1);
        let mut sum = 0u32;
        offsets.push(0);
        for d in &df {
            sum += d;
            offsets.push(sum);
        }
        let mut next: Vec<u32> = offsets[..term_count].to_vec();
        let mut postings = vec![
            Posting {
                tool: 0,
                weight: 0.0
            };
            self.entries.len()
        ];
        for (tool, t, f) in &self.entries {
            let len = &self.lengths[*tool as usize];
            let mut weight = 0f32;
            for (i, (_, w, b)) in FIELDS.iter().enumerate() {
                if f[i] == 0 {
                    continue;
                }
                let norm = if avg[i] > 0.0 {
                    1.0 - b + b * len[i] as f32 / avg[i]
                } else {
                    1.0
                };
                weight += w * f[i] as f32 / norm;
            }
            let slot = &mut next[*t as usize];
            postings[*slot as usize] = Posting {
                tool: *tool,
                weight,
            };
            *slot += 1;
        }
        let n = tools as f32;
        let idf = df
            .iter()
            .map(|&d| (1.0 + (n - d as f32 + 0.5) / (d as f32 + 0.5)).ln())
            .collect();
        let mut terms = self.terms;
        terms.shrink_to_fit();
        SearchIndex {
            terms,
            idf,
            offsets,
            postings,
            tool_prefix: self.tool_prefix,
            prefixes: self.prefixes,
            tool_shape: self.tool_shape,
        }
    }
}

/// A word of a text, as [`split_words`] finds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Word<'a> {
    /// Letters and digits of an alphabetic script.
    Plain(&'a str),
    /// A run of Chinese, Japanese or Korean characters: these scripts do
    /// not separate words with spaces.
    Cjk(&'a str),
}

/// Calls `f` with each word of `text`: runs of letters and digits, split
/// further where camelCase changes case (`fetchPet`, `HTTPStatus`) and
/// between letters and digits (`v2`); and runs of CJK characters. `_`,
/// `.`, `-`, `/` and the like separate words, so names
/// (`repo_add_collaborator`) and paths split as prose does.
fn split_words(text: &str, mut f: impl FnMut(Word<'_>)) {
    let mut start = None::<usize>;
    let mut cjk = None::<usize>;
    let mut prev: Option<char> = None;
    let mut iter = text.char_indices().peekable();
    while let Some((i, c)) = iter.next() {
        if is_cjk(c) {
            if let Some(s) = start.take() {
                f(Word::Plain(&text[s..i]));
            }
            prev = None;
            cjk.get_or_insert(i);
            continue;
        }
        if let Some(s) = cjk.take() {
            f(Word::Cjk(&text[s..i]));
        }
        if !c.is_alphanumeric() {
            if let Some(s) = start.take() {
                f(Word::Plain(&text[s..i]));
            }
            prev = None;
            continue;
        }
        if let (Some(s), Some(p)) = (start, prev) {
            let next = iter.peek().map(|(_, n)| *n);
            let boundary = (p.is_lowercase() && c.is_uppercase())
                || (p.is_alphabetic() && c.is_ascii_digit())
                || (p.is_ascii_digit() && c.is_alphabetic())
                || (p.is_uppercase() && c.is_uppercase() && next.is_some_and(|n| n.is_lowercase()));
            if boundary {
                f(Word::Plain(&text[s..i]));
                start = Some(i);
            }
        }
        if start.is_none() {
            start = Some(i);
        }
        prev = Some(c);
    }
    if let Some(s) = start {
        f(Word::Plain(&text[s..]));
    }
    if let Some(s) = cjk {
        f(Word::Cjk(&text[s..]));
    }
}

/// Han, kana, Hangul and their punctuation-free blocks.
fn is_cjk(c: char) -> bool {
    matches!(c as u32,
        0x3040..=0x30FF     // Hiragana, Katakana
        | 0x3400..=0x4DBF   // CJK Extension A
        | 0x4E00..=0x9FFF   // CJK Unified Ideographs
        | 0xAC00..=0xD7AF   // Hangul syllables
        | 0xF900..=0xFAFF   // CJK Compatibility Ideographs
        | 0xFF66..=0xFF9F   // Half-width Katakana
        | 0x20000..=0x2FA1F // Extensions B and later
    )
}

/// An index term of a word.
enum Term {
    /// The word itself, normalised ([`normalise`]), or a CJK bigram.
    Exact(String),
    /// Its first [`TRUNCATED_LEN`] letters, marked so no word collides.
    Truncated(String),
}

/// Calls `f` with the terms of `word`: for a plain word its normal form
/// and, when long enough, its truncation; for a CJK run its overlapping
/// character pairs (the run itself when one character long), the usual
/// way to index text without word breaks.
fn terms_of(stemmer: &Stemmer, word: Word<'_>, mut f: impl FnMut(Term)) {
    match word {
        Word::Plain(w) => {
            let Some(term) = normalise(stemmer, w) else {
                return;
            };
            let lower = w.to_ascii_lowercase();
            if lower.is_ascii() && lower.len() >= TRUNCATE_FROM {
                f(Term::Truncated(format!("~{}", &lower[..TRUNCATED_LEN])));
            }
            f(Term::Exact(term));
        }
        Word::Cjk(run) => {
            let chars: Vec<(usize, char)> = run.char_indices().collect();
            if chars.len() == 1 {
                f(Term::Exact(run.to_string()));
                return;
            }
            for pair in chars.windows(2) {
                let end = pair[1].0 + pair[1].1.len_utf8();
                f(Term::Exact(run[pair[0].0..end].to_string()));
            }
        }
    }
}

/// The indexed form of a word: lower-cased, cut to [`MAX_WORD_BYTES`],
/// English-stemmed when it is ASCII; `None` for function words and single
/// letters or digits.
fn normalise(stemmer: &Stemmer, word: &str) -> Option<String> {
    let mut w = word.to_lowercase();
    if w.len() > MAX_WORD_BYTES {
        let mut end = MAX_WORD_BYTES;
        while !w.is_char_boundary(end) {
            end -= 1;
        }
        w.truncate(end);
    }
    if w.chars().count() < 2 || STOP_WORDS.binary_search(&w.as_str()).is_ok() {
        return None;
    }
    if !w.is_ascii() {
        return Some(w);
    }
    Some(stemmer.stem(&w).into_owned())
}

/// The properties of an input schema, name and description: the
/// top-level ones (the operation's parameters and its body) and those one
/// level down, inside an object parameter or the body, also through
/// `allOf`/`anyOf`/`oneOf` and an array's `items` (what a request body
/// says it holds). Reads only those from the schema text, skipping
/// everything else.
#[derive(Default)]
struct Params {
    top: Vec<(String, Option<String>)>,
    nested: Vec<(String, Option<String>)>,
}

impl Params {
    fn of(schema: &str) -> Params {
        #[derive(Deserialize, Default)]
        struct Top {
            #[serde(default)]
            properties: Option<PropMap>,
        }
        let Some(props) = serde_json::from_str::<Top>(schema)
            .ok()
            .and_then(|t| t.properties)
        else {
            return Params::default();
        };
        let mut params = Params::default();
        for (name, p) in props.0 {
            params.top.push((name, p.description));
            params.nested.extend(p.nested);
        }
        params
    }
}

/// `properties` as `(name, property)`, whatever each schema is.
struct PropMap(Vec<(String, Property)>);

impl<'de> Deserialize<'de> for PropMap {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<PropMap, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = PropMap;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a map of schemas")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<PropMap, A::Error> {
                let mut out = Vec::new();
                while let Some(name) = map.next_key::<String>()? {
                    out.push((name, map.next_value()?));
                }
                Ok(PropMap(out))
            }
        }
        d.deserialize_map(V)
    }
}

/// `properties` one level down: `(name, description)`.
struct ShallowMap(Vec<(String, Option<String>)>);

impl<'de> Deserialize<'de> for ShallowMap {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<ShallowMap, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = ShallowMap;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a map of schemas")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<ShallowMap, A::Error> {
                let mut out = Vec::new();
                while let Some(name) = map.next_key::<String>()? {
                    let Description(d) = map.next_value()?;
                    out.push((name, d));
                }
                Ok(ShallowMap(out))
            }
        }
        d.deserialize_map(V)
    }
}

/// A top-level property: its description, and the properties its schema
/// holds one level down.
struct Property {
    description: Option<String>,
    nested: Vec<(String, Option<String>)>,
}

impl<'de> Deserialize<'de> for Property {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Property, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Property;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a schema")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Property, A::Error> {
                let mut description = None;
                let mut nested = Vec::new();
                while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
                    match &*key {
                        "description" if description.is_none() => {
                            let v = map.next_value::<serde_json::Value>()?;
                            description = v.as_str().map(str::to_string);
                        }
                        "properties" => nested.extend(map.next_value::<ShallowMap>()?.0),
                        "allOf" | "anyOf" | "oneOf" => {
                            for m in map.next_value::<Vec<Member>>()? {
                                nested.extend(m.0);
                            }
                        }
                        "items" => nested.extend(map.next_value::<Member>()?.0),
                        _ => {
                            map.next_value::<IgnoredAny>()?;
                        }
                    }
                }
                Ok(Property {
                    description,
                    nested,
                })
            }
            fn visit_bool<E>(self, _: bool) -> Result<Property, E> {
                Ok(Property {
                    description: None,
                    nested: Vec::new(),
                })
            }
        }
        d.deserialize_any(V)
    }
}

/// A member of `allOf`/`anyOf`/`oneOf` or an array's `items`: the
/// properties it holds.
struct Member(Vec<(String, Option<String>)>);

impl<'de> Deserialize<'de> for Member {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Member, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Member;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a schema")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Member, A::Error> {
                let mut out = Vec::new();
                while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
                    if key == "properties" {
                        out.extend(map.next_value::<ShallowMap>()?.0);
                    } else {
                        map.next_value::<IgnoredAny>()?;
                    }
                }
                Ok(Member(out))
            }
            fn visit_bool<E>(self, _: bool) -> Result<Member, E> {
                Ok(Member(Vec::new()))
            }
        }
        d.deserialize_any(V)
    }
}

/// A schema's `description`, or `None` for a schema without one (or a
/// boolean schema).
struct Description(Option<String>);

impl<'de> Deserialize<'de> for Description {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Description, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Description;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a schema")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Description, A::Error> {
                let mut description = None;
                while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
                    if key == "description" && description.is_none() {
                        // Any JSON: a description that is not a string
                        // is skipped, not an error.
                        let v = map.next_value::<serde_json::Value>()?;
                        description = v.as_str().map(str::to_string);
                    } else {
                        map.next_value::<IgnoredAny>()?;
                    }
                }
                Ok(Description(description))
            }
            fn visit_bool<E>(self, _: bool) -> Result<Description, E> {
                Ok(Description(None))
            }
        }
        d.deserialize_any(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(text: &str) -> Vec<String> {
        let mut out = Vec::new();
        split_words(text, |w| match w {
            Word::Plain(w) => out.push(w.to_string()),
            Word::Cjk(w) => out.push(format!("cjk:{w}")),
        });
        out
    }

    #[test]
    fn names_split_on_separators_case_and_digits() {
        assert_eq!(
            words("gitea__repo_addCollaborator"),
            ["gitea", "repo", "add", "Collaborator"]
        );
        assert_eq!(words("getHTTPStatus"), ["get", "HTTP", "Status"]);
        assert_eq!(words("v2Users.list"), ["v", "2", "Users", "list"]);
        assert_eq!(
            words("/repos/{owner}/{repo}/labels"),
            ["repos", "owner", "repo", "labels"]
        );
        assert_eq!(words("oauth2-token"), ["oauth", "2", "token"]);
        assert_eq!(
            words("日本語のAPIです"),
            ["cjk:日本語の", "API", "cjk:です"]
        );
        assert!(words("__--//").is_empty());
    }

    #[test]
    fn stop_words_are_sorted_for_binary_search() {
        let mut sorted = STOP_WORDS.to_vec();
        sorted.sort_unstable();
        assert_eq!(sorted, STOP_WORDS);
    }

    #[test]
    fn intent_tables_are_sorted_and_disjoint() {
        for table in [
            READ_VERBS,
            WRITE_VERBS,
            LEADING_FILLERS,
            ONE_WORDS,
            MANY_WORDS,
        ] {
            let mut sorted = table.to_vec();
            sorted.sort_unstable();
            sorted.dedup();
            assert_eq!(sorted, table);
        }
        for w in READ_VERBS {
            assert!(
                !WRITE_VERBS.contains(w) && !LEADING_FILLERS.contains(w),
                "{w}"
            );
        }
        for w in WRITE_VERBS {
            assert!(!LEADING_FILLERS.contains(w), "{w}");
        }
    }

    #[test]
    fn the_leading_word_says_whether_a_task_reads_or_changes() {
        let cases = [
            ("Show the settings of one webhook", Intent::Read),
            ("which apps have access to my account?", Intent::Read),
            ("Can this project be deleted safely?", Intent::Read),
            ("Delete a user", Intent::Write),
            ("please remove the label", Intent::Write),
            ("I want to create a repository", Intent::Write),
            ("Can you delete the branch", Intent::Write),
            ("help me find a pet", Intent::Read),
            ("find and delete stale branches", Intent::Unknown),
            ("the latest release", Intent::Unknown),
            ("please", Intent::Unknown),
            ("", Intent::Unknown),
        ];
        for (text, want) in cases {
            assert_eq!(Query::parse(text).unwrap().intent, want, "{text:?}");
        }
    }

    #[test]
    fn a_task_about_one_item_prefers_the_path_that_addresses_one() {
        let count = |text: &str| Query::parse(text).unwrap().count;
        assert_eq!(count("Show one webhook"), Count::One);
        assert_eq!(count("list the webhooks"), Count::Many);
        assert_eq!(count("list every specific thing"), Count::Any);
        assert_eq!(count("Show a webhook"), Count::Any);
        let c = catalog(
            r#""/hooks": {
              "get": {"operationId": "listHooks", "summary": "Hooks of the account",
                "responses": {"200": {"description": "ok"}}}},
              "/hooks/{id}": {
              "get": {"operationId": "getHook", "summary": "A hook of the account",
                "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "string"}}],
                "responses": {"200": {"description": "ok"}}}}"#,
        );
        let index = SearchIndex::build(&c);
        assert_eq!(top(&c, &index, "one hook"), "pets__get_hook");
        assert_eq!(top(&c, &index, "every hook"), "pets__list_hooks");
    }

    #[test]
    fn a_read_task_prefers_the_tool_that_reads() {
        let c = catalog(
            r#""/hooks/{id}": {
              "get": {"operationId": "getHook", "summary": "Get a hook",
                "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "string"}}],
                "responses": {"200": {"description": "ok"}}},
              "patch": {"operationId": "editHook", "summary": "Edit a hook",
                "description": "Changes the settings of a hook: its URL, events and settings.",
                "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "string"}}],
                "responses": {"200": {"description": "ok"}}}}"#,
        );
        let index = SearchIndex::build(&c);
        // The edit tool holds "settings" twice; the read intent still
        // puts the read first, and a change the edit.
        assert_eq!(
            top(&c, &index, "show the settings of a hook"),
            "pets__get_hook"
        );
        assert_eq!(
            top(&c, &index, "change the settings of a hook"),
            "pets__edit_hook"
        );
        // Without a leading verb neither is discounted: the words decide.
        assert_eq!(top(&c, &index, "hook settings"), "pets__edit_hook");
    }

    #[test]
    fn words_are_lowercased_stemmed_and_function_words_dropped() {
        let s = Stemmer::create(Algorithm::English);
        assert_eq!(normalise(&s, "Repositories").as_deref(), Some("repositori"));
        assert_eq!(normalise(&s, "repository").as_deref(), Some("repositori"));
        assert_eq!(normalise(&s, "deleting").as_deref(), Some("delet"));
        assert_eq!(normalise(&s, "The"), None);
        assert_eq!(normalise(&s, "x"), None);
        let long = "a".repeat(100);
        assert_eq!(normalise(&s, &long).map(|w| w.len()), Some(MAX_WORD_BYTES));
        // Cut on a character boundary.
        let wide = "é".repeat(30);
        assert!(normalise(&s, &wide).is_some());
    }

    fn catalog(ops: &str) -> Catalog {
        let spec = format!(
            r#"{{"openapi": "3.0.3", "info": {{"title": "Pet Store", "version": "1"}}, "paths": {{{ops}}}}}"#
        );
        let options = crate::CompileOptions::default();
        let a = crate::compile_upstream(&crate::UpstreamSource {
            prefix: "pets",
            document: "pets.json",
            spec: spec.as_bytes(),
            overlays: &[],
            options: &options,
        })
        .unwrap();
        let other = r#"{"openapi": "3.0.3", "info": {"title": "Music", "version": "1"}, "paths": {
            "/playlists/{id}": {"delete": {"operationId": "removePlaylist", "summary": "Remove a playlist",
              "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "string"}}],
              "responses": {"204": {"description": "ok"}}}}}}"#;
        let b = crate::compile_upstream(&crate::UpstreamSource {
            prefix: "music",
            document: "music.json",
            spec: other.as_bytes(),
            overlays: &[],
            options: &options,
        })
        .unwrap();
        Catalog::new(vec![a, b])
    }

    const OPS: &str = r#"
      "/pets": {
        "get": {"operationId": "listPets", "summary": "List all pets", "tags": ["pets"],
          "parameters": [{"name": "limit", "in": "query", "description": "How many items to return",
                          "schema": {"type": "integer"}}],
          "responses": {"200": {"description": "ok"}}},
        "post": {"operationId": "createPet", "summary": "Create a pet", "tags": ["pets"],
          "requestBody": {"content": {"application/json": {"schema": {"type": "object",
            "properties": {"name": {"type": "string"}, "species": {"type": "string",
              "description": "Dog, cat or parrot"}}}}}},
          "responses": {"201": {"description": "ok"}}}},
      "/pets/{petId}": {
        "get": {"operationId": "showPetById", "summary": "Info for a specific pet", "tags": ["pets"],
          "parameters": [{"name": "petId", "in": "path", "required": true, "schema": {"type": "string"}}],
          "responses": {"200": {"description": "ok"}}},
        "delete": {"operationId": "deletePet", "summary": "Deletes a pet",
          "parameters": [{"name": "petId", "in": "path", "required": true, "schema": {"type": "string"}}],
          "responses": {"204": {"description": "ok"}}}},
      "/stores/{storeId}/vaccinations": {
        "post": {"operationId": "recordVaccination", "summary": "Record a vaccination",
          "description": "Records that an animal of the store received a vaccine.",
          "parameters": [{"name": "storeId", "in": "path", "required": true, "schema": {"type": "string"}}],
          "responses": {"201": {"description": "ok"}}}}
    "#;

    fn names(c: &Catalog, hits: &[Hit]) -> Vec<String> {
        let all: Vec<&Tool> = c.upstreams.iter().flat_map(|u| &u.tools).collect();
        hits.iter().map(|h| all[h.tool].name.clone()).collect()
    }

    fn top(c: &Catalog, index: &SearchIndex, q: &str) -> String {
        let hits = index.search(&Query::parse(q).unwrap(), |_| true);
        names(c, &hits).into_iter().next().unwrap_or_default()
    }

    #[test]
    fn ranks_the_tool_whose_words_match_first() {
        let c = catalog(OPS);
        let index = SearchIndex::build(&c);
        assert_eq!(index.len(), 6);
        assert_eq!(top(&c, &index, "create a new pet"), "pets__create_pet");
        assert_eq!(top(&c, &index, "show all the pets"), "pets__list_pets");
        // Stemming: "vaccinated" finds "vaccination".
        assert_eq!(
            top(&c, &index, "animal got vaccinated"),
            "pets__record_vaccination"
        );
        // A parameter's description is indexed.
        assert_eq!(top(&c, &index, "parrot"), "pets__create_pet");
        // The upstream's title is indexed.
        assert_eq!(top(&c, &index, "music"), "music__remove_playlist");
    }

    #[test]
    fn synonyms_find_the_other_verb() {
        let c = catalog(OPS);
        let index = SearchIndex::build(&c);
        let only = |q: &str, prefix: &str| {
            let q = Query::parse(q).unwrap().with_prefix(prefix);
            names(&c, &index.search(&q, |_| true))
        };
        // Neither tool has the other verb anywhere.
        assert_eq!(only("remove a pet", "pets")[0], "pets__delete_pet");
        assert_eq!(only("delete", "music"), ["music__remove_playlist"]);
    }

    #[test]
    fn filter_prefix_and_limit_bound_the_results() {
        let c = catalog(OPS);
        let index = SearchIndex::build(&c);
        let q = Query::parse("pet").unwrap();
        let all = index.search(&q, |_| true);
        assert!(all.len() >= 4, "{:?}", names(&c, &all));
        // Best first, ties in catalog order.
        for w in all.windows(2) {
            assert!(w[0].score > w[1].score || (w[0].score == w[1].score && w[0].tool < w[1].tool));
        }
        let create = all
            .iter()
            .find(|h| names(&c, &[**h])[0] == "pets__create_pet")
            .unwrap()
            .tool;
        let filtered = index.search(&q, |t| t != create);
        assert!(!filtered.iter().any(|h| h.tool == create));
        assert_eq!(filtered.len(), all.len() - 1);
        let two = index.search(&q.clone().with_limit(2).unwrap(), |_| true);
        assert_eq!(two, all[..2]);
        let q = Query::parse("remove").unwrap();
        assert_eq!(
            names(&c, &index.search(&q.clone().with_prefix("pets"), |_| true)),
            ["pets__delete_pet"]
        );
        assert_eq!(
            names(&c, &index.search(&q.clone().with_prefix("music"), |_| true)),
            ["music__remove_playlist"]
        );
        assert!(index.search(&q.with_prefix("nope"), |_| true).is_empty());
        // The filter is asked only until the limit is reached.
        let mut asked = 0;
        let one = Query::parse("pet").unwrap().with_limit(1).unwrap();
        index.search(&one, |_| {
            asked += 1;
            true
        });
        assert_eq!(asked, 1);
    }

    #[test]
    fn queries_are_bounded() {
        let long = "pet ".repeat(300);
        assert_eq!(
            Query::parse(&long),
            Err(QueryError::TooLong { bytes: long.len() })
        );
        let many = "pet ".repeat(65);
        assert_eq!(
            Query::parse(&many),
            Err(QueryError::TooManyTerms { terms: 65 })
        );
        assert!(Query::parse(&"pet ".repeat(64)).is_ok());
        let q = Query::parse("pet").unwrap();
        assert_eq!(q.limit(), DEFAULT_LIMIT);
        assert_eq!(q.clone().with_limit(0), Err(QueryError::Limit { limit: 0 }));
        assert_eq!(
            q.clone().with_limit(51),
            Err(QueryError::Limit { limit: 51 })
        );
        assert_eq!(q.with_limit(50).unwrap().limit(), 50);
    }

    #[test]
    fn empty_and_unknown_queries_find_nothing() {
        let c = catalog(OPS);
        let index = SearchIndex::build(&c);
        for q in ["", "   ", "the of and", "zebra", "__"] {
            let q = Query::parse(q).unwrap();
            assert!(index.search(&q, |_| true).is_empty());
        }
        assert!(Query::parse("the of").unwrap().is_empty());
    }

    #[test]
    fn an_empty_catalog_has_an_empty_index() {
        let index = SearchIndex::build(&Catalog::new(Vec::new()));
        assert!(index.is_empty());
        assert!(index
            .search(&Query::parse("pets").unwrap(), |_| true)
            .is_empty());
    }

    #[test]
    fn cjk_text_is_indexed_by_character_pairs() {
        let s = Stemmer::create(Algorithm::English);
        let mut terms = Vec::new();
        terms_of(&s, Word::Cjk("納品書"), |t| {
            if let Term::Exact(t) = t {
                terms.push(t)
            }
        });
        assert_eq!(terms, ["納品", "品書"]);
        let ops = r#""/slips/{id}/cancel": {"post": {"operationId": "slipsCancel",
            "summary": "納品書の取消", "parameters": [{"name": "id", "in": "path",
            "required": true, "schema": {"type": "string"}}],
            "responses": {"200": {"description": "ok"}}}},
          "/invoices": {"get": {"operationId": "invoicesIndex", "summary": "請求書一覧の取得",
            "responses": {"200": {"description": "ok"}}}}"#;
        let c = catalog(ops);
        let index = SearchIndex::build(&c);
        assert_eq!(top(&c, &index, "納品書を取消したい"), "pets__slips_cancel");
        assert_eq!(top(&c, &index, "請求書の一覧"), "pets__invoices_index");
    }

    #[test]
    fn words_the_stemmer_keeps_apart_still_match_by_their_start() {
        let ops = r#""/subscription": {"delete": {"operationId": "deleteSubscription",
            "summary": "Remove the subscription", "responses": {"204": {"description": "ok"}}}},
          "/pets": {"get": {"operationId": "listPets", "summary": "List pets",
            "responses": {"200": {"description": "ok"}}}}"#;
        let c = catalog(ops);
        let index = SearchIndex::build(&c);
        assert_eq!(
            top(&c, &index, "unsubscribe, I mean subscribe"),
            "pets__delete_subscription"
        );
    }

    #[test]
    fn short_forms_and_phrases_find_each_other() {
        let ops = r#""/orgs": {"post": {"operationId": "orgCreate", "summary": "Create an org",
            "responses": {"201": {"description": "ok"}}}},
          "/collections": {"post": {"operationId": "createCollection", "summary": "Create a collection",
            "responses": {"201": {"description": "ok"}}}},
          "/jobs/{id}/log": {"get": {"operationId": "getJobLog", "summary": "Get the log of a job",
            "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "string"}}],
            "responses": {"200": {"description": "ok"}}}},
          "/system/gc/{id}/log": {"get": {"operationId": "getGcLog", "summary": "Get gc job log",
            "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "string"}}],
            "responses": {"200": {"description": "ok"}}}},
          "/users": {"post": {"operationId": "createUser", "summary": "Create a user",
            "responses": {"201": {"description": "ok"}}}}"#;
        let c = catalog(ops);
        let index = SearchIndex::build(&c);
        // "organization" finds "org" as well as the word itself would.
        assert_eq!(top(&c, &index, "new organization"), "pets__org_create");
        // A two-word phrase stands for a short form (the job log would
        // come first otherwise: it is first in the catalog).
        assert_eq!(
            top(&c, &index, "the log of a garbage collection job"),
            "pets__get_gc_log"
        );
    }

    #[test]
    fn compounds_are_joined_and_split_as_the_catalog_writes_them() {
        let ops = r#""/user/hooks/{id}": {"delete": {"operationId": "userDeleteHook", "summary": "Delete a hook",
            "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "string"}}],
            "responses": {"204": {"description": "ok"}}}},
          "/user/books/{id}": {"delete": {"operationId": "userDeleteBook", "summary": "Delete a book from the web shelf",
            "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "string"}}],
            "responses": {"204": {"description": "ok"}}}},
          "/downloadclient": {"get": {"operationId": "listDownloadclient",
            "responses": {"200": {"description": "ok"}}}},
          "/downloads": {"get": {"operationId": "listDownloads", "summary": "List finished downloads",
            "responses": {"200": {"description": "ok"}}}}"#;
        let c = catalog(ops);
        let index = SearchIndex::build(&c);
        // "webhook" is split into two words the catalog has.
        assert_eq!(
            top(&c, &index, "remove my webhook"),
            "pets__user_delete_hook"
        );
        // "download clients" is joined into the word the catalog has.
        assert_eq!(
            top(&c, &index, "list the download clients"),
            "pets__list_downloadclient"
        );
        // Only into words the catalog has: nothing to split here.
        assert!(index
            .compounds(&Query::parse("zebrafish").unwrap())
            .is_empty());
    }

    #[test]
    fn parameter_schemas_of_any_shape_are_read_or_skipped() {
        let p = Params::of(
            r#"{"type":"object","properties":{"a":{"type":"string","description":"the A","items":{"description":"nested"}},"b":true,"c":{"description":5}}}"#,
        );
        assert_eq!(
            p.top,
            [
                ("a".to_string(), Some("the A".to_string())),
                ("b".to_string(), None),
                ("c".to_string(), None)
            ]
        );
        assert!(Params::of("{}").top.is_empty());
        assert!(Params::of(r#"{"properties": 3}"#).top.is_empty());
        // One level down: a body's properties, also through `allOf` and
        // `items`; not two.
        let p = Params::of(
            r#"{"properties":{"body":{"type":"object","properties":{"name":{"description":"the name","properties":{"deep":{}}}},
              "allOf":[{"properties":{"color":{}}},true]},"ids":{"items":{"properties":{"gid":{}}}}}}"#,
        );
        assert_eq!(
            p.nested,
            [
                ("name".to_string(), Some("the name".to_string())),
                ("color".to_string(), None),
                ("gid".to_string(), None)
            ]
        );
    }
}
