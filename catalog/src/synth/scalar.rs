//! Numbers and strings built from their constraints: bounds and
//! `multipleOf`, lengths, formats and patterns.

use serde_json::{json, Map, Value};

use super::pattern::from_pattern;
use super::{count, MAX_LEN};

fn num(s: &Map<String, Value>, key: &str) -> Option<f64> {
    s.get(key).and_then(Value::as_f64).filter(|f| f.is_finite())
}

/// A numeric bound and whether it is exclusive.
type Bound = (f64, bool);

/// Lower/upper bounds with exclusiveness, accepting both the 2020-12 numeric
/// form and the draft-4 boolean form of `exclusiveMinimum`/`exclusiveMaximum`.
fn bounds(s: &Map<String, Value>) -> (Option<Bound>, Option<Bound>) {
    let mut lo = num(s, "minimum").map(|m| (m, s.get("exclusiveMinimum") == Some(&json!(true))));
    if let Some(e) = num(s, "exclusiveMinimum") {
        if lo.is_none_or(|(m, _)| e >= m) {
            lo = Some((e, true));
        }
    }
    let mut hi = num(s, "maximum").map(|m| (m, s.get("exclusiveMaximum") == Some(&json!(true))));
    if let Some(e) = num(s, "exclusiveMaximum") {
        if hi.is_none_or(|(m, _)| e <= m) {
            hi = Some((e, true));
        }
    }
    (lo, hi)
}

pub(super) fn integer(s: &Map<String, Value>) -> Value {
    let (lo, hi) = bounds(s);
    let lo = lo.map(|(m, excl)| {
        let c = m.ceil();
        if excl && c == m {
            c + 1.0
        } else {
            c
        }
    });
    let hi = hi.map(|(m, excl)| {
        let f = m.floor();
        if excl && f == m {
            f - 1.0
        } else {
            f
        }
    });
    let step = num(s, "multipleOf").filter(|m| *m > 0.0 && m.fract() == 0.0);
    let v = choose(lo, hi, 1.0, step);
    if v.abs() < 9.0e15 {
        Value::from(v as i64)
    } else {
        Value::from(v)
    }
}

pub(super) fn number(s: &Map<String, Value>) -> Value {
    let (lo, hi) = bounds(s);
    let step = num(s, "multipleOf").filter(|m| *m > 0.0);
    // Exclusive bounds: move inside by a margin that fits between them.
    let gap = match (lo, hi) {
        (Some((l, _)), Some((h, _))) if h > l => ((h - l) / 2.0).min(1.0),
        _ => 1.0,
    };
    let lo = lo.map(|(m, excl)| if excl { m + gap } else { m });
    let hi = hi.map(|(m, excl)| if excl { m - gap } else { m });
    let v = choose(lo, hi, 1.0, step);
    if v.fract() == 0.0 && v.abs() < 9.0e15 {
        Value::from(v as i64)
    } else {
        Value::from(v)
    }
}

/// `preferred` if within bounds, else the lowest allowed value; rounded up
/// to a multiple of `step` when given.
fn choose(lo: Option<f64>, hi: Option<f64>, preferred: f64, step: Option<f64>) -> f64 {
    let mut v = match (lo, hi) {
        (Some(l), _) if preferred < l => l,
        (_, Some(h)) if preferred > h => h,
        _ => preferred,
    };
    if let Some(m) = step {
        let up = (v / m).ceil() * m;
        let down = (v / m).floor() * m;
        v = if hi.is_none_or(|h| up <= h) { up } else { down };
        if !v.is_finite() {
            v = 0.0;
        }
    }
    v
}

pub(super) fn string(s: &Map<String, Value>) -> Value {
    let min = count(s, "minLength").unwrap_or(0).min(MAX_LEN);
    let max = count(s, "maxLength").unwrap_or(usize::MAX);
    let fit = |c: &str| {
        let n = c.chars().count();
        n >= min && n <= max
    };
    let format = s.get("format").and_then(Value::as_str).unwrap_or("");
    let formatted = match format {
        "date-time" => Some("2024-01-01T00:00:00Z"),
        "date" => Some("2024-01-01"),
        "time" => Some("00:00:00Z"),
        "duration" => Some("P1D"),
        "email" | "idn-email" => Some("user@example.com"),
        "hostname" | "idn-hostname" => Some("example.com"),
        "ipv4" => Some("192.0.2.1"),
        "ipv6" => Some("2001:db8::1"),
        "uuid" => Some("00000000-0000-4000-8000-000000000000"),
        "uri" | "iri" | "url" => Some("https://example.com/"),
        "uri-reference" | "iri-reference" => Some("/example"),
        "uri-template" => Some("/example/{id}"),
        "json-pointer" => Some("/example"),
        "regex" => Some(".*"),
        // base64 of "example", a multiple of 4 characters.
        "byte" | "binary" | "base64" => Some("ZXhhbXBsZQ=="),
        _ => None,
    };

    let Some(pattern) = s.get("pattern").and_then(Value::as_str) else {
        let base = formatted.unwrap_or("example");
        return Value::String(pad(base, min, max));
    };
    // Prefer a value that matches the pattern; check candidates with the
    // same regex engine the validator uses.
    let matcher = jsonschema::validator_for(&json!({"pattern": pattern})).ok();
    let matches = |c: &str| {
        matcher
            .as_ref()
            .is_none_or(|m| m.is_valid(&Value::String(c.to_string())))
    };
    let mut candidates: Vec<String> = Vec::new();
    if let Some(f) = formatted {
        candidates.push(f.to_string());
    }
    candidates.extend(from_pattern(pattern, min));
    candidates.extend(from_pattern(pattern, 0));
    for base in ["example", "a", "0", "A", "abc", "123", "a1", "x-1", "a_b"] {
        candidates.push(pad(base, min, max));
    }
    if let Some(c) = candidates.iter().find(|c| fit(c) && matches(c)) {
        return Value::String(c.clone());
    }
    if let Some(c) = candidates.iter().find(|c| matches(c)) {
        return Value::String(c.clone());
    }
    Value::String(pad(formatted.unwrap_or("example"), min, max))
}

fn pad(base: &str, min: usize, max: usize) -> String {
    let mut s: String = base.chars().take(max).collect();
    let n = s.chars().count();
    if n < min {
        s.extend(std::iter::repeat_n('x', min - n));
    }
    s
}
