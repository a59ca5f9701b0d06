//! A query, parsed and bounded: its terms with their weights and its intent.

use rust_stemmers::{Algorithm, Stemmer};

use super::intent::*;
use super::vocabulary::*;
use super::words::*;
use super::*;

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
pub(super) struct QueryTerm {
    pub(super) term: String,
    pub(super) weight: f32,
    /// The query words it stands for, one bit each (a query has at most
    /// [`MAX_QUERY_TERMS`], 64): what coverage counts. Two for the
    /// compound of two words.
    pub(super) words: u64,
}

/// A parsed search query: its terms, how many results, and an optional
/// upstream prefix to search within.
#[derive(Debug, Clone, PartialEq)]
pub struct Query {
    /// Each term once, at its highest weight: a word's own terms at 1,
    /// its truncation at [`TRUNCATED_WEIGHT`], its synonyms at
    /// [`SYNONYM_WEIGHT`].
    pub(super) terms: Vec<QueryTerm>,
    /// The query's plain words, lower-cased and unstemmed, with their
    /// position among the words: what [`SearchIndex::compounds`] joins
    /// and splits.
    pub(super) plain: Vec<(String, u8)>,
    /// Query words with at least one term.
    pub(super) words: usize,
    /// Whether the query reads or changes something.
    pub(super) intent: Intent,
    /// Whether it is about one item or many.
    pub(super) count: Count,
    pub(super) limit: usize,
    pub(super) prefix: Option<String>,
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
