//! jq transforms (jaq): compiled with side-effecting builtins removed, run
//! with bounds on time, recursion depth, what a filter may build, and
//! output size.
//!
//! # Contract
//!
//! * [`JqProgram::compile`] accepts jq source and returns a program or a
//!   [`JqCompileError`] whose message starts with `line:column` (1-based,
//!   columns in characters) and names the offending token. Programs longer
//!   than [`MAX_PROGRAM_BYTES`] are refused. jaq's lexer, parser and
//!   compiler recurse once per nesting level, so compiling runs on a thread
//!   of its own with a large stack; a panic there is a compile error.
//! * The language is jaq's core + std + json library **minus** everything
//!   that reads the environment or has side effects: `env`/`$ENV`, `input`,
//!   `inputs`, `input_filename`, `$__loc__`, `get_search_list`, `halt`,
//!   `halt_error`, `debug`, `stderr`, `localtime`, `strflocaltime` (both read
//!   the host time zone) and module loading (`import`/`include`). Using any of
//!   them is a compile error ("undefined ..."). `now`, `mktime`, `gmtime`,
//!   `strftime` remain: `now` reads the clock, so a transform that uses it is
//!   not deterministic; the others are pure functions of their input.
//!   Names starting with `__toolgate_` are reserved.
//! * [`JqProgram`] is an `Arc` around jaq's compiled filter. That filter is a
//!   table of terms plus plain `fn` pointers, so it is `Send + Sync` and is
//!   compiled once and shared by every thread; nothing is recompiled per
//!   call and no thread-local cache is needed. jaq's *values* are `Rc`-based
//!   and not `Send`, so they only ever exist on the worker thread that runs
//!   the filter: `serde_json::Value` goes in, `serde_json::Value` comes out.
//!   Measured in a debug build on the 2-core CI box: compiling a small
//!   program takes about 4-6 ms, running `.` through the worker pool about
//!   8 µs (the thread hop), so recompiling per call would cost several
//!   hundred times the hop; sharing the compiled filter costs nothing.
//! * [`JqProgram::run`] / [`JqProgram::run_bounded`] return the first output
//!   of the filter (an error if there is none) and never block the caller for
//!   longer than the timeout. A failure is a [`JqRunError`] whose kind says
//!   whether the time limit or the output limit stopped the run, so callers
//!   never read its text to decide; a panic inside jaq is an error of the
//!   run, and the worker goes on serving.
//!
//! # How runaway filters are bounded
//!
//! jaq has no fuel or interrupt API. Filters run on a small process-wide
//! pool of worker threads ([`MAX_WORKERS`]) with large stacks; the caller
//! waits on a channel with a timeout. To stop runaway filters *cooperatively*
//! (so that a timed-out filter does not keep burning a CPU), the program is
//! rewritten on jaq's parse tree before it is compiled: every `def` body —
//! the user's and the library's, including the loops inside `repeat`,
//! `recurse`, `while`, `until` — starts with a hidden native guard, and
//! `range` is replaced by a version that consults the same guard for every
//! element. The guard aborts the run with an exception that `try` cannot
//! catch when the deadline has passed or when the recursion used more than
//! [`MAX_RECURSION_STACK_BYTES`] of stack (non-tail recursion such as
//! `def f: f + 1; f` would otherwise overflow the stack and abort the
//! process).
//!
//! # What a filter may build
//!
//! Some builtins build a large value from a small input in one step, where
//! no guard runs; an allocation that fails aborts the process, and a deep
//! JSON text overflows jaq's recursive parser. They are replaced by bounded
//! versions that check *before* they allocate, against
//! [`JqLimits::max_alloc_bytes`] (default 64 MiB, 16 MiB for the dry runs
//! at compile time):
//!
//! * `fromjson` (and `tonumber`, which uses it) first scans the text: more
//!   than [`MAX_VALUE_DEPTH`] levels of nesting or a number longer than
//!   [`MAX_NUMBER_DIGITS`] digits is an error that `try` can catch (as for
//!   any text that is not JSON); the estimated size of the parsed value
//!   (text length plus 16 bytes per value and 64 per array or object) is
//!   charged to the run's budget.
//! * `tojson`, `tostring`, string interpolation `"\(f)"` and the formats
//!   built on them (`@text`, `@json`, `@html`, `@sh`, `@base64`, ...) refuse
//!   values nested deeper than [`MAX_VALUE_DEPTH`] (a catchable error) and
//!   charge the text they write to the budget.
//! * `*` of a string and a number (repetition) charges the result's length
//!   before building it.
//! * `+` of two strings or two arrays refuses a result larger than the
//!   budget (strings in bytes, arrays at 16 bytes per element), and
//!   charges what its right side appends: concatenation in a loop
//!   (`reduce .[] as $x (""; . + $x)`, which is how `join` works) is
//!   charged the final string once, not each intermediate one.
//! * Collecting a stream into an array (`[f]`, and so `map`, `to_entries`,
//!   `paths`, `[limit(n; repeat(...))]`, ...) charges every element as it
//!   is collected: two slots (a growing `Vec` doubles) plus the top level
//!   of a string, array or object element (what `explode` or
//!   `ascii_downcase` build anew per element). `[range(1e9)]` stops at the
//!   budget within a fraction of its deadline instead of growing until it.
//! * Integer arithmetic whose result could exceed [`MAX_INT_BITS`] bits
//!   computes in floating point instead, as jq does for all numbers.
//!
//! The budget is for the whole run: a filter that exceeds it, or builds one
//! value beyond it, stops with an error that `try` cannot catch.
//!
//! A host that runs many filters at once gives each run a [`JqMemory`]
//! ([`JqProgram::run_metered`]): what a run is charged is reserved from it
//! as the run goes, in steps of [`RESERVE_CHUNK_BYTES`], and a refusal
//! stops the run with [`JqRunError::OutOfMemory`]. The gateway reserves
//! from its response memory budget, so runs at once cannot together
//! exceed what the pod has for responses.
//!
//! Limitations (documented, not fixed):
//!
//! * Work that never passes through a guard cannot be interrupted: a single
//!   huge native operation (`sort` of a huge array) or a generator
//!   explosion built only from operators (`[combinations]` over a large
//!   input). Such a filter keeps its worker busy after the caller has
//!   received its timeout error. At most [`MAX_WORKERS`] can be stuck at a
//!   time; when all are, new runs fail at once with
//!   "jq worker pool exhausted" instead of queueing.
//! * Charges are estimates of what a filter builds, not a count of its
//!   allocations: builtins whose output is proportional to their input
//!   (`explode`, `@base64`, `ascii_downcase`, `split`) are charged only
//!   when their results are collected into an array, and values built and
//!   dropped in a loop that never collects or concatenates (`reduce` with
//!   `setpath`, objects) are bounded by the deadline alone. Counting every
//!   allocation needs an allocator that counts per thread.
//! * `+` in a `reduce` copies its accumulator when jaq holds another
//!   reference to it, so `reduce range(n) as $x ([]; . + [$x])` takes time
//!   quadratic in `n`: it stops at the deadline or the budget.
//! * Values nested very deeply *by the filter itself* (e.g.
//!   `reduce range(1e6) as $x (.; [.])`, which is fast to build) are dropped
//!   recursively by jaq's value type, outside any guard, and so are error
//!   messages that `try ... catch` formats from such a value. The worker's
//!   256 MiB stack absorbs a few hundred thousand levels (measured: 200 000
//!   fine, 1 000 000 overflows in a debug build); beyond that the stack
//!   overflows and the process aborts. Fixing this needs an iterative `Drop`
//!   in jaq-json; until then transforms must come from trusted catalog
//!   authors, which they do (overlays and the OpenAPI document). Values
//!   from outside (the input, `fromjson`) are at most [`MAX_VALUE_DEPTH`]
//!   deep.
//! * Values crossing the boundary are limited to [`MAX_VALUE_DEPTH`] levels
//!   of nesting so that the caller's (small) stack can serialise and drop
//!   them. An error message that reaches the caller is cut to
//!   [`MAX_ERROR_MESSAGE_BYTES`].
//!
//! # Modules
//!
//! * `sandbox`: compiling (the language without its side-effecting
//!   builtins, the rewrite of `harden`, compile errors with positions) and
//!   running one filter within its limits on the current thread.
//! * `pool`: the worker threads that run filters, and the caller's wait
//!   with its timeout.
//! * `convert`: `serde_json` values in, `serde_json` values out, with the
//!   one check of the output's size.
//! * `harden` and `natives`: the rewrite and the bounded builtins it calls.

