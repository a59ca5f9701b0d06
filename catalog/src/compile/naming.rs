//! Tool names: base names from `x-mcp-tool-name`, operationId or method+path;
//! prefixing, length limits, description truncation, conflicts.
//!
//! # Base name ([`base_name`])
//!
//! The first of these that applies:
//!
//! 1. `x-mcp-tool-name`, **verbatim** (no slugging, not even trimming). If it
//!    is not a valid name (see [`is_valid_name`]; this includes the empty
//!    string) it is still returned as is: the caller checks it with
//!    [`is_valid_name`] and rejects the operation naming the bad value, rather
//!    than silently publishing a name the author did not write.
//! 2. The operationId, slugged (below). An operationId that slugs to nothing
//!    (`"{}"`, `"日本"`, `"--"`) counts as absent.
//! 3. A verb for the method, `_`, and the slugged path. Verbs: `GET` without
//!    path parameters → `list`, `GET` with → `get`, `POST` → `create`, `PUT` →
//!    `update`, `DELETE` → `delete`, `PATCH` → `patch`, `HEAD` → `head`,
//!    `OPTIONS` → `options`, `TRACE` → `trace` (methods match
//!    case-insensitively). Any other method is lowercased with characters
//!    outside `[a-z0-9]` turned into `_`; one with nothing left becomes
//!    `call`. "Path parameters" means a `{` in the path key before any
//!    `#fragment`. The path loses its leading `/`s; a `#fragment` (Box has
//!    `/files/{file_id}#get_shared_link` beside `/files/{file_id}`) stays in
//!    the name, its `#` treated like any other non-alphanumeric, so the two
//!    operations get distinct names. A path that slugs to nothing (`/`)
//!    leaves the bare verb (`GET /` → `list`).
//!
//! # Slugging (operationIds and paths), per [`SlugRules`]
//!
//! In this order:
//!
//! 1. Characters: ASCII letters and digits stay. `{` and `}` are dropped with
//!    `replaceBraces`, else become `_`. `/` becomes `_` with
//!    `replaceSlashes`, else `.` (names may not contain `/`; `.` keeps the
//!    hierarchy visible). Everything else — `_`, `.`, `-`, `#`, spaces,
//!    non-ASCII — becomes `_`, so `users.list` and kebab-case ids come out as
//!    snake_case.
//! 2. `splitCamelCase`: `_` before an upper-case letter that follows a
//!    lower-case letter or digit (`fetchPet` → `fetch_Pet`, `V2Users` →
//!    `V2_Users`), and before the last capital of an acronym followed by a
//!    lower-case letter (`getHTTPStatus` → `get_HTTP_Status`).
//! 3. `lowercase`: ASCII lower-casing.
//! 4. `collapseSeparators`: runs of `_` (and runs of `.`) become one.
//! 5. Always: leading and trailing `_` and `.` are trimmed.
//!
//! Defaults give lower-case snake_case: `fetchPet` → `fetch_pet`,
//! `GET /pets/{petId}` → `get_pets_pet_id`. A slug only ever contains
//! `[A-Za-z0-9_.]`.
//!
//! # Full name ([`full_name`])
//!
//! `{prefix}{separator}{base}`, always with the separator (every tool of an
//! upstream starts with `{prefix}{separator}`). Lengths are counted in bytes,
//! which for valid (ASCII) names equals characters and otherwise is the
//! stricter measure. When the name exceeds `maxLength`, the prefix and
//! separator stay whole and the base becomes `{stem}_{hash}`: `hash` is the
//! first [`HASH_LEN`] hex digits of SHA-256 of the *whole* base, so the result
//! is stable across runs and two bases sharing a long stem stay distinct;
//! `stem` is the longest prefix of the base that fits (cut on a UTF-8
//! boundary, trailing `_`/`.`/`-` dropped). With no room for a stem the base
//! is just the hash.
//!
//! The prefix is never cut. If even `{prefix}{separator}{hash}` does not fit,
//! the result is exactly that and is longer than `maxLength`; callers must
//! refuse such settings first — [`check_settings`] does that.
//!
//! # Descriptions ([`truncate_description`])
//!
//! Counted in characters (Unicode scalar values), never cut inside one. `0`
//! turns truncation off. A description at or under the limit is unchanged.
//! A longer one keeps `max - len(suffix)` characters, loses trailing
//! whitespace, and gets the suffix, so the result never exceeds the limit
//! (and is exactly the limit unless whitespace was trimmed). When the suffix
//! is as long as the limit or longer, the description is just cut to the
//! limit without a suffix.
//!
//! # Conflicts ([`resolve_conflicts`])
//!
//! Candidates come in document order. `error`: every later holder of a name
//! is reported paired with the first holder (three operations named `x` give
//! two pairs). `firstWins`: the first holder keeps the name, later ones are
//! rejected. `skip`: every candidate sharing a name is rejected.
//!
//! `qualify` ([`qualify`], before [`resolve_conflicts`]) keeps every
//! candidate. Each group of candidates sharing a name is renamed as a
//! whole, so the result depends on the set of operations and not on their
//! order: every holder becomes `{qualifier}_{base}`, except a *pinned*
//! holder (`x-mcp-tool-name`, the raw request tool) when it is the group's
//! only one, which keeps the name. The qualifier is the first of these
//! that is present for every renamed holder and different for each:
//!
//! 1. the first tag, slugged;
//! 2. the API version: the first path segment like `v2`, `v1beta1`,
//!    `2024-01-01` or `1.1`;
//! 3. the group: the first literal path segment after those the holders
//!    share at the start of their paths;
//! 4. the method, lower-case.
//!
//! When none tells them all apart, each takes all of these it has, joined
//! by `_`, and holders still alike add the [`HASH_LEN`]-hex hash of their
//! `METHOD path`. The qualified base goes through [`full_name`], so it keeps
//! within `maxLength` by the stable hash rule. A qualified name that then
//! meets another name is renamed again, `{qualified base}_{hash}` with the
//! hash of the round and `METHOD path`, until no two names are alike.

