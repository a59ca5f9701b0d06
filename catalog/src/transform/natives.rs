//! Natives that bound a run: the guard, a guarded `range`, and bounded
//! replacements for the builtins and operators that can build a large value
//! from a small input (see the parent module's doc for the list).
//!
//! The bounds of the current run live in a thread-local, set by the worker
//! before it runs a filter: natives are plain `fn` pointers, so this is the
//! only way to reach per-run state from them.

use std::cell::{Cell, RefCell};
use std::sync::Arc;
use std::time::Instant;

use jaq_core::box_iter::box_once;
use jaq_core::native::{v, Fun};
use jaq_core::{Exn, Native, ValX, ValXs};
use jaq_json::{Num, Val};
use jaq_std::ValT as _;

use super::sandbox::GUARD;
use super::{Data, JqMemory, MAX_RECURSION_STACK_BYTES, MAX_VALUE_DEPTH};

/// Names of the natives that the rewrite in `harden` calls. Like
/// [`GUARD`], they start with the reserved prefix.
pub(super) const ADD: &str = "__toolgate_add";
pub(super) const MUL: &str = "__toolgate_mul";
pub(super) const TOSTRING: &str = "__toolgate_tostring";
/// Every element collected into an array (`[f]`) passes through it.
pub(super) const ELEMENT: &str = "__toolgate_element";
/// A native that panics, for the tests of the worker's panic handling.
#[cfg(test)]
pub(super) const PANIC_FOR_TESTS: &str = "__toolgate_panic";

/// jaq builtins replaced by the natives of [`funs`] (name, arity).
pub(super) const REPLACED: &[(&str, usize)] = &[("range", 3), ("fromjson", 0), ("tojson", 0)];

/// Largest integer, in bits, that arithmetic keeps exact. jaq computes with
/// big integers beyond 64 bits, and `. * .` doubles their size each time:
/// 40 squarings of 3 would need terabytes. Results beyond this become
/// floats, as they would in jq (whose numbers are all floats); JSON output
/// cannot carry them exactly anyway.
pub const MAX_INT_BITS: u64 = 4096;

/// Longest run of digits `fromjson` accepts in a number: jaq parses integer
/// literals into big integers, in time quadratic in their length (measured:
/// 100 000 digits 8 ms, 400 000 digits 130 ms; the 10 MB of an upstream
/// response would keep a worker busy for over a minute).
pub const MAX_NUMBER_DIGITS: usize = 4096;

pub(super) const HALT_TIMEOUT: i32 = 0x7467_0001;
pub(super) const HALT_RECURSION: i32 = 0x7467_0002;
pub(super) const HALT_BUDGET: i32 = 0x7467_0003;
pub(super) const HALT_VALUE_SIZE: i32 = 0x7467_0004;
pub(super) const HALT_MEMORY: i32 = 0x7467_0005;

/// What the host is asked for at a time when a run's charges pass what it
/// has reserved: asking per element would contend on the host's budget.
pub const RESERVE_CHUNK_BYTES: usize = 1 << 20;

/// What one element of an array costs its array: the slot, twice over
/// because a growing `Vec` doubles its capacity (and copies into the new
/// buffer while the old one is still held).
const SLOT_BYTES: usize = 2 * std::mem::size_of::<Val>();

#[derive(Clone, Copy)]
struct RunState {
    deadline: Instant,
    stack_base: usize,
    /// Per-value cap and total budget of what the bounded natives build.
    max_alloc: usize,
    alloc_left: usize,
    /// Bytes the host's [`JqMemory`] has granted this run so far.
    reserved: usize,
}

thread_local! {
    static RUN: Cell<Option<RunState>> = const { Cell::new(None) };
    /// The host's memory budget for the current run, if it has one.
    static MEMORY: RefCell<Option<Arc<dyn JqMemory>>> = const { RefCell::new(None) };
}

fn stack_address() -> usize {
    let marker = 0u8;
    std::hint::black_box(std::ptr::addr_of!(marker)) as usize
}

/// Sets the bounds for runs on this thread until [`end_run`].
pub(super) fn begin_run(deadline: Instant, max_alloc: usize, memory: Option<Arc<dyn JqMemory>>) {
    RUN.with(|r| {
        r.set(Some(RunState {
            deadline,
            stack_base: stack_address(),
            max_alloc,
            alloc_left: max_alloc,
            reserved: 0,
        }))
    });
    MEMORY.with(|m| *m.borrow_mut() = memory);
}

