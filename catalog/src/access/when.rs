//! A rule's `when`: a CEL expression bounded before it is parsed (length,
//! nesting) and after (comprehensions, known variables and functions, the
//! static cost of [`super::cost`]), then evaluated over one caller's
//! variables, failing closed.

use std::sync::{Arc, LazyLock};

use cel::common::ast::{EntryExpr, Expr};
use cel::objects::Value as CelValue;
use cel::parser::Expression;

use super::*;

/// Longest `when`, in bytes (also the CRD's `maxLength`).
pub const MAX_WHEN_BYTES: usize = 4096;
/// Deepest nesting of `(`, `[`, `{` and `? :` in a `when`. The parser
/// recurses through about a dozen grammar rules per level, so this is
/// what keeps a hostile expression from overflowing a thread's stack.
pub const MAX_WHEN_NESTING: usize = 24;
/// Comprehensions (`all`, `exists`, `exists_one`, `map`, `filter`) in one
/// `when`, and how deeply they may nest. Each loops over a list from a
/// token (bounded by the authenticator's token size cap); nesting them
/// multiplies the work, and chaining `map`s can double a value each time.
pub const MAX_COMPREHENSIONS: usize = 4;
pub const MAX_COMPREHENSION_NESTING: usize = 1;

/// The variables a `when` may read.
const VARIABLES: [&str; 5] = ["subject", "issuer", "method", "scopes", "claims"];
/// Type names a `when` may mention, as in `type(x) == string`.
const TYPE_NAMES: [&str; 11] = [
    "bool",
    "bytes",
    "double",
    "dyn",
    "int",
    "list",
    "map",
    "null_type",
    "string",
    "type",
    "uint",
];

/// A compiled `when`. The source is kept for the debug log of a failed
/// evaluation.
pub(super) struct When {
    source: String,
    expr: Expression,
}

impl fmt::Debug for When {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("When").field(&self.source).finish()
    }
}

/// The CEL values of one principal, converted once per decision.
pub(super) struct Variables {
    /// `subject`, `issuer` (`""` for API keys) and `method`; none of
    /// them for the anonymous caller.
    identity: Option<[CelValue; 3]>,
    /// The caller's inputs exceed what the cost bounds assume.
    oversized: bool,
    scopes: CelValue,
    claims: CelValue,
}

impl Variables {
    pub(super) fn of(principal: Option<&Principal>, oversized: bool) -> Variables {
        match principal {
            None => Variables {
                identity: None,
                oversized: false,
                scopes: CelValue::List(Arc::new(Vec::new())),
                claims: empty_map(),
            },
            // The cost bound of every `when` assumes inputs within
            // MAX_INPUT_UNITS; a caller beyond it gets no grant from one.
            Some(_) if oversized => Variables {
                identity: None,
                scopes: CelValue::List(Arc::new(Vec::new())),
                claims: empty_map(),
                oversized: true,
            },
            Some(p) => Variables {
                identity: Some([
                    CelValue::String(Arc::new(p.subject.clone())),
                    CelValue::String(Arc::new(p.issuer.clone().unwrap_or_default())),
                    CelValue::String(Arc::new(p.method.as_str().to_string())),
                ]),
                scopes: CelValue::List(Arc::new(
                    p.scopes
                        .iter()
                        .map(|s| CelValue::String(Arc::new(s.clone())))
                        .collect(),
                )),
                // Claims are JSON, which always converts; should it not,
                // rules reading claims fail (closed) on the empty map.
                claims: cel::to_value(&p.claims).unwrap_or_else(|_| empty_map()),
                oversized: false,
            },
        }
    }
}

/// The size of `p`'s largest variable, in the units [`cost`] assumes (a
/// string's bytes, the claims' JSON bytes), measured without copying.
pub(super) fn input_units(p: &Principal) -> u64 {
    /// Counts what is written to it.
    struct Count(u64);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 = self.0.saturating_add(buf.len() as u64);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut claims = Count(0);
    // Claims are JSON and always serialise; should they not, they count
    // as too large to evaluate.
    let claims = match serde_json::to_writer(&mut claims, &p.claims) {
        Ok(()) => claims.0,
        Err(_) => u64::MAX,
    };
    let scopes: u64 = p.scopes.iter().map(|s| s.len() as u64 + 1).sum();
    [
        p.subject.len() as u64,
        p.issuer.as_ref().map_or(0, |i| i.len() as u64),
        scopes,
        claims,
    ]
    .into_iter()
    .max()
    .unwrap_or(0)
}

pub(super) fn empty_map() -> CelValue {
    cel::to_value(serde_json::Map::new()).unwrap_or(CelValue::Null)
}

/// The standard library, without the optional syntax (`a.?b`): what a
/// `when` may use. Built once; programs do not depend on it after parsing.
static ENV: LazyLock<Arc<cel::Env>> = LazyLock::new(|| {
    Arc::new(
        cel::Env::default()
            .with_optional_support(false)
            .with_stdlib(),
    )
});

impl When {
    pub(super) fn holds(&self, vars: &Variables) -> bool {
        if vars.oversized {
            tracing::debug!(when = %self.source, "the caller's claims exceed what access rules are bounded for: no grant");
            return false;
        }
        let mut ctx = cel::Context::with_env(ENV.clone());
        if let Some([subject, issuer, method]) = &vars.identity {
            ctx.add_variable_from_value("subject", subject.clone());
            ctx.add_variable_from_value("issuer", issuer.clone());
            ctx.add_variable_from_value("method", method.clone());
        }
        ctx.add_variable_from_value("scopes", vars.scopes.clone());
        ctx.add_variable_from_value("claims", vars.claims.clone());
        match CelValue::resolve(&self.expr, &ctx) {
            Ok(CelValue::Bool(b)) => b,
            Ok(other) => {
                tracing::debug!(when = %self.source, result = ?other.type_of(), "access rule condition is not a bool: no grant");
                false
            }
            Err(e) => {
                tracing::debug!(when = %self.source, error = %e, "access rule condition failed: no grant");
                false
            }
        }
    }
}