use std::collections::{BTreeMap, HashMap};

use sha2::{Digest, Sha256};

use crate::error::{CompileError, NameConflict, NameConflicts};
use crate::options::{ConflictResolution, NamingOptions, SlugRules};

/// Hex digits of the hash that makes a shortened name unique.
pub const HASH_LEN: usize = 8;

/// What a base name is made from.
#[derive(Debug, Clone, Copy)]
pub struct NameSource<'a> {
    /// Upper-case method.
    pub method: &'a str,
    /// Path key, possibly with a `#fragment`.
    pub path: &'a str,
    pub operation_id: Option<&'a str>,
    /// `x-mcp-tool-name`, used verbatim.
    pub tool_name: Option<&'a str>,
}

/// The base name (without prefix). Never empty, except for an empty
/// `x-mcp-tool-name`, which is returned verbatim like any other (the caller
/// rejects it with [`is_valid_name`]).
pub fn base_name(src: &NameSource<'_>, rules: &SlugRules) -> String {
    if let Some(name) = src.tool_name {
        return name.to_string();
    }
    if let Some(id) = src.operation_id {
        let slug = slugify(id, rules);
        if !slug.is_empty() {
            return slug;
        }
    }
    let (path_part, _fragment) = src.path.split_once('#').unwrap_or((src.path, ""));
    let verb = method_verb(src.method, path_part.contains('{'));
    let path_slug = slugify(src.path.trim_start_matches('/'), rules);
    if path_slug.is_empty() {
        verb
    } else {
        format!("{verb}_{path_slug}")
    }
}

fn method_verb(method: &str, has_path_params: bool) -> String {
    let known = [
        ("GET", if has_path_params { "get" } else { "list" }),
        ("POST", "create"),
        ("PUT", "update"),
        ("DELETE", "delete"),
        ("PATCH", "patch"),
        ("HEAD", "head"),
        ("OPTIONS", "options"),
        ("TRACE", "trace"),
    ];
    if let Some((_, verb)) = known.iter().find(|(m, _)| m.eq_ignore_ascii_case(method)) {
        return (*verb).to_string();
    }
    let rules = SlugRules {
        replace_slashes: true,
        replace_braces: true,
        lowercase: true,
        collapse_separators: true,
        split_camel_case: false,
    };
    let verb = slugify(method, &rules);
    if verb.is_empty() {
        "call".to_string()
    } else {
        verb
    }
}

