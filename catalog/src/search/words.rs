//! The tokenizer: words of a text (letters, digits, CJK runs, identifiers split at case changes), function words, stems and truncated forms.

use rust_stemmers::Stemmer;

use super::*;

/// Words of at least this many letters are also indexed by their first
/// [`TRUNCATED_LEN`] letters, which matches what the stemmer keeps apart
/// (`subscribe`/`subscription`, `permission`/`permit`), at
/// [`TRUNCATED_WEIGHT`]; an exact match then scores on both.
pub(super) const TRUNCATE_FROM: usize = 6;
pub(super) const TRUNCATED_LEN: usize = 5;
pub(super) const TRUNCATED_WEIGHT: f32 = 0.5;

/// Function words: frequent in task descriptions and in documentation, and
/// carrying nothing about which tool fits. Their IDF is low anyway, but
/// dropping them keeps a wordy query from favouring wordy descriptions.
pub(super) const STOP_WORDS: &[&str] = &[
    "a", "about", "already", "am", "an", "and", "any", "are", "as", "at", "be", "been", "being",
    "but", "by", "can", "could", "did", "do", "does", "each", "every", "for", "from", "has",
    "have", "how", "i", "if", "in", "into", "is", "it", "its", "just", "may", "me", "might",
    "must", "my", "of", "on", "one", "or", "our", "own", "please", "should", "so", "some", "that",
    "the", "their", "them", "then", "there", "these", "they", "this", "those", "to", "too", "us",
    "very", "via", "want", "was", "we", "what", "when", "where", "which", "who", "whole", "whose",
    "why", "will", "with", "would", "you", "your",
];

/// A word of a text, as [`split_words`] finds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Word<'a> {
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
pub(super) fn split_words(text: &str, mut f: impl FnMut(Word<'_>)) {
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
pub(super) fn is_cjk(c: char) -> bool {
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
pub(super) enum Term {
    /// The word itself, normalised ([`normalise`]), or a CJK bigram.
    Exact(String),
    /// Its first [`TRUNCATED_LEN`] letters, marked so no word collides.
    Truncated(String),
}

/// Calls `f` with the terms of `word`: for a plain word its normal form
/// and, when long enough, its truncation; for a CJK run its overlapping
/// character pairs (the run itself when one character long), the usual
/// way to index text without word breaks.
pub(super) fn terms_of(stemmer: &Stemmer, word: Word<'_>, mut f: impl FnMut(Term)) {
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
pub(super) fn normalise(stemmer: &Stemmer, word: &str) -> Option<String> {
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