mod convert;
mod harden;
mod natives;
mod pool;
mod sandbox;

use std::sync::Arc;
use std::time::Duration;

use jaq_json::Val;
use serde_json::Value;

pub use natives::{MAX_INT_BITS, MAX_NUMBER_DIGITS, RESERVE_CHUNK_BYTES};

type Data = jaq_core::data::JustLut<Val>;
type Filter = jaq_core::Filter<Data>;

/// Maximum number of jq worker threads (and so of filters that can be stuck
/// past their deadline at the same time).
pub const MAX_WORKERS: usize = 8;

/// Stack of each worker thread and of the compiling thread. Only touched
/// pages are committed, so this is mostly address space; it is large so
/// that jaq's recursive drop of deeply nested values built inside a filter,
/// and its recursive parser and compiler, do not overflow.
const BIG_STACK_BYTES: usize = 256 << 20;

/// Stack a filter's recursion may use before the guard stops it.
pub const MAX_RECURSION_STACK_BYTES: usize = 32 << 20;

/// Maximum nesting of values passed to and returned from a filter, of JSON
/// text parsed by `fromjson` and of values written by `tojson`/`tostring`.
pub const MAX_VALUE_DEPTH: usize = 512;

/// Longest accepted jq program, in bytes. It bounds the depth of jaq's
/// recursion while compiling (measured in a debug build: 32 000 nested
/// unary minus, the deepest program per byte, compile within the compiling
/// thread's 256 MiB stack, 64 000 overflow it); real transforms are a few
/// hundred bytes.
pub const MAX_PROGRAM_BYTES: usize = 16 << 10;