/// Turns free text (an operationId, a path) into `[A-Za-z0-9_.]*`; see the
/// module docs for the rules. May return an empty string.
fn slugify(raw: &str, rules: &SlugRules) -> String {
    let mut mapped: Vec<u8> = Vec::with_capacity(raw.len());
    for c in raw.chars() {
        match c {
            'A'..='Z' | 'a'..='z' | '0'..='9' => mapped.push(c as u8),
            '{' | '}' if rules.replace_braces => {}
            '/' if !rules.replace_slashes => mapped.push(b'.'),
            _ => mapped.push(b'_'),
        }
    }

    let mut split: Vec<u8> = Vec::with_capacity(mapped.len() + mapped.len() / 4);
    for (i, &b) in mapped.iter().enumerate() {
        if rules.split_camel_case && b.is_ascii_uppercase() && i > 0 {
            let prev = mapped[i - 1];
            let next_is_lower = mapped.get(i + 1).is_some_and(u8::is_ascii_lowercase);
            if prev.is_ascii_lowercase()
                || prev.is_ascii_digit()
                || (prev.is_ascii_uppercase() && next_is_lower)
            {
                split.push(b'_');
            }
        }
        split.push(b);
    }

    if rules.lowercase {
        split.make_ascii_lowercase();
    }

    let mut out = String::with_capacity(split.len());
    for b in split {
        let c = char::from(b);
        if rules.collapse_separators && matches!(c, '_' | '.') && out.ends_with(c) {
            continue;
        }
        out.push(c);
    }
    out.trim_matches(|c| c == '_' || c == '.').to_string()
}

/// `{prefix}{separator}{base}`, shortened to `max_length` with a stable hash
/// suffix when needed; the prefix is never cut (see the module docs for the
/// case where even the hash does not fit).
pub fn full_name(prefix: &str, base: &str, opts: &NamingOptions) -> String {
    let head_len = prefix.len() + opts.separator.len();
    if head_len + base.len() <= opts.max_length {
        return format!("{prefix}{}{base}", opts.separator);
    }
    let hash = short_hash(base);
    let room = opts.max_length.saturating_sub(head_len);
    // Room for at least one stem byte, the `_` joiner and the hash.
    let stem = if room > HASH_LEN + 1 {
        let mut cut = room - HASH_LEN - 1;
        while !base.is_char_boundary(cut) {
            cut -= 1;
        }
        base[..cut].trim_end_matches(['_', '.', '-'])
    } else {
        ""
    };
    if stem.is_empty() {
        format!("{prefix}{}{hash}", opts.separator)
    } else {
        format!("{prefix}{}{stem}_{hash}", opts.separator)
    }
}

fn short_hash(base: &str) -> String {
    let digest = Sha256::digest(base.as_bytes());
    let mut hex = hex::encode(&digest[..HASH_LEN.div_ceil(2)]);
    hex.truncate(HASH_LEN);
    hex
}

/// The smallest `maxLength` under which [`full_name`] can honour the limit
/// for every base: prefix, separator and the hash.
pub fn min_max_length(prefix: &str, opts: &NamingOptions) -> usize {
    prefix.len() + opts.separator.len() + HASH_LEN
}

/// Refuses naming settings under which names could be invalid or too long:
/// a separator outside `[A-Za-z0-9_.-]`, or a `maxLength` below
/// [`min_max_length`]. The prefix itself is validated by its owner.
pub fn check_settings(prefix: &str, opts: &NamingOptions) -> Result<(), CompileError> {
    if !opts.separator.is_empty() && !is_valid_name(&opts.separator) {
        return Err(CompileError::Options {
            field: "naming.separator".into(),
            message: format!(
                "{:?} may only contain letters, digits, `_`, `.` and `-`",
                opts.separator
            ),
        });
    }
    let min = min_max_length(prefix, opts);
    if opts.max_length < min {
        return Err(CompileError::Options {
            field: "naming.maxLength".into(),
            message: format!(
                "{} is too small for prefix {prefix:?}: prefix, separator and a \
                 {HASH_LEN}-character hash need at least {min}",
                opts.max_length
            ),
        });
    }
    Ok(())
}

/// Whether `name` is a valid MCP tool name for toolgate (`^[A-Za-z0-9_.-]+$`).
pub fn is_valid_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
}

/// Truncates a description to `description_max_length` characters (0 = off),
/// ending with the suffix, which counts toward the limit.
pub fn truncate_description(desc: &str, opts: &NamingOptions) -> String {
    let max = opts.description_max_length;
    if max == 0 {
        return desc.to_string();
    }
    // Byte offset just past the first `n` characters, or None if shorter.
    let byte_end = |n: usize| desc.char_indices().nth(n).map(|(i, _)| i);
    let Some(limit_end) = byte_end(max) else {
        return desc.to_string();
    };
    let suffix = opts.description_truncation_suffix.as_str();
    let suffix_chars = suffix.chars().count();
    if suffix_chars >= max {
        return desc[..limit_end].to_string();
    }
    let keep_end = byte_end(max - suffix_chars).unwrap_or(desc.len());
    format!("{}{suffix}", desc[..keep_end].trim_end())
}

