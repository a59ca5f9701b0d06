//! A static bound on what evaluating a `when` can cost, checked when the
//! rule is loaded, as Kubernetes estimates CRD validation rules.
//!
//! Why by hand: the `cel` crate evaluates without any budget (no step
//! counter, no size limit on the values it builds), so a rule inside every
//! syntactic bound — a list literal of 900 zeros mapped to itself, then
//! doubled — allocated gigabytes on the first listing. Neither `cel` nor
//! any other CEL crate estimates cost, so this module does, over the few
//! shapes a `when` may have (`Check` has already refused the rest).
//!
//! Every expression gets an upper bound of the value it yields ([`Est`]:
//! its deep size in units — one per value plus one per byte of a string —,
//! its length and the deep size of its largest element) and of the work
//! computing it (`cost`, in the same units: each unit read, compared or
//! copied once). The variables are bounded by what the gateway admits
//! ([`MAX_INPUT_UNITS`], enforced again at evaluation: a caller whose
//! claims exceed it is granted nothing by a `when`), so a bound holds for
//! every caller. A comprehension costs the sum of its iterations; since
//! every cost here is a convex function of the loop variable's size, the
//! sum over elements whose sizes add up to the range's total is at most
//! `n · c(1) + (c(max) − c(1)) · total / max`.
//!
//! A rule whose bound exceeds [`MAX_WHEN_COST`] or builds a value over
//! [`MAX_VALUE_UNITS`] is refused where it is loaded, naming the field.

use cel::common::ast::{operators, EntryExpr, Expr, LiteralValue};
use cel::parser::Expression;

/// Largest claims, subject, issuer or scope set a `when` is evaluated
/// over, in units (JSON bytes of the claims): the longest introspection
/// answer the gateway reads (64 KiB), and more than any token it admits.
pub const MAX_INPUT_UNITS: u64 = 64 * 1024;
/// Most work one `when` may take, in units (~10 ns each): tens of
/// milliseconds on the worst input the gateway admits, and nothing like
/// that on real claims.
pub const MAX_WHEN_COST: u64 = 10_000_000;
/// Largest value one `when` may build, in units (a unit is one value or
/// one byte; a value is tens of bytes in memory): a few MiB at most.
pub const MAX_VALUE_UNITS: u64 = 256 * 1024;

/// An upper bound of a value: deep size, length (elements, entries or
/// bytes) and the deep size of its largest element. `scalar`: a number,
/// bool or null, which `+` adds instead of concatenating.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Est {
    total: u64,
    len: u64,
    elem: u64,
    scalar: bool,
}

impl Est {
    const SCALAR: Est = Est {
        total: 1,
        len: 1,
        elem: 1,
        scalar: true,
    };

    /// Anything of deep size up to `n`.
    fn opaque(n: u64) -> Est {
        let n = n.max(1);
        Est {
            total: n,
            len: n,
            elem: n,
            scalar: false,
        }
    }

    fn join(self, o: Est) -> Est {
        Est {
            total: self.total.max(o.total),
            len: self.len.max(o.len),
            elem: self.elem.max(o.elem),
            scalar: self.scalar && o.scalar,
        }
    }
}

/// What one expression yields and costs.
#[derive(Debug, Clone, Copy)]
struct Bound {
    est: Est,
    cost: u64,
}

/// Caller input sizes (units, as [`MAX_INPUT_UNITS`]) at which a rule's
/// cost is also tabulated, so a decision can be priced for the caller at
/// hand: real claims are a few hundred bytes, far below the worst case.
pub const COST_TIERS: [u64; 5] = [256, 1024, 4096, 16 * 1024, MAX_INPUT_UNITS];

/// The worst-case cost of `expr` for callers whose inputs fit each of
/// [`COST_TIERS`], or why it is refused (judged at the largest).
pub(super) fn check(expr: &Expression) -> Result<[u64; COST_TIERS.len()], String> {
    let worst = cost_at(expr, MAX_INPUT_UNITS)?;
    if worst > MAX_WHEN_COST {
        return Err(over_cost(worst));
    }
    // NB: every bound grows with its inputs, so a smaller tier cannot err
    // where the largest did not; should it, the largest stands for it.
    Ok(COST_TIERS.map(|units| match units {
        MAX_INPUT_UNITS => worst,
        _ => cost_at(expr, units).map_or(worst, |c| c.min(worst)),
    }))
}

/// The bound of `expr` with its variables at most `units` large.
fn cost_at(expr: &Expression, units: u64) -> Result<u64, String> {
    // The variables as the outermost scope: a comprehension's own
    // variable of the same name still shadows them.
    let mut scope: Vec<(String, Est)> = ["subject", "issuer", "scopes", "claims"]
        .into_iter()
        .map(|v| (v.to_string(), Est::opaque(units)))
        .collect();
    Ok(bound(expr, &mut scope)?.cost)
}

