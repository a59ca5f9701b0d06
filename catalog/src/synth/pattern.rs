//! Pattern synthesis: a string that matches a regex of the subset API
//! documents use (literals, classes, groups, alternation, repetition).

use super::MAX_LEN;

/// One regex element with its repetition bounds.
#[derive(Debug, Clone)]
enum Atom {
    Char(char),
    /// Ranges of a character class; `negated` classes pick outside them.
    Class {
        ranges: Vec<(char, char)>,
        negated: bool,
    },
    Any,
    /// Alternatives of a group; the first is used.
    Group(Vec<Vec<(Atom, usize, usize)>>),
}

/// A string matching `pattern` (a common regex subset) with at least
/// `min_len` characters if the repetitions allow it. `None` for unsupported
/// syntax (backreferences, lookaround, ...).
pub(super) fn from_pattern(pattern: &str, min_len: usize) -> Option<String> {
    let chars: Vec<char> = pattern.chars().collect();
    let mut pos = 0;
    let alts = parse_alts(&chars, &mut pos, 0)?;
    if pos != chars.len() {
        return None;
    }
    let seq = alts.into_iter().next()?;
    let mut out = String::new();
    emit(&seq, min_len, &mut out);
    Some(out)
}

const MAX_REGEX_NESTING: usize = 16;

fn parse_alts(
    c: &[char],
    pos: &mut usize,
    nesting: usize,
) -> Option<Vec<Vec<(Atom, usize, usize)>>> {
    if nesting > MAX_REGEX_NESTING {
        return None;
    }
    let mut alts = vec![Vec::new()];
    while let Some(&ch) = c.get(*pos) {
        let atom = match ch {
            ')' => break,
            '|' => {
                *pos += 1;
                alts.push(Vec::new());
                continue;
            }
            '^' | '$' => {
                *pos += 1;
                continue;
            }
            '(' => {
                *pos += 1;
                if c.get(*pos) == Some(&'?') {
                    // Only non-capturing groups are understood.
                    if c.get(*pos + 1) == Some(&':') {
                        *pos += 2;
                    } else {
                        return None;
                    }
                }
                let inner = parse_alts(c, pos, nesting + 1)?;
                if c.get(*pos) != Some(&')') {
                    return None;
                }
                *pos += 1;
                Atom::Group(inner)
            }
            '[' => {
                *pos += 1;
                parse_class(c, pos)?
            }
            '.' => {
                *pos += 1;
                Atom::Any
            }
            '\\' => {
                *pos += 1;
                let e = *c.get(*pos)?;
                *pos += 1;
                escape_atom(e)?
            }
            '*' | '+' | '?' | '{' => return None,
            other => {
                *pos += 1;
                Atom::Char(other)
            }
        };
        let (min, max) = parse_quantifier(c, pos);
        alts.last_mut()?.push((atom, min, max));
    }
    Some(alts)
}

fn escape_atom(e: char) -> Option<Atom> {
    Some(match e {
        'd' => Atom::Class {
            ranges: vec![('0', '9')],
            negated: false,
        },
        'w' => Atom::Class {
            ranges: vec![('a', 'z'), ('A', 'Z'), ('0', '9'), ('_', '_')],
            negated: false,
        },
        's' => Atom::Char(' '),
        'D' | 'W' | 'S' => Atom::Class {
            ranges: match e {
                'D' => vec![('0', '9')],
                'W' => vec![('a', 'z'), ('A', 'Z'), ('0', '9'), ('_', '_')],
                _ => vec![(' ', ' '), ('\t', '\r')],
            },
            negated: true,
        },
        'n' => Atom::Char('\n'),
        't' => Atom::Char('\t'),
        'b' | 'B' | 'A' | 'z' | 'Z' => Atom::Group(vec![Vec::new()]),
        c if c.is_ascii_digit() => return None,
        c if c.is_ascii_alphabetic() => return None,
        c => Atom::Char(c),
    })
}