pub(super) fn end_run() {
    RUN.with(|r| r.set(None));
    // Dropping the host's handle here, not when the next run starts, so
    // that what it granted goes back as soon as this run is over.
    MEMORY.with(|m| m.borrow_mut().take());
}

/// `Err(halt code)` when the run must stop.
fn check_guard() -> Result<(), i32> {
    let Some(state) = RUN.with(Cell::get) else {
        return Ok(());
    };
    if stack_address().abs_diff(state.stack_base) > MAX_RECURSION_STACK_BYTES {
        return Err(HALT_RECURSION);
    }
    if Instant::now() >= state.deadline {
        return Err(HALT_TIMEOUT);
    }
    Ok(())
}

/// Takes `bytes` from the run's budget, or fails without taking anything.
/// Past what the host has granted, asks its [`JqMemory`] for more first
/// ([`RESERVE_CHUNK_BYTES`] at least), so that the run's values live
/// inside the host's budget and a refusal stops the run, not the process.
fn charge(bytes: usize) -> Result<(), i32> {
    RUN.with(|r| {
        let Some(mut state) = r.get() else {
            return Ok(());
        };
        state.alloc_left = state.alloc_left.checked_sub(bytes).ok_or(HALT_BUDGET)?;
        let used = state.max_alloc - state.alloc_left;
        if used > state.reserved {
            let want = (used - state.reserved)
                .max(RESERVE_CHUNK_BYTES)
                .min(state.max_alloc - state.reserved);
            let granted = MEMORY.with(|m| match &*m.borrow() {
                Some(memory) => memory.reserve(want),
                None => true,
            });
            if !granted {
                return Err(HALT_MEMORY);
            }
            state.reserved += want;
        }
        r.set(Some(state));
        Ok(())
    })
}

/// What the run has charged so far (for messages).
pub(super) fn charged() -> usize {
    RUN.with(Cell::get)
        .map_or(0, |s| s.max_alloc.saturating_sub(s.alloc_left))
}

/// Fails if one value of `bytes` would be larger than the run's cap.
fn fits(bytes: usize) -> Result<(), i32> {
    match RUN.with(Cell::get) {
        Some(state) if bytes > state.max_alloc => Err(HALT_VALUE_SIZE),
        _ => Ok(()),
    }
}

fn alloc_left() -> usize {
    RUN.with(Cell::get).map_or(usize::MAX, |s| s.alloc_left)
}

fn halt<'a>(code: i32) -> ValXs<'a, Val> {
    box_once(Err(Exn::halt(code)))
}

fn fail<'a>(msg: String) -> ValX<'a, Val> {
    Err(Exn::from(jaq_core::Error::new(Val::from(msg))))
}

pub(super) fn funs() -> impl Iterator<Item = Fun<Data>> {
    let guard = Native::<Data>::new(|cv| match check_guard() {
        Ok(()) => box_once(Ok(cv.1)),
        Err(code) => halt(code),
    })
    .with_paths(|cv| match check_guard() {
        Ok(()) => box_once(Ok(cv.1)),
        Err(code) => box_once(Err(Exn::halt(code))),
    })
    .with_update(|cv, f| match check_guard() {
        Ok(()) => f(cv.1),
        Err(code) => box_once(Err(Exn::halt(code))),
    });
    let range = Native::<Data>::new(|mut cv| {
        let by = cv.0.pop_var();
        let to = cv.0.pop_var();
        let from = cv.0.pop_var();
        Box::new(guarded_range(from, to, by))
    });
    // `ADD(l; r)` binds `l` first and `r` for each output of `l`, like
    // jaq's `l + r`; the last variable bound is popped first.
    let add = Native::<Data>::new(|mut cv| {
        let r = cv.0.pop_var();
        let l = cv.0.pop_var();
        add(l, r)
    });
    let mul = Native::<Data>::new(|mut cv| {
        let r = cv.0.pop_var();
        let l = cv.0.pop_var();
        mul(l, r)
    });
    let element = Native::<Data>::new(|cv| {
        let cost = element_bytes(&cv.1);
        match check_guard().and_then(|()| charge(cost)) {
            Ok(()) => box_once(Ok(cv.1)),
            Err(code) => halt(code),
        }
    });
    let fromjson = Native::<Data>::new(|cv| fromjson(cv.1));
    let tojson = Native::<Data>::new(|cv| to_json_val(&cv.1));
    let tostring = Native::<Data>::new(|cv| match cv.1 {
        // jaq's `tostring` of a string: the same bytes, read as text.
        Val::TStr(s) | Val::BStr(s) => box_once(Ok(Val::TStr(s))),
        v => to_json_val(&v),
    });
    let funs = vec![
        (GUARD, v(0), guard),
        ("range", v(3), range),
        (ADD, v(2), add),
        (MUL, v(2), mul),
        ("fromjson", v(0), fromjson),
        ("tojson", v(0), tojson),
        (TOSTRING, v(0), tostring),
        (ELEMENT, v(0), element),
    ];
    #[cfg(test)]
    let funs = {
        let mut funs = funs;
        let panic = Native::<Data>::new(|_| panic!("a panic for tests"));
        funs.push((PANIC_FOR_TESTS, v(0), panic));
        funs
    };
    funs.into_iter()
}

