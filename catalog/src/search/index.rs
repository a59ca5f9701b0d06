//! The index over a catalog's tools (BM25F over weighted fields) and its ranking.

use std::collections::HashMap;

use rust_stemmers::{Algorithm, Stemmer};

use super::params::*;
use super::query::*;
use super::vocabulary::*;
use super::words::*;
use super::*;
use crate::model::{Catalog, Tool, UpstreamCatalog};

/// The indexed fields of a tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Field {
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
pub(super) const FIELDS: [(Field, f32, f32); 9] = [
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
pub(super) const FIELD_COUNT: usize = FIELDS.len();

/// What an HTTP method does, in the words a task uses for it.
pub(super) const METHOD_WORDS: &[(&str, &str)] = &[
    ("GET", "get read"),
    ("POST", "post create add new"),
    ("PUT", "put update replace set"),
    ("PATCH", "patch update edit modify"),
    ("DELETE", "delete remove"),
];

/// BM25's term-frequency saturation.
pub(super) const K1: f32 = 1.2;
/// How much a tool that matches only some of the query's words is
/// discounted: its score times (matched words / words) to this power.
pub(super) const COVERAGE_POWER: f32 = 1.0;

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
pub(super) struct Posting {
    pub(super) tool: u32,
    pub(super) weight: f32,
}

/// The index of one catalog version. Immutable; share it behind an `Arc`.
pub struct SearchIndex {
    pub(super) terms: HashMap<Box<str>, u32, foldhash::fast::RandomState>,
    /// Per term.
    pub(super) idf: Vec<f32>,
    /// Term `t`'s postings are `postings[offsets[t]..offsets[t + 1]]`,
    /// by tool.
    pub(super) offsets: Vec<u32>,
    pub(super) postings: Vec<Posting>,
    /// Per tool: index into `prefixes`.
    pub(super) tool_prefix: Vec<u32>,
    pub(super) prefixes: Vec<Box<str>>,
    /// Per tool: what its method and path say ([`Shape`]).
    pub(super) tool_shape: Vec<Shape>,
}

/// What a tool's HTTP method and path say about it, for [`Intent`] and
/// [`Count`].
#[derive(Debug, Clone, Copy)]
pub(super) struct Shape {
    /// The method reads (`GET`, `HEAD`).
    pub(super) reads: bool,
    /// The path ends in a parameter: it addresses one item.
    pub(super) item: bool,
}

impl Shape {
    pub(super) fn of(tool: &Tool) -> Shape {
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
    pub(super) fn compounds(&self, query: &Query) -> Vec<QueryTerm> {
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

    pub(super) fn contribution(&self, term: usize, query_weight: f32, weight: f32) -> f32 {
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
pub(super) struct Builder {
    pub(super) terms: HashMap<Box<str>, u32, foldhash::fast::RandomState>,
    /// `(tool, term, frequency per field)`, by tool.
    pub(super) entries: Vec<(u32, u32, [u16; FIELD_COUNT])>,
    /// Per tool: words per field.
    pub(super) lengths: Vec<[u32; FIELD_COUNT]>,
    pub(super) tool_prefix: Vec<u32>,
    pub(super) prefixes: Vec<Box<str>>,
    pub(super) tool_shape: Vec<Shape>,
}

impl Builder {
    pub(super) fn add(&mut self, upstream: &UpstreamCatalog, tool: &Tool) {
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

    pub(super) fn finish(self) -> SearchIndex {
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