fn parse_class(c: &[char], pos: &mut usize) -> Option<Atom> {
    let negated = c.get(*pos) == Some(&'^');
    if negated {
        *pos += 1;
    }
    let mut ranges = Vec::new();
    let mut first = true;
    loop {
        let ch = *c.get(*pos)?;
        *pos += 1;
        if ch == ']' && !first {
            break;
        }
        first = false;
        let lo = if ch == '\\' {
            let e = *c.get(*pos)?;
            *pos += 1;
            match escape_atom(e)? {
                Atom::Char(x) => x,
                Atom::Class {
                    ranges: r,
                    negated: false,
                } => {
                    ranges.extend(r);
                    continue;
                }
                _ => continue,
            }
        } else {
            ch
        };
        if c.get(*pos) == Some(&'-') && c.get(*pos + 1).is_some_and(|n| *n != ']') {
            let hi = *c.get(*pos + 1)?;
            *pos += 2;
            let hi = if hi == '\\' {
                let e = *c.get(*pos)?;
                *pos += 1;
                e
            } else {
                hi
            };
            ranges.push((lo, hi));
        } else {
            ranges.push((lo, lo));
        }
    }
    Some(Atom::Class { ranges, negated })
}

fn parse_quantifier(c: &[char], pos: &mut usize) -> (usize, usize) {
    let q = match c.get(*pos) {
        Some('*') => Some((0, usize::MAX)),
        Some('+') => Some((1, usize::MAX)),
        Some('?') => Some((0, 1)),
        Some('{') => {
            let close = c[*pos..].iter().position(|x| *x == '}');
            close.and_then(|end| {
                let body: String = c[*pos + 1..*pos + end].iter().collect();
                let (a, b) = match body.split_once(',') {
                    Some((a, "")) => (a.trim().parse().ok()?, usize::MAX),
                    Some((a, b)) => (a.trim().parse().ok()?, b.trim().parse().ok()?),
                    None => {
                        let n = body.trim().parse().ok()?;
                        (n, n)
                    }
                };
                *pos += end;
                Some((a, b))
            })
        }
        _ => None,
    };
    match q {
        Some((min, max)) => {
            *pos += 1;
            // Lazy/possessive suffixes do not change what matches.
            if matches!(c.get(*pos), Some('?') | Some('+')) {
                *pos += 1;
            }
            (min.min(MAX_LEN), max)
        }
        None => (1, 1),
    }
}

fn emit(seq: &[(Atom, usize, usize)], min_len: usize, out: &mut String) {
    // Minimum repetitions first; then grow the first open-ended element to
    // reach `min_len`.
    let base_len: usize = seq.iter().map(|(a, min, _)| atom_len(a) * min).sum();
    let mut missing = min_len.saturating_sub(base_len);
    for (atom, min, max) in seq {
        let mut reps = *min;
        let unit = atom_len(atom).max(1);
        if missing > 0 && max > min {
            let extra = missing.div_ceil(unit).min(max - min).min(MAX_LEN);
            reps += extra;
            missing = missing.saturating_sub(extra * unit);
        }
        for _ in 0..reps.min(MAX_LEN) {
            emit_atom(atom, out);
        }
    }
}

fn atom_len(a: &Atom) -> usize {
    match a {
        Atom::Group(alts) => alts
            .first()
            .map(|s| s.iter().map(|(a, min, _)| atom_len(a) * min).sum())
            .unwrap_or(0),
        _ => 1,
    }
}

fn emit_atom(a: &Atom, out: &mut String) {
    match a {
        Atom::Char(c) => out.push(*c),
        Atom::Any => out.push('a'),
        Atom::Class {
            ranges,
            negated: false,
        } => {
            // Prefer a letter or digit when the class offers one.
            let pick = ['a', 'A', '0']
                .into_iter()
                .find(|p| ranges.iter().any(|(lo, hi)| lo <= p && p <= hi))
                .or_else(|| ranges.first().map(|(lo, _)| *lo))
                .unwrap_or('a');
            out.push(pick);
        }
        Atom::Class {
            ranges,
            negated: true,
        } => {
            let pick = ['a', 'A', '0', 'x', '-', '_', ' ']
                .into_iter()
                .find(|p| !ranges.iter().any(|(lo, hi)| lo <= p && p <= hi))
                .unwrap_or('~');
            out.push(pick);
        }
        Atom::Group(alts) => {
            if let Some(first) = alts.first() {
                emit(first, 0, out);
            }
        }
    }
}