/// What collecting `v` into an array costs: its slot, plus the top level
/// of a string, array or object, which builtins such as `explode`,
/// `ascii_downcase` or `to_entries` build anew for each element. Deeper
/// levels are not walked: that would cost time per element, and values
/// shared with the input would be counted again and again.
fn element_bytes(v: &Val) -> usize {
    let top = match v {
        Val::Null | Val::Bool(_) | Val::Num(_) => 0,
        Val::TStr(s) | Val::BStr(s) => s.len(),
        Val::Arr(a) => a.len().saturating_mul(SLOT_BYTES),
        Val::Obj(o) => o.len().saturating_mul(2 * SLOT_BYTES),
    };
    SLOT_BYTES.saturating_add(top)
}

/// jaq's `range/3`, consulting the guard before each element.
fn guarded_range<'a>(from: Val, to: Val, by: Val) -> impl Iterator<Item = ValX<'a, Val>> + 'a {
    use std::cmp::Ordering::{Equal, Greater, Less};
    let cmp = by.partial_cmp(&Val::from(0isize)).unwrap_or(Equal);
    let mut next: Option<Val> = Some(from);
    std::iter::from_fn(move || {
        let x = next.take()?;
        let more = match cmp {
            Greater => x < to,
            Less => x > to,
            Equal => x != to,
        };
        if !more {
            return None;
        }
        if let Err(code) = check_guard() {
            return Some(Err(Exn::halt(code)));
        }
        match x.clone() + by.clone() {
            Ok(n) => {
                next = Some(n);
                Some(Ok(x))
            }
            Err(e) => Some(Err(Exn::from(e))),
        }
    })
}

// ------------------------------------------------------------ arithmetic

fn int_bits(n: &Num) -> Option<u64> {
    match n {
        Num::Int(_) => Some(isize::BITS as u64),
        Num::BigInt(b) => Some(b.bits()),
        Num::Float(_) | Num::Dec(_) => None,
    }
}

/// Both operands as floats when an integer result could exceed
/// [`MAX_INT_BITS`] (`bits` computes the result's size from the operands').
fn as_floats_if_huge(l: &Val, r: &Val, bits: fn(u64, u64) -> u64) -> Option<(f64, f64)> {
    let (Val::Num(a), Val::Num(b)) = (l, r) else {
        return None;
    };
    let (x, y) = (int_bits(a)?, int_bits(b)?);
    (bits(x, y) > MAX_INT_BITS).then(|| {
        let f = |v: &Val| v.as_f64().unwrap_or(f64::NAN);
        (f(l), f(r))
    })
}