fn over_cost(cost: u64) -> String {
    format!(
        "the expression may cost up to {cost} steps on the largest claims the gateway admits, \
         over the limit of {MAX_WHEN_COST}: loop over less (a comprehension multiplies the \
         cost of its body by the length of its list)"
    )
}

fn over_size(total: u64) -> String {
    format!(
        "the expression may build a value of up to {total} elements and bytes, over the limit \
         of {MAX_VALUE_UNITS}: a comprehension builds a list as long as its list, each \
         element as large as its body"
    )
}

fn variable(name: &str) -> Option<Est> {
    match name {
        "method" => Some(Est::opaque(16)),
        "subject" | "issuer" | "scopes" | "claims" => Some(Est::opaque(MAX_INPUT_UNITS)),
        _ => None,
    }
}

fn bound(e: &Expression, scope: &mut Vec<(String, Est)>) -> Result<Bound, String> {
    let b = match &e.expr {
        Expr::Unspecified => Bound {
            est: Est::SCALAR,
            cost: 1,
        },
        Expr::Literal(l) => Bound {
            est: match l {
                LiteralValue::String(s) => Est::opaque(s.inner().len() as u64 + 1),
                LiteralValue::Bytes(b) => Est::opaque(b.inner().len() as u64 + 1),
                _ => Est::SCALAR,
            },
            cost: 1,
        },
        Expr::Ident(name) => {
            let est = scope
                .iter()
                .rev()
                .find(|(n, _)| n == name)
                .map(|(_, e)| *e)
                .or_else(|| variable(name))
                // Type names (`string`, `int`, ...): `Check` allowed no other.
                .unwrap_or(Est::SCALAR);
            Bound { est, cost: 1 }
        }
        Expr::Select(s) => {
            let op = bound(&s.operand, scope)?;
            Bound {
                est: if s.test {
                    Est::SCALAR
                } else {
                    Est::opaque(op.est.elem)
                },
                cost: op.cost.saturating_add(1),
            }
        }
        Expr::List(l) => {
            let mut est = Est {
                total: l.elements.len() as u64 + 1,
                len: l.elements.len() as u64,
                elem: 1,
                scalar: false,
            };
            let mut cost = est.total;
            for x in &l.elements {
                let b = bound(x, scope)?;
                est.total = est.total.saturating_add(b.est.total);
                est.elem = est.elem.max(b.est.total);
                cost = cost.saturating_add(b.cost);
            }
            Bound { est, cost }
        }
        Expr::Map(m) => {
            let mut est = Est {
                total: m.entries.len() as u64 + 1,
                len: m.entries.len() as u64,
                elem: 1,
                scalar: false,
            };
            let mut cost = est.total;
            for entry in &m.entries {
                let parts = match &entry.expr {
                    EntryExpr::MapEntry(me) => [Some(&me.key), Some(&me.value)],
                    EntryExpr::StructField(f) => [None, Some(&f.value)],
                };
                for x in parts.into_iter().flatten() {
                    let b = bound(x, scope)?;
                    est.total = est.total.saturating_add(b.est.total);
                    est.elem = est.elem.max(b.est.total);
                    cost = cost.saturating_add(b.cost);
                }
            }
            Bound { est, cost }
        }
        Expr::Struct(_) => return Err("message construction is not supported".into()),
        Expr::Call(c) => {
            let mut args = Vec::with_capacity(c.args.len() + 1);
            if let Some(t) = &c.target {
                args.push(bound(t, scope)?);
            }
            for a in &c.args {
                args.push(bound(a, scope)?);
            }
            call(&c.func_name, &args)?
        }
        Expr::Comprehension(c) => {
            let range = bound(&c.iter_range, scope)?;
            let init = bound(&c.accu_init, scope)?;
            let (n, max, total) = (range.est.len, range.est.elem, range.est.total);
            // One iteration's bound with the loop variable(s) of size `s`.
            let mut iteration = |s: u64| -> Result<(Bound, Option<Est>), String> {
                let before = scope.len();
                scope.push((c.iter_var.clone(), Est::opaque(s)));
                if let Some(v2) = &c.iter_var2 {
                    scope.push((v2.clone(), Est::opaque(s)));
                }
                scope.push((c.accu_var.clone(), init.est));
                let r = iteration_bound(c, scope);
                scope.truncate(before);
                r
            };
            let (small, small_item) = iteration(1)?;
            let (large, large_item) = iteration(max)?;
            let cost = convex_sum(n, max, total, small.cost, large.cost);
            let (est, result_cost) = match (small_item, large_item) {
                // `map`/`filter`: a list of one item per element.
                (Some(small_item), Some(large_item)) => {
                    let items = convex_sum(n, max, total, small_item.total, large_item.total);
                    (
                        Est {
                            total: items.saturating_add(n).saturating_add(1),
                            len: n,
                            elem: large_item.total,
                            scalar: false,
                        },
                        1,
                    )
                }
                _ => (large.est.join(init.est), 1),
            };
            Bound {
                est,
                cost: range
                    .cost
                    .saturating_add(init.cost)
                    .saturating_add(cost)
                    .saturating_add(result_cost),
            }
        }
    };
    if b.est.total > MAX_VALUE_UNITS {
        return Err(over_size(b.est.total));
    }
    if b.cost > MAX_WHEN_COST {
        return Err(over_cost(b.cost));
    }
    Ok(b)
}