/// A named candidate, in document order.
#[derive(Debug, Clone)]
pub struct Candidate {
    /// The full name.
    pub name: String,
    /// The name without prefix and separator, as [`base_name`] made it.
    pub base: String,
    pub method: String,
    pub path: String,
    /// The operation's first tag, a qualifier for `qualify`.
    pub tag: Option<String>,
    /// Named on purpose (`x-mcp-tool-name`, the raw request tool): keeps
    /// its name under `qualify` when no other holder of it is pinned.
    pub pinned: bool,
}

/// Applies `conflictResolution`. Returns, for each candidate (same order),
/// `true` when it keeps its name, `false` when it is rejected for a conflict.
/// With `Error`, any conflict yields every conflicting pair. `Qualify`
/// expects names [`qualify`] made unique and, should two still be alike,
/// keeps the first like `FirstWins`.
pub fn resolve_conflicts(
    candidates: &[Candidate],
    mode: ConflictResolution,
) -> Result<Vec<bool>, NameConflicts> {
    let mut first_holder: HashMap<&str, usize> = HashMap::new();
    let mut keep = vec![true; candidates.len()];
    let mut conflicts = Vec::new();
    for (i, c) in candidates.iter().enumerate() {
        let Some(&first) = first_holder.get(c.name.as_str()) else {
            first_holder.insert(&c.name, i);
            continue;
        };
        keep[i] = false;
        if mode == ConflictResolution::Skip {
            keep[first] = false;
        }
        let holder = &candidates[first];
        conflicts.push(NameConflict {
            name: c.name.clone(),
            first: (holder.method.clone(), holder.path.clone()),
            second: (c.method.clone(), c.path.clone()),
        });
    }
    if mode == ConflictResolution::Error && !conflicts.is_empty() {
        return Err(NameConflicts { conflicts });
    }
    Ok(keep)
}

/// A renaming by [`qualify`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Qualified {
    /// The new full name.
    pub name: String,
    /// The new name without prefix and separator.
    pub base: String,
}

/// `conflictResolution: qualify`: for each candidate (same order), its new
/// name, or `None` when it keeps its own; see the module docs for the rule.
/// The names that result are unique.
pub fn qualify(
    candidates: &[Candidate],
    prefix: &str,
    opts: &NamingOptions,
) -> Vec<Option<Qualified>> {
    let mut out: Vec<Option<Qualified>> = vec![None; candidates.len()];
    for members in collisions(candidates, &out) {
        let pinned: Vec<usize> = members
            .iter()
            .copied()
            .filter(|&i| candidates[i].pinned)
            .collect();
        let movers: Vec<usize> = match pinned.as_slice() {
            [keeper] => members.into_iter().filter(|i| i != keeper).collect(),
            _ => members,
        };
        let group: Vec<&Candidate> = movers.iter().map(|&i| &candidates[i]).collect();
        for (&i, q) in movers.iter().zip(qualifiers(&group, &opts.slug)) {
            let base = format!("{q}_{}", candidates[i].base);
            out[i] = Some(Qualified {
                name: full_name(prefix, &base, opts),
                base,
            });
        }
    }
    // A qualified name may meet a name some other operation has.
    let mut round = 1u32;
    loop {
        let groups = collisions(candidates, &out);
        if groups.is_empty() || round > 64 {
            return out;
        }
        for members in groups {
            for i in members {
                // Only the renamed move again: the others had the name first.
                let Some(q) = &out[i] else { continue };
                let c = &candidates[i];
                let base = format!(
                    "{}_{}",
                    q.base,
                    short_hash(&format!("{round} {} {}", c.method, c.path))
                );
                out[i] = Some(Qualified {
                    name: full_name(prefix, &base, opts),
                    base,
                });
            }
        }
        round += 1;
    }
}