/// `l + r` with a cap on the size of the string or array it builds:
/// doubling a string (`. + .`) needs only a few dozen steps to exhaust
/// memory, far fewer than the deadline allows.
fn add<'a>(l: Val, r: Val) -> ValXs<'a, Val> {
    let bytes = match (&l, &r) {
        (Val::TStr(a) | Val::BStr(a), Val::TStr(b) | Val::BStr(b)) => {
            a.len().saturating_add(b.len())
        }
        (Val::Arr(a), Val::Arr(b)) => {
            (a.len().saturating_add(b.len())).saturating_mul(std::mem::size_of::<Val>())
        }
        _ => 0,
    };
    // The right side is what the result adds to the left one (which `+`
    // extends in place when nothing else holds it): charging it bounds
    // growth in a loop (`reduce range(1e9) as $x ([]; . + [$x])`) without
    // charging `join`-style concatenation quadratically.
    let added = match (&l, &r) {
        (Val::TStr(_) | Val::BStr(_), Val::TStr(b) | Val::BStr(b)) => b.len(),
        (Val::Arr(_), Val::Arr(b)) => b.len().saturating_mul(SLOT_BYTES),
        _ => 0,
    };
    if let Err(code) = fits(bytes).and_then(|()| charge(added)) {
        return halt(code);
    }
    if let Some((x, y)) = as_floats_if_huge(&l, &r, |x, y| x.max(y) + 1) {
        return box_once(Ok(Val::Num(Num::Float(x + y))));
    }
    box_once((l + r).map_err(Exn::from))
}

/// `l * r`, refusing string repetition beyond the run's budget before it
/// allocates (`"x" * 1e10` would otherwise abort the process).
fn mul<'a>(l: Val, r: Val) -> ValXs<'a, Val> {
    let repeated = match (&l, &r) {
        (Val::TStr(s) | Val::BStr(s), Val::Num(n)) | (Val::Num(n), Val::TStr(s) | Val::BStr(s)) => {
            let times = match n {
                Num::Int(i) => usize::try_from(*i).unwrap_or(0),
                // jaq saturates big integers to `isize` here.
                Num::BigInt(_) if Val::Num(n.clone()) > Val::from(0isize) => usize::MAX,
                _ => 0,
            };
            s.len().saturating_mul(times)
        }
        _ => 0,
    };
    if repeated > 0 {
        if let Err(code) = charge(repeated) {
            return halt(code);
        }
    }
    if let Some((x, y)) = as_floats_if_huge(&l, &r, |x, y| x.saturating_add(y)) {
        return box_once(Ok(Val::Num(Num::Float(x * y))));
    }
    box_once((l * r).map_err(Exn::from))
}

// -------------------------------------------------------------- fromjson

/// What a scan learns about a JSON text before it is parsed.
struct Shape {
    /// Number of values (a slight overestimate).
    values: usize,
    /// Number of arrays and objects.
    containers: usize,
}

/// Heap bytes of an array or object besides its elements (reference count,
/// vector or map header, allocator rounding): an estimate.
const CONTAINER_BYTES: usize = 64;

/// Checks the nesting and the number lengths of `text` without parsing it.
///
/// jaq-json's parser recurses once per `[`/`{`, without a limit: 3 MB of
/// `[` overflow even a 256 MiB stack. This scan follows the same lexical
/// rules as that parser (strings with backslash escapes, `b"..."` byte
/// strings, `#` comments up to the end of the line) and counts brackets
/// outside strings and comments; where the parser would stop at a syntax
/// error earlier, the scan only looks further. It is written by hand
/// because no crate checks jaq's JSON superset (NaN, comments, several
/// values in one text), and parsing with another parser would change what
/// `fromjson` accepts.
fn scan(text: &[u8]) -> Result<Shape, String> {
    let mut depth = 0usize;
    let mut digits = 0usize;
    let mut shape = Shape {
        values: 1,
        containers: 0,
    };
    let mut in_string = false;
    let mut escaped = false;
    let mut in_comment = false;
    for (at, &b) in text.iter().enumerate() {
        if in_string {
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                in_string = false;
            }
            continue;
        }
        if in_comment {
            in_comment = b != b'\n';
            continue;
        }
        if b.is_ascii_digit() {
            digits += 1;
            if digits > MAX_NUMBER_DIGITS {
                return Err(format!(
                    "number with more than {MAX_NUMBER_DIGITS} digits at byte {at}"
                ));
            }
            continue;
        }
        digits = 0;
        match b {
            b'"' => in_string = true,
            b'#' => in_comment = true,
            b'[' | b'{' => {
                depth += 1;
                if depth > MAX_VALUE_DEPTH {
                    return Err(format!(
                        "nested more than {MAX_VALUE_DEPTH} levels deep at byte {at}"
                    ));
                }
                shape.containers += 1;
                shape.values += 1;
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            b',' | b':' => shape.values += 1,
            _ => {}
        }
    }
    Ok(shape)
}

