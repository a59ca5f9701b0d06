//! Tool search: a ranked full-text index over a whole catalog, built once
//! per catalog version, so an agent can find the few tools a task needs
//! instead of reading thousands.
//!
//! Pure and self-contained: no async, no network, no model download.
//!
//! **What is indexed**, per tool, as separate fields with their own
//! weight (`FIELDS`): the name without its prefix, split into words (on
//! `__`, `_`, `.`, camelCase and letter/digit boundaries); the title; the
//! description; the names and descriptions of the top-level input
//! parameters; those of the properties one level down (a request body's
//! fields, also through `allOf`/`anyOf`/`oneOf` and `items`); the tags
//! (`Tool::toolsets`); the upstream (its prefix and its document's
//! title); the words of the HTTP path; and what the HTTP method does
//! ("delete remove" for `DELETE`, `METHOD_WORDS`).
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
//! (`SYNONYMS`) adds the usual other words for the verbs an agent's
//! task and an API's documentation disagree on most (delete/remove,
//! list/show, set up/create, ...); a table of short forms
//! (`EQUIVALENTS`: org/organization, gc/garbage collection, ...) finds
//! either spelling at almost full weight. Entries of both may be phrases.
//! Compounds the query and the catalog write differently are joined or
//! split against the index's own words ("pet store"/*petstore*,
//! "webhook"/*hook*, `SearchIndex::compounds`). A tool's score is then
//! scaled by the share of the query's words it matched, so one rare word
//! does not outweigh the rest of the task.
//! Last, the task's leading verb or question word says whether it reads
//! or changes something ("show the settings of a hook", "which apps have
//! access", against "disable a hook"); a tool whose HTTP method disagrees
//! (a read answered by anything but `GET`/`HEAD`, a change by a `GET`) is
//! scaled down (`Intent`). Documentation words are shared between a
//! resource's read and write operations, so without this "show a hook's
//! settings" ranks the tool that edits them first. Likewise a task that
//! asks for one item ("one", "a specific") or for many ("list", "all",
//! "every") discounts tools whose path says the other (a path ending in a
//! parameter addresses one item, `Count`).
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

mod index;
mod intent;
mod params;
mod query;
mod vocabulary;
mod words;

pub use index::{Hit, SearchIndex};
pub use query::{Query, QueryError};

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

#[cfg(test)]
mod tests;