/// One iteration of `c`: its cost (condition and step), and the item an
/// appending step (`map`, `filter`: `@result + [item]`) adds — `None` for
/// a step that folds into a scalar (`all`, `exists`, `exists_one`).
fn iteration_bound(
    c: &cel::common::ast::ComprehensionExpr,
    scope: &mut Vec<(String, Est)>,
) -> Result<(Bound, Option<Est>), String> {
    let cond = bound(&c.loop_cond, scope)?;
    if let Some((guard, item)) = append_step(c) {
        let g = match guard {
            Some(g) => bound(g, scope)?.cost,
            None => 0,
        };
        let item = bound(item, scope)?;
        return Ok((
            Bound {
                est: Est::SCALAR,
                cost: cond
                    .cost
                    .saturating_add(g)
                    .saturating_add(item.cost)
                    .saturating_add(item.est.total),
            },
            Some(item.est),
        ));
    }
    let step = bound(&c.loop_step, scope)?;
    if !step.est.scalar {
        // The macros only fold into bools and counts; anything else would
        // grow its accumulator in a way this bound does not follow.
        return Err(
            "a comprehension may only be all, exists, exists_one, map or filter".to_string(),
        );
    }
    Ok((
        Bound {
            est: step.est,
            cost: cond.cost.saturating_add(step.cost),
        },
        None,
    ))
}

/// `(guard, item)` of a step `@result + [item]` or `guard ? @result +
/// [item] : @result`: the shapes `cel` evaluates by appending in place.
fn append_step(
    c: &cel::common::ast::ComprehensionExpr,
) -> Option<(Option<&Expression>, &Expression)> {
    let is_accu = |e: &Expression| matches!(&e.expr, Expr::Ident(n) if *n == c.accu_var);
    fn item_of<'e>(
        e: &'e Expression,
        is_accu: &dyn Fn(&Expression) -> bool,
    ) -> Option<&'e Expression> {
        let Expr::Call(call) = &e.expr else {
            return None;
        };
        match (
            call.func_name.as_str(),
            call.target.as_ref(),
            call.args.as_slice(),
        ) {
            (operators::ADD, None, [lhs, rhs]) if is_accu(lhs) => match &rhs.expr {
                Expr::List(l) if l.elements.len() == 1 => l.elements.first(),
                _ => None,
            },
            _ => None,
        }
    }
    match &c.loop_step.expr {
        Expr::Call(call) if call.func_name == operators::CONDITIONAL && call.target.is_none() => {
            match call.args.as_slice() {
                [guard, step, otherwise] if is_accu(otherwise) => {
                    item_of(step, &is_accu).map(|i| (Some(guard), i))
                }
                _ => None,
            }
        }
        _ => item_of(&c.loop_step, &is_accu).map(|i| (None, i)),
    }
}

/// The sum over at most `n` elements whose sizes (each at most `max`) add
/// up to at most `total` of a convex function of the size valued `small`
/// at 1 and `large` at `max`.
fn convex_sum(n: u64, max: u64, total: u64, small: u64, large: u64) -> u64 {
    let n = u128::from(n);
    let by_count = n * u128::from(large);
    let slope = u128::from(large.saturating_sub(small));
    let by_total = n * u128::from(small) + slope * u128::from(total) / u128::from(max.max(1));
    u64::try_from(by_count.min(by_total)).unwrap_or(u64::MAX)
}