/// The start of a text for messages, as a JSON string.
fn excerpt(text: &[u8]) -> String {
    const MAX_CHARS: usize = 24;
    let text = String::from_utf8_lossy(text);
    let head: String = text.chars().take(MAX_CHARS).collect();
    let more = if head.len() < text.len() { "..." } else { "" };
    format!("{}{more}", serde_json::Value::String(head))
}

/// jaq's `fromjson`, after [`scan`] and with its estimated size charged to
/// the run's budget.
fn fromjson<'a>(v: Val) -> ValXs<'a, Val> {
    let text = match v.try_as_utf8_bytes_owned() {
        Ok(text) => text,
        Err(e) => return box_once(Err(Exn::from(e))),
    };
    let shape = match scan(&text) {
        Ok(shape) => shape,
        Err(why) => {
            return box_once(fail(format!(
                "cannot parse {} as JSON: {why}",
                excerpt(&text)
            )))
        }
    };
    let estimate = text
        .len()
        .saturating_add(shape.values.saturating_mul(std::mem::size_of::<Val>()))
        .saturating_add(shape.containers.saturating_mul(CONTAINER_BYTES));
    if let Err(code) = charge(estimate) {
        return halt(code);
    }
    let head = excerpt(&text);
    let values = jaq_json::bytes_valrs(text, move |s| {
        Box::new(jaq_json::read::parse_many(s).map(move |r| {
            r.map_err(|e| jaq_json::Error::str(format_args!("cannot parse {head} as JSON: {e}")))
        }))
    });
    Box::new(values.map(|r| r.map_err(Exn::from)))
}

// --------------------------------------------------------- tojson, tostring

enum Refused {
    Deep,
    Halt(i32),
}

/// A lower bound of the size of `v` as JSON, walked at most
/// [`MAX_VALUE_DEPTH`] levels deep and only until `left` runs out, so that
/// it stays cheap on values that share parts (`[., .]` repeated builds an
/// exponentially large value from few nodes) and on deep values built
/// inside the filter.
fn measure(v: &Val, depth: usize, left: &mut usize) -> Result<(), Refused> {
    if depth > MAX_VALUE_DEPTH {
        return Err(Refused::Deep);
    }
    let mut take = |n: usize| -> Result<(), Refused> {
        *left = left.checked_sub(n).ok_or(Refused::Halt(HALT_BUDGET))?;
        Ok(())
    };
    match v {
        Val::Null | Val::Bool(_) | Val::Num(_) => take(1),
        Val::TStr(s) | Val::BStr(s) => take(s.len().saturating_add(2)),
        Val::Arr(a) => {
            take(a.len().saturating_add(1).max(2))?;
            a.iter().try_for_each(|x| measure(x, depth + 1, left))
        }
        Val::Obj(o) => {
            take(o.len().saturating_mul(2).saturating_add(1).max(2))?;
            o.iter().try_for_each(|(k, x)| {
                measure(k, depth + 1, left)?;
                measure(x, depth + 1, left)
            })
        }
    }
}

/// Collects bytes up to a limit, failing beyond it.
struct Limited {
    buf: Vec<u8>,
    limit: usize,
}

impl std::io::Write for Limited {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.buf.len().saturating_add(buf.len()) > self.limit {
            return Err(std::io::Error::other("limit"));
        }
        self.buf.extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// jaq's `tojson`, refusing values nested deeper than [`MAX_VALUE_DEPTH`]
/// (jaq's writer recurses per level) and text beyond the run's budget.
fn to_json_val<'a>(v: &Val) -> ValXs<'a, Val> {
    let left = alloc_left();
    let mut walk = left;
    let written = measure(v, 0, &mut walk).and_then(|()| {
        let mut w = Limited {
            buf: Vec::new(),
            limit: left,
        };
        let pp = jaq_json::write::Pp::default();
        jaq_json::write::write(&mut w, &pp, 0, v).map_err(|_| Refused::Halt(HALT_BUDGET))?;
        charge(w.buf.len()).map_err(Refused::Halt)?;
        Ok(w.buf)
    });
    match written {
        Ok(text) => box_once(Ok(Val::utf8_str(text))),
        Err(Refused::Deep) => box_once(fail(format!(
            "cannot convert to JSON: nested more than {MAX_VALUE_DEPTH} levels deep"
        ))),
        Err(Refused::Halt(code)) => halt(code),
    }
}

#[cfg(test)]
mod tests;
