//! Values across the boundary: `serde_json` in, jaq's values on the
//! worker, `serde_json` out.
//!
//! Conversion is faithful: integers stay integers (beyond `i64`/`u64` jaq
//! uses big integers; those that do not fit a JSON integer become floats),
//! floats stay floats, object key order is kept both ways (jaq objects and
//! `serde_json` with `preserve_order` are both insertion ordered). Non-finite
//! floats are written like jq does: NaN as `null`, ±infinity as ±`f64::MAX`.
//! jaq object keys that are not strings are an error. The output's size is
//! counted exactly (as compact JSON, the way `serde_json::to_vec` writes it)
//! while it is converted, so a too large output is refused before it is
//! fully built and nobody needs to measure it again.

use jaq_json::{Num, Val};
use serde_json::Value;

use super::{sandbox, JqRunError, MAX_VALUE_DEPTH};

pub(super) fn to_val(v: Value, depth: usize) -> Result<Val, JqRunError> {
    if depth > MAX_VALUE_DEPTH {
        return Err(JqRunError::Failed(format!(
            "input is nested more than {MAX_VALUE_DEPTH} levels deep"
        )));
    }
    Ok(match v {
        Value::Null => Val::Null,
        Value::Bool(b) => Val::Bool(b),
        Value::Number(n) => Val::Num(if let Some(i) = n.as_i64() {
            Num::from_integral(i)
        } else if let Some(u) = n.as_u64() {
            Num::from_integral(u)
        } else {
            Num::Float(n.as_f64().unwrap_or(f64::NAN))
        }),
        Value::String(s) => Val::utf8_str(s.into_bytes()),
        Value::Array(a) => {
            let items = a
                .into_iter()
                .map(|x| to_val(x, depth + 1))
                .collect::<Result<Vec<_>, _>>()?;
            items.into_iter().collect()
        }
        Value::Object(o) => {
            let mut m = jaq_json::Map::default();
            for (k, x) in o {
                m.insert(Val::utf8_str(k.into_bytes()), to_val(x, depth + 1)?);
            }
            Val::obj(m)
        }
    })
}

/// The filter's output as JSON, or [`JqRunError::OutputTooLarge`] as soon
/// as its compact text would pass `max_output_bytes`.
pub(super) fn to_json(v: Val, max_output_bytes: usize) -> Result<Value, JqRunError> {
    let mut budget = OutputBudget {
        left: max_output_bytes,
    };
    from_val(v, 0, &mut budget).map_err(|e| match e {
        Conv::TooLarge => JqRunError::OutputTooLarge(max_output_bytes),
        Conv::Other(e) => e,
    })
}

enum Conv {
    TooLarge,
    Other(JqRunError),
}

/// What is left of the output's size, in bytes of compact JSON.
///
/// NB: [`OutputBudget::take`] is the one check of the output's size.
/// Every byte of the text (punctuation, numbers, strings with their quotes
/// and escapes) is taken through it, so the output is refused at the
/// first byte past the limit and nothing measures it again.
struct OutputBudget {
    left: usize,
}

impl OutputBudget {
    /// Takes `n` bytes, or fails if fewer are left.
    fn take(&mut self, n: usize) -> Result<(), Conv> {
        self.left = self.left.checked_sub(n).ok_or(Conv::TooLarge)?;
        Ok(())
    }
}

/// Converts back, taking the exact size of the compact JSON text from
/// `budget` as it goes, so that a huge output is refused before it is fully
/// built; leaves are measured by serialising them with `serde_json`, the
/// same writer that later writes the whole.
fn from_val(v: Val, depth: usize, budget: &mut OutputBudget) -> Result<Value, Conv> {
    if depth > MAX_VALUE_DEPTH {
        return Err(Conv::Other(JqRunError::Failed(format!(
            "output is nested more than {MAX_VALUE_DEPTH} levels deep"
        ))));
    }
    Ok(match v {
        Val::Null => {
            budget.take(4)?;
            Value::Null
        }
        Val::Bool(b) => {
            budget.take(if b { 4 } else { 5 })?;
            Value::Bool(b)
        }
        Val::Num(n) => {
            let n = num_to_json(&n);
            budget.take(json_len(&n))?;
            n
        }
        Val::TStr(s) | Val::BStr(s) => Value::String(string(&s, budget)?),
        Val::Arr(a) => {
            // brackets and commas
            budget.take(a.len().saturating_sub(1) + 2)?;
            let items = jaq_json::Rc::try_unwrap(a).unwrap_or_else(|a| (*a).clone());
            let mut out = Vec::with_capacity(items.len());
            for x in items {
                out.push(from_val(x, depth + 1, budget)?);
            }
            Value::Array(out)
        }
        Val::Obj(o) => {
            // braces, commas and colons
            budget.take(o.len().saturating_sub(1) + 2 + o.len())?;
            let map = jaq_json::Rc::try_unwrap(o).unwrap_or_else(|o| (*o).clone());
            let mut out = serde_json::Map::with_capacity(map.len());
            for (k, x) in map {
                let key = match k {
                    Val::TStr(s) | Val::BStr(s) => string(&s, budget)?,
                    other => {
                        return Err(Conv::Other(JqRunError::Failed(format!(
                            "object key {} is not a string",
                            sandbox::bounded_display(&other)
                        ))))
                    }
                };
                out.insert(key, from_val(x, depth + 1, budget)?);
            }
            Value::Object(out)
        }
    })
}