/// Functions (and operators) a `when` may call, and their bounds.
fn call(name: &str, args: &[Bound]) -> Result<Bound, String> {
    let cost = args.iter().fold(1u64, |c, a| c.saturating_add(a.cost));
    let read = args.iter().fold(0u64, |c, a| c.saturating_add(a.est.total));
    let arg = |i: usize| args.get(i).map_or(Est::SCALAR, |a| a.est);
    let (est, work) = match name {
        operators::ADD => {
            let (a, b) = (arg(0), arg(1));
            if a.scalar && b.scalar {
                (Est::SCALAR, 1)
            } else {
                let total = a.total.saturating_add(b.total);
                (
                    Est {
                        total,
                        len: a.len.saturating_add(b.len),
                        elem: a.elem.max(b.elem),
                        scalar: false,
                    },
                    total,
                )
            }
        }
        operators::INDEX => (Est::opaque(arg(0).elem), arg(1).total.saturating_add(1)),
        operators::CONDITIONAL => (arg(1).join(arg(2)), 1),
        "dyn" => (arg(0), 1),
        "string" | "bytes" => (Est::opaque(arg(0).total.max(32)), read),
        // NB: no `matches`: `cel` is built without its regex feature (it
        // would compile the pattern on every call, per element of a
        // comprehension), so a rule using it could never grant anything.
        operators::SUBSTRACT
        | operators::MULTIPLY
        | operators::DIVIDE
        | operators::MODULO
        | operators::NEGATE
        | operators::EQUALS
        | operators::NOT_EQUALS
        | operators::GREATER
        | operators::GREATER_EQUALS
        | operators::LESS
        | operators::LESS_EQUALS
        | operators::LOGICAL_AND
        | operators::LOGICAL_OR
        | operators::LOGICAL_NOT
        | operators::NOT_STRICTLY_FALSE
        | operators::IN
        | "size"
        | "contains"
        | "startsWith"
        | "endsWith"
        | "int"
        | "uint"
        | "double"
        | "bool"
        | "type" => (Est::SCALAR, read),
        other => {
            return Err(format!(
                "function {other:?} is not available in a condition"
            ))
        }
    };
    Ok(Bound {
        est,
        cost: cost.saturating_add(work),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cost_of(src: &str) -> Result<u64, String> {
        let expr = cel::Env::stdlib()
            .with_optional_support(false)
            .parser()
            .parse(src)
            .map_err(|e| e.to_string())?;
        check(&expr).map(|tiers| tiers[COST_TIERS.len() - 1])
    }

    #[test]
    fn a_rule_costs_less_for_a_caller_with_small_claims() {
        let expr = cel::Env::stdlib()
            .with_optional_support(false)
            .parser()
            .parse(r#"claims.groups.exists(g, g.startsWith("team-"))"#)
            .unwrap();
        let tiers = check(&expr).unwrap();
        assert!(tiers.windows(2).all(|w| w[0] <= w[1]), "{tiers:?}");
        assert!(tiers[1] * 16 <= tiers[4], "{tiers:?}");
    }

    #[test]
    fn rules_people_write_are_cheap() {
        for src in [
            r#""sre" in claims.groups"#,
            r#"issuer == "https://idp.example" && subject == "alice""#,
            r#"method == "apiKey" && subject == "ci-bot""#,
            r#"claims.groups.exists(g, g.startsWith("team-"))"#,
            r#"claims.groups.all(g, g != "banned") && size(scopes) > 0"#,
            r#"claims.groups.exists_one(g, g == "admin")"#,
            r#"claims.groups.filter(g, g.endsWith("-ops")).size() > 0"#,
            r#"has(claims.tenant) && claims.tenant == "a""#,
        ] {
            let c = cost_of(src).unwrap_or_else(|e| panic!("{src}: {e}"));
            assert!(c < MAX_WHEN_COST, "{src}: {c}");
        }
    }

    /// The issue's reproduction: a list of 900 zeros mapped to itself,
    /// then each element concatenated eight times.
    #[test]
    fn amplifying_comprehensions_are_refused() {
        let zeros = vec!["0"; 900].join(",");
        let chained = format!("[{zeros}].map(x, [{zeros}]).map(y, y+y+y+y+y+y+y+y).size() > 0");
        let e = cost_of(&chained).unwrap_err();
        assert!(e.contains("over the limit"), "{e}");
        let e = cost_of(&format!("[{zeros}].map(x, [{zeros}]).size() > 0")).unwrap_err();
        assert!(e.contains("over the limit"), "{e}");
        let quadratic = "claims.groups.all(g, claims.groups.exists(h, h == g))";
        assert!(cost_of(quadratic).is_err());
        let doubling = "claims.groups.map(g, claims.groups).size() > 0";
        assert!(cost_of(doubling).is_err());
    }

    #[test]
    fn unknown_functions_are_refused_by_name() {
        let e = cost_of(r#"subject.lowerAscii() == "a""#).unwrap_err();
        assert!(e.contains("lowerAscii"), "{e}");
        let e = cost_of(r#"subject.matches("^a.*")"#).unwrap_err();
        assert!(e.contains("\"matches\" is not available"), "{e}");
    }

    #[test]
    fn the_sum_over_a_range_uses_its_total() {
        // 1,000 elements of total size 2,000: a body linear in the
        // element costs ~2 per element, not ~2,000.
        assert_eq!(
            convex_sum(1000, 1000, 2000, 2, 1001),
            2000 + 999 * 2000 / 1000
        );
        assert_eq!(convex_sum(3, 10, 1000, 1, 10), 30);
    }
}