/// Longest error message a run returns; longer ones are cut (jaq quotes
/// whole values in messages such as "cannot index ... with ...").
pub const MAX_ERROR_MESSAGE_BYTES: usize = 4096;

/// A compiled jq program. Cheap to clone and share between threads.
#[derive(Clone)]
pub struct JqProgram {
    inner: Arc<Compiled>,
}

struct Compiled {
    source: String,
    filter: Filter,
}

impl std::fmt::Debug for JqProgram {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JqProgram")
            .field("source", &self.inner.source)
            .finish()
    }
}

/// A jq program that does not compile.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("jq: {message}")]
pub struct JqCompileError {
    /// Human message including line:column of the problem.
    pub message: String,
}

/// A run that failed. Callers decide on the variant; the text is for
/// people.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JqRunError {
    /// The run's time limit (which includes waiting for a worker) passed.
    #[error("jq: timed out after {0:?}")]
    Timeout(Duration),
    /// The output, as compact JSON, is larger than this many bytes.
    #[error("jq: output is larger than {0} bytes")]
    OutputTooLarge(usize),
    /// The host's memory budget ([`JqProgram::run_metered`]) refused to
    /// reserve more than this many bytes the filter had built.
    #[error("jq: out of memory: the host's memory budget has no room for more than the {} MiB the filter has built", .0.div_ceil(1 << 20))]
    OutOfMemory(usize),
    /// Anything else: an error the filter raised (`error(...)`, a type
    /// error), no output, a bound other than time and output size
    /// (recursion, nesting, what the filter may build), or no free worker.
    #[error("jq: {0}")]
    Failed(String),
}