/// Groups of candidates (indices, ascending) whose current names are alike,
/// ordered by name.
fn collisions(candidates: &[Candidate], renamed: &[Option<Qualified>]) -> Vec<Vec<usize>> {
    let mut by_name: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for (i, c) in candidates.iter().enumerate() {
        let name = renamed[i]
            .as_ref()
            .map_or(c.name.as_str(), |q| q.name.as_str());
        by_name.entry(name).or_default().push(i);
    }
    by_name.into_values().filter(|m| m.len() > 1).collect()
}

/// One qualifier per candidate of a group (same order), by the first rule
/// of the module docs that tells them all apart.
fn qualifiers(group: &[&Candidate], rules: &SlugRules) -> Vec<String> {
    let segments: Vec<Vec<&str>> = group.iter().map(|c| literal_segments(&c.path)).collect();
    let shared = segments
        .iter()
        .skip(1)
        .fold(segments.first().map_or(0, Vec::len), |n, s| {
            n.min(
                s.iter()
                    .zip(&segments[0])
                    .take_while(|(a, b)| a == b)
                    .count(),
            )
        });
    let levels: [Vec<Option<String>>; 4] = [
        group
            .iter()
            .map(|c| c.tag.as_deref().map(|t| slugify(t, rules)))
            .collect(),
        segments
            .iter()
            .map(|s| {
                s.iter()
                    .find(|seg| is_version(seg))
                    .map(|v| slugify(v, rules))
            })
            .collect(),
        segments
            .iter()
            .map(|s| s.get(shared).map(|g| slugify(g, rules)))
            .collect(),
        group
            .iter()
            .map(|c| Some(method_verb_plain(&c.method)))
            .collect(),
    ];
    let levels: Vec<Vec<Option<String>>> = levels
        .into_iter()
        .map(|l| l.into_iter().map(|q| q.filter(|q| !q.is_empty())).collect())
        .collect();
    for level in &levels {
        if let Some(qs) = level.iter().cloned().collect::<Option<Vec<String>>>() {
            if all_distinct(&qs) {
                return qs;
            }
        }
    }
    let mut combined: Vec<String> = (0..group.len())
        .map(|i| {
            let mut parts: Vec<&str> = Vec::new();
            for level in &levels {
                if let Some(q) = &level[i] {
                    if !parts.contains(&q.as_str()) {
                        parts.push(q);
                    }
                }
            }
            parts.join("_")
        })
        .collect();
    let alike: Vec<bool> = (0..group.len())
        .map(|i| (0..group.len()).any(|j| j != i && combined[j] == combined[i]))
        .collect();
    for (i, c) in group.iter().enumerate() {
        if alike[i] {
            combined[i] = format!(
                "{}_{}",
                combined[i],
                short_hash(&format!("{} {}", c.method, c.path))
            );
        }
    }
    combined
}

fn all_distinct(qs: &[String]) -> bool {
    let mut seen = std::collections::HashSet::with_capacity(qs.len());
    qs.iter().all(|q| seen.insert(q))
}

/// The path's segments without parameters (`{id}`) and `#fragment`.
fn literal_segments(path: &str) -> Vec<&str> {
    let path = path.split('#').next().unwrap_or(path);
    path.split('/')
        .filter(|s| !s.is_empty() && !s.contains('{'))
        .collect()
}

/// `v2`, `v1beta1`, `v2alpha`, `2024-01-01`, `1.1`: an API version.
fn is_version(seg: &str) -> bool {
    let b = seg.as_bytes();
    let digits = |s: &[u8]| !s.is_empty() && s.iter().all(u8::is_ascii_digit);
    if let Some(rest) = seg.strip_prefix(['v', 'V']) {
        let n = rest.bytes().take_while(u8::is_ascii_digit).count();
        let tail = &rest[n..];
        return n > 0
            && (tail.is_empty()
                || ["alpha", "beta"].iter().any(|p| {
                    tail.strip_prefix(p)
                        .is_some_and(|d| d.is_empty() || digits(d.as_bytes()))
                }));
    }
    let date = b.len() == 10
        && digits(&b[..4])
        && b[4] == b'-'
        && digits(&b[5..7])
        && b[7] == b'-'
        && digits(&b[8..]);
    date || (seg.split('.').all(|p| digits(p.as_bytes()))
        && b.first().is_some_and(u8::is_ascii_digit))
}

/// The method as a qualifier: lower-case, `[a-z0-9_]` only.
fn method_verb_plain(method: &str) -> String {
    method
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '_'
            }
        })
        .collect::<String>()
        .trim_matches('_')
        .to_string()
}

#[cfg(test)]
mod tests;
