//! The rewrite that makes a parsed program safe to run: a guard at the head
//! of every definition's body, and bounded natives in place of the
//! operators and string interpolation that can build huge values.
//!
//! It works on jaq's parse tree, not on text, so that precedence and
//! scoping are jaq's own; everything it adds calls names with the reserved
//! prefix, which programs cannot mention.

use jaq_core::load::lex::StrPart;
use jaq_core::load::parse::{BinaryOp, Def, Pattern, Term};
use jaq_core::ops::Math;
use jaq_core::path::{Part, Path};

use super::natives::{ADD, ELEMENT, MUL, TOSTRING};
use super::sandbox::GUARD;

/// The variable that carries the right-hand side of `l += r` / `l *= r`.
const UPDATE_VAR: &str = "$__toolgate_rhs";

/// A definition with the guard in front of its body, so that recursion
/// through it is bounded, and its body rewritten by [`term`].
pub(super) fn def(mut d: Def<&str>) -> Def<&str> {
    let body = term(std::mem::take(&mut d.body));
    d.body = Term::BinOp(
        Box::new(Term::Call(GUARD, Vec::new())),
        BinaryOp::Pipe(None),
        Box::new(body),
    );
    d
}

/// Rewrites every part of `t`:
///
/// * `l + r`, `l * r` call natives that check the size of what they would
///   build before building it; `l += r`, `l *= r` become
///   `r as $x | l |= native(.; $x)`, which is how jaq defines them.
/// * `[f]` passes each output of `f` through a native that charges it to
///   the run's budget.
/// * A string with interpolation (`"\(f)"`) converts with the bounded
///   `tostring` instead of jaq's unbounded built-in conversion.
/// * Definitions get the guard ([`def`]).
pub(super) fn term<'s>(t: Term<&'s str>) -> Term<&'s str> {
    let bx = |t: Term<&'s str>| Box::new(term(t));
    match t {
        Term::Id | Term::Recurse | Term::Num(_) | Term::Var(_) | Term::Break(_) => t,
        Term::Str(fmt, parts) => {
            let interpolates = parts.iter().any(|p| matches!(p, StrPart::Term(_)));
            let parts = parts
                .into_iter()
                .map(|p| match p {
                    StrPart::Term(t) => StrPart::Term(term(t)),
                    StrPart::Str(s) => StrPart::Str(s),
                    StrPart::Char(c) => StrPart::Char(c),
                })
                .collect();
            let fmt = fmt.or_else(|| interpolates.then_some(TOSTRING));
            Term::Str(fmt, parts)
        }
        // `[f]` collects every output of `f`, however many: each passes
        // the guard and is charged to the run's budget as it is collected.
        Term::Arr(t) => Term::Arr(t.map(|t| {
            Box::new(Term::BinOp(
                bx(*t),
                BinaryOp::Pipe(None),
                Box::new(Term::Call(ELEMENT, Vec::new())),
            ))
        })),
        Term::Obj(kvs) => Term::Obj(
            kvs.into_iter()
                .map(|(k, v)| (term(k), v.map(term)))
                .collect(),
        ),
        Term::Neg(t) => Term::Neg(bx(*t)),
        Term::BinOp(l, op, r) => {
            let (l, r) = (term(*l), term(*r));
            match op {
                BinaryOp::Math(Math::Add) => Term::Call(ADD, vec![l, r]),
                BinaryOp::Math(Math::Mul) => Term::Call(MUL, vec![l, r]),
                BinaryOp::UpdateMath(m @ (Math::Add | Math::Mul)) => {
                    let native = if matches!(m, Math::Add) { ADD } else { MUL };
                    let var = UPDATE_VAR;
                    let update = Term::BinOp(
                        Box::new(l),
                        BinaryOp::Update,
                        Box::new(Term::Call(native, vec![Term::Id, Term::Var(var)])),
                    );
                    Term::BinOp(
                        Box::new(r),
                        BinaryOp::Pipe(Some(Pattern::Var(var))),
                        Box::new(update),
                    )
                }
                BinaryOp::Pipe(Some(p)) => {
                    Term::BinOp(Box::new(l), BinaryOp::Pipe(Some(pattern(p))), Box::new(r))
                }
                op => Term::BinOp(Box::new(l), op, Box::new(r)),
            }
        }
        Term::Label(x, t) => Term::Label(x, bx(*t)),
        Term::Fold(kind, xs, p, fs) => Term::Fold(
            kind,
            bx(*xs),
            pattern(p),
            fs.into_iter().map(term).collect(),
        ),
        Term::TryCatch(t, c) => Term::TryCatch(bx(*t), c.map(|c| bx(*c))),
        Term::IfThenElse(branches, otherwise) => Term::IfThenElse(
            branches
                .into_iter()
                .map(|(cond, then)| (term(cond), term(then)))
                .collect(),
            otherwise.map(|t| bx(*t)),
        ),
        Term::Def(defs, t) => Term::Def(defs.into_iter().map(def).collect(), bx(*t)),
        Term::Call(name, args) => Term::Call(name, args.into_iter().map(term).collect()),
        Term::Path(t, path) => {
            let parts = path.0.into_iter().map(|(part, opt)| {
                let part = match part {
                    Part::Index(i) => Part::Index(term(i)),
                    Part::Range(from, upto) => Part::Range(from.map(term), upto.map(term)),
                };
                (part, opt)
            });
            Term::Path(bx(*t), Path(parts.collect()))
        }
    }
}

/// Patterns hold terms in computed object keys (`{(f): $x}`).
fn pattern(p: Pattern<&str>) -> Pattern<&str> {
    match p {
        Pattern::Var(x) => Pattern::Var(x),
        Pattern::Arr(ps) => Pattern::Arr(ps.into_iter().map(pattern).collect()),
        Pattern::Obj(kps) => Pattern::Obj(
            kps.into_iter()
                .map(|(k, p)| (term(k), pattern(p)))
                .collect(),
        ),
    }
}