/// Bounds, parses and checks one `when`; with its worst-case cost at each
/// of [`COST_TIERS`].
pub(super) fn compile_when(src: &str) -> Result<(When, [u64; COST_TIERS.len()]), String> {
    if src.len() > MAX_WHEN_BYTES {
        return Err(format!(
            "the expression is {} bytes, over the limit of {MAX_WHEN_BYTES}",
            src.len()
        ));
    }
    let depth = nesting(src);
    if depth > MAX_WHEN_NESTING {
        return Err(format!(
            "the expression nests {depth} levels deep, over the limit of {MAX_WHEN_NESTING}"
        ));
    }
    let expr = cel::Env::stdlib()
        .with_optional_support(false)
        .parser()
        // NB: the pre-check above counts tokens, the parser counts
        // grammar levels; both stop far below what overflows a stack.
        .max_recursion_depth(u16::try_from(MAX_WHEN_NESTING * 4).unwrap_or(u16::MAX))
        .parse(src)
        .map_err(|e| format!("invalid CEL: {e}"))?;
    let mut check = Check::default();
    check.walk(&expr, &mut Vec::new(), 0)?;
    let cost = cost::check(&expr)?;
    Ok((
        When {
            source: src.to_string(),
            expr,
        },
        cost,
    ))
}

/// Deepest nesting of brackets and conditionals outside string literals.
/// Errs high: an unbalanced closer never lowers it below zero, and a
/// conditional counts as one level from its `?` to the end.
fn nesting(src: &str) -> usize {
    let b = src.as_bytes();
    let (mut depth, mut max, mut cond) = (0usize, 0usize, 0usize);
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            q @ (b'"' | b'\'') => {
                let raw = i > 0 && matches!(b[i - 1], b'r' | b'R');
                let triple = b.get(i + 1) == Some(&q) && b.get(i + 2) == Some(&q);
                i += if triple { 3 } else { 1 };
                while i < b.len() {
                    if b[i] == b'\\' && !raw {
                        i += 2;
                        continue;
                    }
                    if b[i] == q
                        && (!triple || (b.get(i + 1) == Some(&q) && b.get(i + 2) == Some(&q)))
                    {
                        i += if triple { 3 } else { 1 };
                        break;
                    }
                    i += 1;
                }
                continue;
            }
            b'(' | b'[' | b'{' => depth += 1,
            b')' | b']' | b'}' => depth = depth.saturating_sub(1),
            b'?' => cond += 1,
            _ => {}
        }
        max = max.max(depth + cond);
        i += 1;
    }
    max
}

/// What a parsed `when` may contain.
#[derive(Default)]
struct Check {
    comprehensions: usize,
}

impl Check {
    /// `bound`: comprehension variables in scope; `loops`: enclosing
    /// comprehensions. The parser's recursion limit bounds the depth.
    fn walk(
        &mut self,
        e: &Expression,
        bound: &mut Vec<String>,
        loops: usize,
    ) -> Result<(), String> {
        match &e.expr {
            Expr::Unspecified | Expr::Literal(_) => Ok(()),
            Expr::Ident(name) => {
                if VARIABLES.contains(&name.as_str())
                    || TYPE_NAMES.contains(&name.as_str())
                    || bound.iter().any(|b| b == name)
                {
                    Ok(())
                } else {
                    Err(format!(
                        "unknown variable {name:?}: a condition can read subject, issuer, method, scopes and claims"
                    ))
                }
            }
            Expr::Call(c) => {
                if let Some(t) = &c.target {
                    self.walk(t, bound, loops)?;
                }
                c.args.iter().try_for_each(|a| self.walk(a, bound, loops))
            }
            Expr::Select(s) => self.walk(&s.operand, bound, loops),
            Expr::List(l) => l
                .elements
                .iter()
                .try_for_each(|a| self.walk(a, bound, loops)),
            Expr::Map(m) => m.entries.iter().try_for_each(|entry| match &entry.expr {
                EntryExpr::MapEntry(me) => {
                    self.walk(&me.key, bound, loops)?;
                    self.walk(&me.value, bound, loops)
                }
                EntryExpr::StructField(f) => self.walk(&f.value, bound, loops),
            }),
            Expr::Struct(_) => Err("message construction is not supported".into()),
            Expr::Comprehension(c) => {
                self.comprehensions += 1;
                if self.comprehensions > MAX_COMPREHENSIONS {
                    return Err(format!(
                        "more than {MAX_COMPREHENSIONS} comprehensions (all, exists, exists_one, map, filter)"
                    ));
                }
                if loops + 1 > MAX_COMPREHENSION_NESTING {
                    return Err(format!(
                        "comprehensions (all, exists, exists_one, map, filter) nest more than {MAX_COMPREHENSION_NESTING} deep"
                    ));
                }
                self.walk(&c.iter_range, bound, loops)?;
                self.walk(&c.accu_init, bound, loops)?;
                let before = bound.len();
                bound.push(c.iter_var.clone());
                bound.extend(c.iter_var2.clone());
                bound.push(c.accu_var.clone());
                let inner = [&c.loop_cond, &c.loop_step, &c.result]
                    .into_iter()
                    .try_for_each(|x| self.walk(x, bound, loops + 1));
                bound.truncate(before);
                inner
            }
        }
    }
}