/// A string's text (invalid UTF-8 replaced, as when writing it), taken
/// from `budget` with its quotes and escapes.
fn string(s: &[u8], budget: &mut OutputBudget) -> Result<String, Conv> {
    // Its bytes and quotes are taken first, so that a string too large for
    // the output is refused before it is copied; its text as JSON is at
    // least that long (a replaced byte grows to three, escapes only add).
    let least = s.len().saturating_add(2);
    budget.take(least)?;
    let s = String::from_utf8_lossy(s).into_owned();
    budget.take(json_len(&s).saturating_sub(least))?;
    Ok(s)
}

/// Length of `v` as compact JSON, counted without writing the text. Only
/// for a number or a string already within the budget: it counts to the
/// end.
fn json_len(v: &impl serde::Serialize) -> usize {
    struct Counter(usize);
    impl std::io::Write for Counter {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut counter = Counter(0);
    // Writing a string or a number into a counter cannot fail.
    let _ = serde_json::to_writer(&mut counter, v);
    counter.0
}

fn num_to_json(n: &Num) -> Value {
    match n {
        Num::Int(i) => Value::from(*i as i64),
        Num::BigInt(b) => big_to_json(&b.to_string()),
        Num::Float(f) => float_to_json(*f),
        Num::Dec(s) => float_to_json(s.parse::<f64>().unwrap_or(f64::NAN)),
    }
}

fn big_to_json(digits: &str) -> Value {
    if let Ok(i) = digits.parse::<i64>() {
        Value::from(i)
    } else if let Ok(u) = digits.parse::<u64>() {
        Value::from(u)
    } else {
        float_to_json(digits.parse::<f64>().unwrap_or(f64::NAN))
    }
}

fn float_to_json(f: f64) -> Value {
    if f.is_nan() {
        Value::Null
    } else if f.is_infinite() {
        Value::from(if f > 0.0 { f64::MAX } else { f64::MIN })
    } else {
        Value::from(f)
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use super::super::*;
    use serde_json::json;
    use std::time::Duration;

    #[test]
    fn numbers_and_key_order_convert_faithfully() {
        let input = json!({
            "z": 1, "a": 1.0, "m": -9223372036854775808i64, "u": 18446744073709551615u64,
            "f": 0.1, "big": 1e300
        });
        let out = run(".", input.clone()).unwrap();
        assert_eq!(
            serde_json::to_string(&out).unwrap(),
            serde_json::to_string(&input).unwrap()
        );
        assert_eq!(run(". + 1", json!(1)).unwrap(), json!(2));
        assert!(run(". + 1", json!(1)).unwrap().is_i64());
        assert!(run(". / 2", json!(3)).unwrap().is_f64());
        // beyond u64: jaq computes with big integers; JSON gets a float.
        assert_eq!(
            run(". * 4", json!(u64::MAX)).unwrap(),
            json!(7.378697629483821e19)
        );
        assert_eq!(run("nan", json!(null)).unwrap(), json!(null));
        assert_eq!(run("infinite", json!(null)).unwrap(), json!(f64::MAX));
        assert_eq!(
            run("100000000000000000000000", json!(null)).unwrap(),
            json!(1e23)
        );
    }

    #[test]
    fn non_string_object_keys_are_an_error() {
        let out = run("{(1): 2}", json!(null));
        assert!(out.is_err(), "{out:?}");
    }

    #[test]
    fn large_output_is_rejected() {
        let limits = JqLimits {
            timeout: Duration::from_secs(5),
            max_output_bytes: 1000,
            ..JqLimits::DEFAULT
        };
        let program = JqProgram::compile("[range(1000)]").unwrap();
        let err = program.run_bounded(json!(null), &limits).unwrap_err();
        assert_eq!(err, JqRunError::OutputTooLarge(1000));
        let program = JqProgram::compile(r#""x" * 2000"#).unwrap();
        assert!(program.run_bounded(json!(null), &limits).is_err());
        // exactly at the limit is fine: "\"" + 998 x + "\"" = 1000 bytes.
        let program = JqProgram::compile(r#""x" * 998"#).unwrap();
        assert!(program.run_bounded(json!(null), &limits).is_ok());
        let program = JqProgram::compile(r#""x" * 999"#).unwrap();
        assert!(program.run_bounded(json!(null), &limits).is_err());
    }

    #[test]
    fn the_output_size_is_counted_exactly() {
        let identity = JqProgram::compile(".").unwrap();
        let at = |max_output_bytes| JqLimits {
            max_output_bytes,
            ..JqLimits::DEFAULT
        };
        for v in [
            json!({"a": [true, false, null, 1.5, -7, "x\n\"é\u{1}/"], "b": {}, "c": []}),
            json!(1e300),
            json!(""),
            json!(u64::MAX),
        ] {
            let exact = serde_json::to_vec(&v).unwrap().len();
            assert_eq!(identity.run_bounded(v.clone(), &at(exact)).unwrap(), v);
            let err = identity.run_bounded(v.clone(), &at(exact - 1)).unwrap_err();
            assert_eq!(err, JqRunError::OutputTooLarge(exact - 1), "{v}");
        }
    }

    #[test]
    fn deeply_nested_values_are_refused_at_the_boundary() {
        let mut deep = json!(1);
        for _ in 0..(MAX_VALUE_DEPTH + 5) {
            deep = json!([deep]);
        }
        assert!(run(".", deep).unwrap_err().to_string().contains("nested"));
        let err = run("reduce range(1000) as $x (1; [.])", json!(null)).unwrap_err();
        assert!(err.to_string().contains("nested"), "{err}");
    }
}