/// Bounds of one run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JqLimits {
    /// Wall-clock time from the call until the result; includes waiting for
    /// a free worker.
    pub timeout: Duration,
    /// Maximum size of the output serialised as compact JSON.
    pub max_output_bytes: usize,
    /// What the run may build with the bounded builtins (see the module
    /// doc): the total charged by collecting into arrays, `+`,
    /// `fromjson`, `tojson`/`tostring`/string interpolation and string
    /// repetition, and the largest string or array `+` may build.
    pub max_alloc_bytes: usize,
}

impl JqLimits {
    /// The bounds [`JqProgram::run`] uses: 1 s, 16 MiB of output, 64 MiB
    /// built.
    pub const DEFAULT: JqLimits = JqLimits {
        timeout: Duration::from_secs(1),
        max_output_bytes: 16 << 20,
        max_alloc_bytes: 64 << 20,
    };
}

impl Default for JqLimits {
    /// [`JqLimits::DEFAULT`].
    fn default() -> Self {
        JqLimits::DEFAULT
    }
}

impl JqProgram {
    /// Parses and compiles `source`.
    pub fn compile(source: &str) -> Result<JqProgram, JqCompileError> {
        let filter = sandbox::compile(source)?;
        Ok(JqProgram {
            inner: Arc::new(Compiled {
                source: source.to_string(),
                filter,
            }),
        })
    }

    /// The source as given to [`JqProgram::compile`].
    pub fn source(&self) -> &str {
        &self.inner.source
    }

    /// Runs on `input` with [`JqLimits::default`], returning the first output.
    pub fn run(&self, input: Value) -> Result<Value, JqRunError> {
        self.run_bounded(input, &JqLimits::default())
    }

    /// Runs on `input`, returning the first output, within `limits`.
    ///
    /// Blocks the calling thread for at most `limits.timeout` (plus
    /// scheduling noise); async callers should use `spawn_blocking` or
    /// accept a short block.
    pub fn run_bounded(&self, input: Value, limits: &JqLimits) -> Result<Value, JqRunError> {
        self.run_on(pool::pool(), input, limits, None)
    }

    /// [`JqProgram::run_bounded`], with what the filter builds reserved
    /// from `memory` as it goes (in steps of [`RESERVE_CHUNK_BYTES`]): a
    /// refusal stops the run with [`JqRunError::OutOfMemory`]. `memory` is dropped when the worker is done with the run,
    /// which may be after this returns (a filter running past its
    /// timeout); that is when a host should release what it granted.
    pub fn run_metered(
        &self,
        input: Value,
        limits: &JqLimits,
        memory: Arc<dyn JqMemory>,
    ) -> Result<Value, JqRunError> {
        self.run_on(pool::pool(), input, limits, Some(memory))
    }
}

/// The host's memory budget, from which a run reserves what its filter
/// builds ([`JqProgram::run_metered`]). Called on the worker thread, so it
/// must not block.
pub trait JqMemory: Send + Sync {
    /// Reserves `bytes` more for the run until the handle is dropped;
    /// false when the budget has no room for them now.
    fn reserve(&self, bytes: usize) -> bool;
}

fn panic_text(panic: &(dyn std::any::Any + Send)) -> &str {
    panic
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("no message")
}

/// Shorthands for the tests of this module and its submodules.
#[cfg(test)]
mod testing {
    use super::*;

    pub(super) fn run(src: &str, input: Value) -> Result<Value, JqRunError> {
        JqProgram::compile(src).expect("compiles").run(input)
    }

    pub(super) fn short(timeout_ms: u64) -> JqLimits {
        JqLimits {
            timeout: Duration::from_millis(timeout_ms),
            max_output_bytes: 1 << 20,
            ..JqLimits::DEFAULT
        }
    }

    pub(super) fn with_alloc(max_alloc_bytes: usize) -> JqLimits {
        JqLimits {
            max_alloc_bytes,
            ..JqLimits::DEFAULT
        }
    }

    pub(super) fn failed(src: &str, input: Value) -> String {
        match run(src, input) {
            Err(JqRunError::Failed(msg)) => msg,
            other => panic!("{src}: {other:?}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::testing::*;
    use super::*;
    use serde_json::json;
    use std::time::Instant;

    const _: () = {
        const fn send_sync<T: Send + Sync>() {}
        send_sync::<JqProgram>();
        send_sync::<JqCompileError>();
        send_sync::<JqRunError>();
    };

    #[test]
    fn picks_and_renames_fields() {
        let out = run("{id: .petId}", json!({"petId": 7, "x": 1})).unwrap();
        assert_eq!(out, json!({"id": 7}));
        let out = run(
            ".items | map(.name)",
            json!({"items": [{"name": "a"}, {"name": "b"}]}),
        );
        assert_eq!(out.unwrap(), json!(["a", "b"]));
    }

    #[test]
    fn returns_the_first_output_only() {
        assert_eq!(run(".[]", json!([1, 2, 3])).unwrap(), json!(1));
    }

    #[test]
    fn no_output_is_an_error() {
        let err = run("empty", json!(1)).unwrap_err();
        assert_eq!(err, JqRunError::Failed("produced no output".into()));
    }

    #[test]
    fn jq_errors_carry_their_message() {
        let err = run(r#"error("boom")"#, json!(null)).unwrap_err();
        assert_eq!(err, JqRunError::Failed("boom".into()));
        let err = run(".a.b", json!({"a": 1})).unwrap_err();
        assert!(err.to_string().contains("cannot"), "{err}");
    }

    #[test]
    fn a_filter_raising_timed_out_is_a_failure_not_a_timeout() {
        let err = run(r#"error("timed out")"#, json!(null)).unwrap_err();
        assert_eq!(err, JqRunError::Failed("timed out".into()));
        let err = run(r#"error("timed out after 1s")"#, json!(null)).unwrap_err();
        assert!(matches!(err, JqRunError::Failed(_)), "{err:?}");
        let program = JqProgram::compile("def f: f; f").unwrap();
        let err = program.run_bounded(json!(0), &short(50)).unwrap_err();
        assert_eq!(err, JqRunError::Timeout(Duration::from_millis(50)));
    }

    #[test]
    fn usable_from_many_threads_at_once() {
        let program = JqProgram::compile("{id: .petId, n: (.items | length)}").unwrap();
        let handles: Vec<_> = (0..8)
            .map(|t| {
                let program = program.clone();
                std::thread::spawn(move || {
                    for i in 0..50 {
                        let input = json!({"petId": t * 1000 + i, "items": vec![0; i]});
                        let out = program.run(input).unwrap();
                        assert_eq!(out, json!({"id": t * 1000 + i, "n": i}));
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
    }

    #[test]
    #[ignore = "timing report, run by hand"]
    fn report_compile_and_run_cost() {
        let src = "{id: .petId, names: (.items | map(.name))}";
        let input = json!({"petId": 1, "items": [{"name": "a"}, {"name": "b"}]});
        let n = 200;
        let started = Instant::now();
        for _ in 0..n {
            JqProgram::compile(src).unwrap();
        }
        let compile = started.elapsed() / n;
        let program = JqProgram::compile(src).unwrap();
        let started = Instant::now();
        for _ in 0..n {
            program.run(input.clone()).unwrap();
        }
        let run = started.elapsed() / n;
        let identity = JqProgram::compile(".").unwrap();
        let started = Instant::now();
        for _ in 0..n {
            identity.run(json!(1)).unwrap();
        }
        let hop = started.elapsed() / n;
        println!("compile {compile:?} per program, run {run:?} per call, `.` {hop:?} per call");
    }
}
