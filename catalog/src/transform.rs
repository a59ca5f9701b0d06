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
//!   budget (strings in bytes, arrays at 16 bytes per element). This is a
//!   cap per value, not a charge: concatenation in a loop
//!   (`reduce .[] as $x (""; . + $x)`, which is how `join` works) builds
//!   each intermediate string once and frees it.
//! * Integer arithmetic whose result could exceed [`MAX_INT_BITS`] bits
//!   computes in floating point instead, as jq does for all numbers.
//!
//! The budget is for the whole run: a filter that exceeds it, or builds one
//! value beyond it, stops with an error that `try` cannot catch.
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
//! * Collecting a stream into an array (`[range(1e9)]`,
//!   `[limit(1e9; repeat(1))]`, `[.[] as $x | .[]]`) and builtins whose
//!   output is proportional to their input (`explode`, `to_entries`,
//!   `@base64`, `ascii_downcase`, `split`) allocate without a bound other
//!   than the deadline: memory grows with the timeout and the speed of the
//!   host. Bounding them needs an allocator that counts per thread.
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
//! # Value conversion
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

mod harden;
mod natives;

use std::collections::VecDeque;
use std::sync::{mpsc, Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

use jaq_core::load::parse::Def;
use jaq_core::load::{self, Arena, File, Loader};
use jaq_core::native::Fun;
use jaq_core::{Compiler, Ctx, Exn, Vars};
use jaq_json::{Num, Val};
use serde_json::Value;

pub use natives::{MAX_INT_BITS, MAX_NUMBER_DIGITS};

type Data = jaq_core::data::JustLut<Val>;
type Filter = jaq_core::Filter<Data>;

/// Prefix of the names the rewrite adds; programs may not mention it, so
/// they cannot shadow or call those names.
const RESERVED: &str = "__toolgate_";

/// Name of the hidden native guard.
const GUARD: &str = "__toolgate_guard";

/// The program itself, as the last definition of the prelude.
const MAIN: &str = "__toolgate_main";

/// Builtins removed from the language (see the module doc).
const FORBIDDEN: &[&str] = &[
    "env",
    "input",
    "inputs",
    "input_filename",
    "get_search_list",
    "halt",
    "halt_error",
    "debug",
    "debug_empty",
    "stderr",
    "stderr_empty",
    "localtime",
    "strflocaltime",
];

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
    /// doc): the total charged by `fromjson`, `tojson`/`tostring`/string
    /// interpolation and string repetition, and the largest string or
    /// array `+` may build.
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
        if source.len() > MAX_PROGRAM_BYTES {
            return Err(JqCompileError {
                message: format!(
                    "1:1: the program is {} bytes long, more than {MAX_PROGRAM_BYTES}",
                    source.len()
                ),
            });
        }
        if let Some(at) = source.find(RESERVED) {
            return Err(JqCompileError {
                message: format!(
                    "{}: names starting with `{RESERVED}` are reserved",
                    line_col(source, at)
                ),
            });
        }
        let filter = std::thread::scope(|scope| {
            let compiler = std::thread::Builder::new()
                .name("toolgate-jq-compile".into())
                .stack_size(BIG_STACK_BYTES)
                .spawn_scoped(scope, || compile_source(source))
                .map_err(|e| JqCompileError {
                    message: format!("cannot start the compiling thread: {e}"),
                })?;
            compiler.join().unwrap_or_else(|panic| {
                Err(JqCompileError {
                    message: format!("jq panicked while compiling: {}", panic_text(&*panic)),
                })
            })
        })?;
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
        self.run_on(pool(), input, limits)
    }

    fn run_on(
        &self,
        pool: &'static Pool,
        input: Value,
        limits: &JqLimits,
    ) -> Result<Value, JqRunError> {
        let deadline = Instant::now() + limits.timeout;
        let (reply, result) = mpsc::sync_channel(1);
        let job = Job {
            program: Arc::clone(&self.inner),
            input,
            limits: *limits,
            deadline,
            reply,
        };
        pool.submit(job)?;
        let wait = deadline.saturating_duration_since(Instant::now());
        match result.recv_timeout(wait) {
            Ok(r) => r,
            Err(mpsc::RecvTimeoutError::Timeout) => Err(JqRunError::Timeout(limits.timeout)),
            Err(mpsc::RecvTimeoutError::Disconnected) => Err(JqRunError::Failed(
                "jq worker stopped without a result".into(),
            )),
        }
    }
}

fn panic_text(panic: &(dyn std::any::Any + Send)) -> &str {
    panic
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("no message")
}

// ---------------------------------------------------------------- compiling

/// jaq's library minus [`FORBIDDEN`], each definition rewritten by
/// [`harden::def`]. Parsed once.
fn library() -> &'static [Def<&'static str>] {
    static LIBRARY: OnceLock<Vec<Def<&'static str>>> = OnceLock::new();
    LIBRARY.get_or_init(|| {
        jaq_core::defs()
            .chain(jaq_std::defs())
            .chain(jaq_json::defs())
            .filter(|d| !FORBIDDEN.contains(&d.name))
            .map(harden::def)
            .collect()
    })
}

fn funs() -> impl Iterator<Item = Fun<Data>> {
    jaq_core::funs::<Data>()
        .chain(jaq_std::funs::<Data>())
        .chain(jaq_json::funs::<Data>())
        .filter(|(name, args, _)| {
            let replaced = natives::REPLACED.contains(&(*name, args.len()));
            !(FORBIDDEN.contains(name) || replaced)
        })
        .chain(natives::funs())
}

fn compile_source(source: &str) -> Result<Filter, JqCompileError> {
    let arena = Arena::default();
    // jaq's loader first, for its messages: lexer and parser errors with
    // positions, and the refusal of `import`/`include`.
    Loader::new(Vec::new())
        .load(
            &arena,
            File {
                code: source,
                path: (),
            },
        )
        .map_err(|errs| load_error(source, errs))?;
    let main = load::parse(source, |p| p.term()).ok_or_else(|| JqCompileError {
        message: "1:1: module directives are not supported".into(),
    })?;
    // The program becomes the last definition of the prelude, so that it
    // can be rewritten as a tree; its names still point into `source`, so
    // errors about them carry their positions.
    let mut prelude = library().to_vec();
    prelude.push(Def {
        name: MAIN,
        args: Vec::new(),
        body: harden::term(main),
    });
    let modules = Loader::new(prelude)
        .load(
            &arena,
            File {
                code: MAIN,
                path: (),
            },
        )
        .map_err(|errs| load_error(source, errs))?;
    Compiler::default()
        .with_funs(funs())
        .compile(modules)
        .map_err(|errs| {
            let mut parts = Vec::new();
            for (_file, undefined) in errs {
                for (name, what) in undefined {
                    let arity = match what {
                        jaq_core::compile::Undefined::Filter(n) => format!("/{n}"),
                        _ => String::new(),
                    };
                    parts.push(format!(
                        "{}: undefined {} `{name}{arity}`",
                        position(source, name),
                        what.as_str()
                    ));
                }
            }
            JqCompileError {
                message: join_errors(parts),
            }
        })
}

fn load_error(source: &str, errs: load::Errors<&str, ()>) -> JqCompileError {
    let mut parts = Vec::new();
    for (_file, err) in errs {
        match err {
            load::Error::Io(es) => {
                for (path, msg) in es {
                    parts.push(format!(
                        "{}: cannot load {path:?}: {msg}",
                        position(source, path)
                    ));
                }
            }
            load::Error::Lex(es) => {
                for (expect, at) in es {
                    parts.push(format!(
                        "{}: expected {}, found {}",
                        position(source, at),
                        expect.as_str(),
                        found(at)
                    ));
                }
            }
            // NB: same message shape as `Lex`, but a different `expect` type,
            // so the arms cannot be merged.
            load::Error::Parse(es) => {
                for (expect, at) in es {
                    parts.push(format!(
                        "{}: expected {}, found {}",
                        position(source, at),
                        expect.as_str(),
                        found(at)
                    ));
                }
            }
        }
    }
    JqCompileError {
        message: join_errors(parts),
    }
}

fn join_errors(parts: Vec<String>) -> String {
    if parts.is_empty() {
        "does not compile".to_string()
    } else {
        parts.join("; ")
    }
}

fn found(token: &str) -> String {
    if token.is_empty() {
        "end of input".to_string()
    } else {
        // Lexer errors carry the whole rest of the input; show its start.
        let short: String = token.chars().take(20).collect();
        if short.len() < token.len() {
            format!("`{short}...`")
        } else {
            format!("`{short}`")
        }
    }
}

/// `line:column` of `part` if it is a slice of `whole` (names from library
/// definitions are not), else `?:?`.
fn position(whole: &str, part: &str) -> String {
    let start = whole.as_ptr() as usize;
    let at = part.as_ptr() as usize;
    if at >= start && at + part.len() <= start + whole.len() {
        line_col(whole, at - start)
    } else {
        "?:?".to_string()
    }
}

fn line_col(source: &str, offset: usize) -> String {
    let before = source.get(..offset).unwrap_or(source);
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().unwrap_or("").chars().count() + 1;
    format!("{line}:{col}")
}

// ------------------------------------------------------------------ running

struct Job {
    program: Arc<Compiled>,
    input: Value,
    limits: JqLimits,
    deadline: Instant,
    reply: mpsc::SyncSender<Result<Value, JqRunError>>,
}

struct Pool {
    state: Mutex<PoolState>,
    wake: Condvar,
    max_workers: usize,
}

#[derive(Default)]
struct PoolState {
    queue: VecDeque<Job>,
    /// Deadline of the job each worker is running, `None` when idle.
    busy: Vec<Option<Instant>>,
}

fn pool() -> &'static Pool {
    static POOL: OnceLock<Pool> = OnceLock::new();
    POOL.get_or_init(|| Pool::new(MAX_WORKERS))
}

impl Pool {
    fn new(max_workers: usize) -> Pool {
        Pool {
            state: Mutex::new(PoolState::default()),
            wake: Condvar::new(),
            max_workers,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, PoolState> {
        // A worker panicking while holding the lock leaves consistent state
        // (it only pushes/pops), so poisoning is ignored.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn submit(&'static self, job: Job) -> Result<(), JqRunError> {
        let now = Instant::now();
        let mut state = self.lock();
        let idle = state.busy.iter().filter(|b| b.is_none()).count();
        if idle <= state.queue.len() {
            if state.busy.len() < self.max_workers {
                let id = state.busy.len();
                let spawned = std::thread::Builder::new()
                    .name(format!("toolgate-jq-{id}"))
                    .stack_size(BIG_STACK_BYTES)
                    .spawn(move || self.work(id));
                if spawned.is_ok() {
                    state.busy.push(None);
                }
            }
            let stuck = state
                .busy
                .iter()
                .filter(|b| b.is_some_and(|d| d <= now))
                .count();
            if state.busy.is_empty() || stuck == state.busy.len() {
                return Err(JqRunError::Failed(format!(
                    "jq worker pool exhausted ({stuck} of {} workers are still running \
                     filters past their timeout)",
                    self.max_workers
                )));
            }
        }
        state.queue.push_back(job);
        drop(state);
        self.wake.notify_one();
        Ok(())
    }

    fn work(&self, id: usize) {
        loop {
            let job = {
                let mut state = self.lock();
                loop {
                    if let Some(job) = state.queue.pop_front() {
                        if let Some(slot) = state.busy.get_mut(id) {
                            *slot = Some(job.deadline);
                        }
                        break job;
                    }
                    state = self.wake.wait(state).unwrap_or_else(|p| p.into_inner());
                }
            };
            let result = if Instant::now() >= job.deadline {
                // The caller has already given up.
                Err(JqRunError::Timeout(job.limits.timeout))
            } else {
                let run = std::panic::AssertUnwindSafe(|| {
                    execute(&job.program.filter, job.input, &job.limits, job.deadline)
                });
                std::panic::catch_unwind(run).unwrap_or_else(|panic| {
                    Err(JqRunError::Failed(format!(
                        "jq panicked while running the filter: {}",
                        panic_text(&*panic)
                    )))
                })
            };
            natives::end_run();
            let _ = job.reply.send(result);
            if let Some(slot) = self.lock().busy.get_mut(id) {
                *slot = None;
            }
        }
    }
}

fn execute(
    filter: &Filter,
    input: Value,
    limits: &JqLimits,
    deadline: Instant,
) -> Result<Value, JqRunError> {
    let input = to_val(input, 0)?;
    natives::begin_run(deadline, limits.max_alloc_bytes);
    let ctx = Ctx::<Data>::new(&filter.lut, Vars::new([]));
    let first = filter.id.run((ctx, input)).next();
    let out = match first {
        None => return Err(JqRunError::Failed("produced no output".into())),
        Some(Ok(v)) => v,
        Some(Err(exn)) => return Err(exn_error(exn, limits)),
    };
    let mut budget = limits.max_output_bytes;
    from_val(out, 0, &mut budget).map_err(|e| match e {
        Conv::TooLarge => JqRunError::OutputTooLarge(limits.max_output_bytes),
        Conv::Other(e) => e,
    })
}

fn exn_error(exn: Exn<'_, Val>, limits: &JqLimits) -> JqRunError {
    let exn = match exn.get_err() {
        Ok(err) => return JqRunError::Failed(error_text(err)),
        Err(exn) => exn,
    };
    let built = limits.max_alloc_bytes;
    JqRunError::Failed(match exn.get_halt() {
        Ok(natives::HALT_TIMEOUT) => return JqRunError::Timeout(limits.timeout),
        Ok(natives::HALT_RECURSION) => format!(
            "recursion too deep (more than {} MiB of stack)",
            MAX_RECURSION_STACK_BYTES >> 20
        ),
        Ok(natives::HALT_BUDGET) => format!(
            "the filter built more than {built} bytes with fromjson, tojson, tostring, \
             string interpolation and string repetition (the run's budget)"
        ),
        Ok(natives::HALT_VALUE_SIZE) => {
            format!("the filter would build a string or array larger than {built} bytes")
        }
        Ok(code) => format!("halted with code {code}"),
        Err(_) => "internal control flow escaped the filter".into(),
    })
}

/// The text of an error the filter raised, at most
/// [`MAX_ERROR_MESSAGE_BYTES`] long, formatted without building more.
fn error_text(err: jaq_core::Error<Val>) -> String {
    let shown = bounded_display(&err);
    // A string raised with `error("...")` is shown quoted; its own text is
    // wanted, and taking it is a move. Messages built by jaq ("cannot
    // index ...") never start with a quote.
    if !shown.starts_with('"') {
        return shown;
    }
    match err.into_val() {
        Val::TStr(s) | Val::BStr(s) => {
            let end = s.len().min(MAX_ERROR_MESSAGE_BYTES + 4);
            let text = String::from_utf8_lossy(&s[..end]);
            cut(&text, s.len() > end)
        }
        v => bounded_display(&v),
    }
}

fn bounded_display(v: &dyn std::fmt::Display) -> String {
    struct Bounded(String);
    impl std::fmt::Write for Bounded {
        fn write_str(&mut self, s: &str) -> std::fmt::Result {
            // Stopping the formatter also stops its recursion into values.
            if self.0.len() + s.len() > MAX_ERROR_MESSAGE_BYTES + 4 {
                let room = (MAX_ERROR_MESSAGE_BYTES + 4).saturating_sub(self.0.len());
                let mut end = room.min(s.len());
                while !s.is_char_boundary(end) {
                    end -= 1;
                }
                self.0.push_str(&s[..end]);
                return Err(std::fmt::Error);
            }
            self.0.push_str(s);
            Ok(())
        }
    }
    let mut out = Bounded(String::new());
    let more = std::fmt::write(&mut out, format_args!("{v}")).is_err();
    cut(&out.0, more)
}

/// `text` cut to [`MAX_ERROR_MESSAGE_BYTES`] (at a character boundary),
/// with `...` when something was left out.
fn cut(text: &str, more: bool) -> String {
    if text.len() <= MAX_ERROR_MESSAGE_BYTES && !more {
        return text.to_string();
    }
    let mut end = text.len().min(MAX_ERROR_MESSAGE_BYTES);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &text[..end])
}

// --------------------------------------------------------------- conversion

fn to_val(v: Value, depth: usize) -> Result<Val, JqRunError> {
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

enum Conv {
    TooLarge,
    Other(JqRunError),
}

/// Converts back, charging the exact size of the compact JSON text to
/// `budget` as it goes, so that a huge output is refused before it is fully
/// built; leaves are measured by serialising them with `serde_json`, the
/// same writer that later writes the whole.
fn from_val(v: Val, depth: usize, budget: &mut usize) -> Result<Value, Conv> {
    if depth > MAX_VALUE_DEPTH {
        return Err(Conv::Other(JqRunError::Failed(format!(
            "output is nested more than {MAX_VALUE_DEPTH} levels deep"
        ))));
    }
    Ok(match v {
        Val::Null => {
            charge(budget, 4)?;
            Value::Null
        }
        Val::Bool(b) => {
            charge(budget, if b { 4 } else { 5 })?;
            Value::Bool(b)
        }
        Val::Num(n) => {
            let n = num_to_json(&n);
            charge_json(budget, &n)?;
            n
        }
        Val::TStr(s) | Val::BStr(s) => Value::String(string(&s, budget)?),
        Val::Arr(a) => {
            // brackets and commas
            charge(budget, a.len().saturating_sub(1) + 2)?;
            let items = jaq_json::Rc::try_unwrap(a).unwrap_or_else(|a| (*a).clone());
            let mut out = Vec::with_capacity(items.len());
            for x in items {
                out.push(from_val(x, depth + 1, budget)?);
            }
            Value::Array(out)
        }
        Val::Obj(o) => {
            // braces, commas and colons
            charge(budget, o.len().saturating_sub(1) + 2 + o.len())?;
            let map = jaq_json::Rc::try_unwrap(o).unwrap_or_else(|o| (*o).clone());
            let mut out = serde_json::Map::with_capacity(map.len());
            for (k, x) in map {
                let key = match k {
                    Val::TStr(s) | Val::BStr(s) => string(&s, budget)?,
                    other => {
                        return Err(Conv::Other(JqRunError::Failed(format!(
                            "object key {} is not a string",
                            bounded_display(&other)
                        ))))
                    }
                };
                out.insert(key, from_val(x, depth + 1, budget)?);
            }
            Value::Object(out)
        }
    })
}

fn charge(budget: &mut usize, n: usize) -> Result<(), Conv> {
    *budget = budget.checked_sub(n).ok_or(Conv::TooLarge)?;
    Ok(())
}

/// A string's text (invalid UTF-8 replaced, as when writing it), charged
/// with its quotes and escapes; refused before it is copied if even its
/// bytes do not fit.
fn string(s: &[u8], budget: &mut usize) -> Result<String, Conv> {
    if s.len().saturating_add(2) > *budget {
        return Err(Conv::TooLarge);
    }
    let s = String::from_utf8_lossy(s).into_owned();
    charge_json(budget, &s)?;
    Ok(s)
}

fn charge_json(budget: &mut usize, v: &impl serde::Serialize) -> Result<(), Conv> {
    /// Counts bytes, failing once past the limit.
    struct Counter {
        n: usize,
        limit: usize,
    }
    impl std::io::Write for Counter {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.n += buf.len();
            if self.n > self.limit {
                Err(std::io::Error::other("limit"))
            } else {
                Ok(buf.len())
            }
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut counter = Counter {
        n: 0,
        limit: *budget,
    };
    serde_json::to_writer(&mut counter, v).map_err(|_| Conv::TooLarge)?;
    charge(budget, counter.n)
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
    use super::*;
    use serde_json::json;

    const _: () = {
        const fn send_sync<T: Send + Sync>() {}
        send_sync::<JqProgram>();
        send_sync::<JqCompileError>();
        send_sync::<JqRunError>();
    };

    fn run(src: &str, input: Value) -> Result<Value, JqRunError> {
        JqProgram::compile(src).expect("compiles").run(input)
    }

    fn short(timeout_ms: u64) -> JqLimits {
        JqLimits {
            timeout: Duration::from_millis(timeout_ms),
            max_output_bytes: 1 << 20,
            ..JqLimits::DEFAULT
        }
    }

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
    fn syntax_error_reports_line_column_and_token() {
        let err = JqProgram::compile("{a: 1}\n| .b | )").unwrap_err();
        assert!(err.message.starts_with("2:"), "{err}");
        assert!(err.message.contains("`)`"), "{err}");
        let err = JqProgram::compile(".a |").unwrap_err();
        assert!(err.message.contains("1:5"), "{err}");
        assert!(err.message.contains("end of input"), "{err}");
    }

    #[test]
    fn undefined_filter_reports_position_and_name() {
        let err = JqProgram::compile(".a |\n  nosuchthing(1)").unwrap_err();
        assert!(err.message.contains("2:3"), "{err}");
        assert!(
            err.message.contains("undefined filter `nosuchthing/1`"),
            "{err}"
        );
    }

    #[test]
    fn side_effecting_and_environment_builtins_are_undefined() {
        for src in [
            "env",
            "$ENV",
            "input",
            "inputs",
            "halt",
            "halt_error",
            "halt_error(1)",
            "debug",
            "debug(1)",
            "stderr",
            "input_filename",
            "$__loc__",
            "get_search_list",
            "localtime",
            "strflocaltime(\"%H\")",
            "debug_empty",
            "stderr_empty",
        ] {
            let err = JqProgram::compile(&format!(". | {src}")).unwrap_err();
            assert!(err.message.contains("undefined"), "{src}: {err}");
            assert!(err.message.starts_with("1:5"), "{src}: {err}");
        }
    }

    #[test]
    fn module_loading_is_refused() {
        assert!(JqProgram::compile(r#"import "foo" as f; ."#).is_err());
        assert!(JqProgram::compile(r#"include "foo"; ."#).is_err());
    }

    #[test]
    fn names_with_the_reserved_prefix_are_refused() {
        for src in [
            "def __toolgate_guard: .; 1",
            "__toolgate_add(1; 2)",
            "1 as $__toolgate_rhs | .",
        ] {
            let err = JqProgram::compile(src).unwrap_err();
            assert!(err.message.contains("reserved"), "{err}");
        }
    }

    #[test]
    fn standard_library_still_works() {
        let cases = [
            ("[limit(3; repeat(1))]", json!(null), json!([1, 1, 1])),
            (
                "[recurse(if . < 3 then . + 1 else empty end)]",
                json!(0),
                json!([0, 1, 2, 3]),
            ),
            ("[while(. < 3; . + 1)]", json!(0), json!([0, 1, 2])),
            ("until(. > 3; . + 1)", json!(0), json!(4)),
            ("[range(3)]", json!(null), json!([0, 1, 2])),
            ("[range(5; 0; -2)]", json!(null), json!([5, 3, 1])),
            ("[range(0; 1; 0.5)]", json!(null), json!([0, 0.5])),
            ("[paths]", json!({"a": [1]}), json!([["a"], ["a", 0]])),
            (
                "to_entries | map(.key)",
                json!({"b": 1, "a": 2}),
                json!(["b", "a"]),
            ),
            (
                "with_entries(select(.value != null))",
                json!({"a": null, "b": 1}),
                json!({"b": 1}),
            ),
            (
                "walk(if type == \"number\" then . + 1 else . end)",
                json!([1, [2]]),
                json!([2, [3]]),
            ),
            ("\"a b\" | @uri", json!(null), json!("a%20b")),
            ("(.a | tostring)", json!({"a": 5}), json!("5")),
            (
                "def inc: . + 1; def twice(f): f | f; twice(inc)",
                json!(1),
                json!(3),
            ),
            (
                "def getx: .x; getx |= . + 1",
                json!({"x": 1}),
                json!({"x": 2}),
            ),
            ("def f: def g: . * 2; g + 1; f", json!(3), json!(7)),
            ("\"\\(def f: 5; f)\"", json!(null), json!("5")),
            ("{def: 1} | .def", json!(null), json!(1)),
            (
                "[.[] | ascii_upcase] | sort",
                json!(["b", "a"]),
                json!(["A", "B"]),
            ),
            ("[splits(\", *\")]", json!("a, b,c"), json!(["a", "b", "c"])),
            ("[limit(2; .[])]", json!([5, 6, 7]), json!([5, 6])),
            ("@sh", json!(["a b", 1]), json!("'a b' 1")),
        ];
        for (src, input, want) in cases {
            assert_eq!(run(src, input).unwrap(), want, "{src}");
        }
    }

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

    fn assert_times_out(src: &str) {
        let program = JqProgram::compile(src).expect("compiles");
        let started = Instant::now();
        let err = program.run_bounded(json!(0), &short(200)).unwrap_err();
        let took = started.elapsed();
        assert!(took < Duration::from_millis(400), "{src}: took {took:?}");
        // Non-tail recursion may hit the depth guard before the deadline.
        let stopped =
            matches!(err, JqRunError::Timeout(_)) || err.to_string().contains("recursion too deep");
        assert!(stopped, "{src}: {err}");
    }

    #[test]
    fn runaway_filters_time_out_within_twice_the_timeout() {
        for src in [
            "def f: f; f",
            "[range(1e9)]",
            "repeat(.) | select(false)",
            "last(range(1e18))",
            "until(false; .)",
            "[recurse(.)] | length",
            "def f: try f catch f; f",
        ] {
            assert_times_out(src);
        }
    }

    #[test]
    fn timed_out_filters_stop_their_worker() {
        // Guarded loops stop at the deadline, so more runaways than workers
        // can run one after the other without exhausting the pool.
        let program = JqProgram::compile("last(range(1e18))").unwrap();
        for _ in 0..(MAX_WORKERS * 2) {
            let err = program.run_bounded(json!(0), &short(50)).unwrap_err();
            assert!(matches!(err, JqRunError::Timeout(_)), "{err}");
        }
        assert_eq!(run("1", json!(0)).unwrap(), json!(1));
    }

    #[test]
    fn all_workers_stuck_fails_fast_with_pool_exhausted() {
        // A reduce over a large input never passes a guard, so the single
        // worker stays busy after the caller's deadline.
        let pool: &'static Pool = Box::leak(Box::new(Pool::new(1)));
        let slow = JqProgram::compile("reduce .[] as $x (0; . + $x)").unwrap();
        let input = Value::Array(vec![json!(1); 2_000_000]);
        let err = slow.run_on(pool, input, &short(200)).unwrap_err();
        assert!(matches!(err, JqRunError::Timeout(_)), "{err}");
        std::thread::sleep(Duration::from_millis(5));
        let started = Instant::now();
        let quick = JqProgram::compile(".").unwrap();
        let err = quick.run_on(pool, json!(1), &short(10_000)).unwrap_err();
        assert!(err.to_string().contains("pool exhausted"), "{err}");
        assert!(started.elapsed() < Duration::from_millis(100));
        // Once the stuck filter finishes, the worker serves again.
        let mut last = Err(JqRunError::Failed(String::new()));
        for _ in 0..600 {
            last = quick.run_on(pool, json!(1), &short(10_000));
            if last.is_ok() {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        assert_eq!(last.unwrap(), json!(1));
    }

    #[test]
    fn deep_non_tail_recursion_is_stopped_not_a_crash() {
        let program = JqProgram::compile("def f: f + 1; f").unwrap();
        let err = program.run_bounded(json!(0), &short(10_000)).unwrap_err();
        assert!(err.to_string().contains("recursion too deep"), "{err}");
    }

    #[test]
    fn deep_recursion_in_library_definitions_is_stopped() {
        // `flatten($d)` recurses once per nesting level of data built inside
        // the filter, where the input depth cap does not apply.
        let program =
            JqProgram::compile("reduce range(200000) as $x (1; [.]) | flatten(1e9)").unwrap();
        let err = program
            .run_bounded(json!(null), &short(20_000))
            .unwrap_err();
        assert!(err.to_string().contains("recursion too deep"), "{err}");
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
    fn deeply_nested_values_are_refused_at_the_boundary() {
        let mut deep = json!(1);
        for _ in 0..(MAX_VALUE_DEPTH + 5) {
            deep = json!([deep]);
        }
        assert!(run(".", deep).unwrap_err().to_string().contains("nested"));
        let err = run("reduce range(1000) as $x (1; [.])", json!(null)).unwrap_err();
        assert!(err.to_string().contains("nested"), "{err}");
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

    fn with_alloc(max_alloc_bytes: usize) -> JqLimits {
        JqLimits {
            max_alloc_bytes,
            ..JqLimits::DEFAULT
        }
    }

    fn failed(src: &str, input: Value) -> String {
        match run(src, input) {
            Err(JqRunError::Failed(msg)) => msg,
            other => panic!("{src}: {other:?}"),
        }
    }

    #[test]
    fn a_deeply_nested_fromjson_string_is_an_error_not_an_abort() {
        // 3 MiB of `[` overflowed the worker's stack in jaq's recursive
        // parser and aborted the process.
        let program = JqProgram::compile(r#"{path: "/x", body: (.data | fromjson)}"#).unwrap();
        let err = program
            .run(json!({"data": "[".repeat(3 << 20)}))
            .unwrap_err();
        let JqRunError::Failed(msg) = &err else {
            panic!("{err}")
        };
        assert!(
            msg.contains("nested more than 512 levels deep at byte 512"),
            "{msg}"
        );
        assert!(msg.len() < 200, "only the text's start is quoted: {msg}");
        // Built inside the filter, and caught like any text that is not JSON.
        let src = r#"try ("[" * 3000000 | fromjson) catch "not JSON""#;
        assert_eq!(run(src, json!(null)).unwrap(), json!("not JSON"));
        assert_eq!(run(".", json!(1)).unwrap(), json!(1));
    }

    #[test]
    fn fromjson_accepts_nesting_up_to_the_value_depth_and_brackets_in_strings() {
        let nested = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
        assert!(run("fromjson", json!(nested(MAX_VALUE_DEPTH))).is_ok());
        let msg = failed("fromjson", json!(nested(MAX_VALUE_DEPTH + 1)));
        assert!(msg.contains("nested more than 512"), "{msg}");
        // Brackets inside strings (after an escaped quote and an escaped
        // backslash) and in comments are not nesting.
        let many = "[".repeat(2 * MAX_VALUE_DEPTH);
        let text = format!("[\"\\\"{many}\", \"\\\\\", {{\"k\": \"{many}\"}}] # {many}\n 1");
        let out = run("[fromjson] | map(type)", json!(text)).unwrap();
        assert_eq!(out, json!(["array", "number"]));
        // jaq's own extensions remain: NaN, several values in one text.
        assert_eq!(
            run("[fromjson]", json!("1 [NaN]")).unwrap(),
            json!([1, [null]])
        );
        assert_eq!(run("tonumber", json!("12")).unwrap(), json!(12));
    }

    #[test]
    fn fromjson_refuses_numbers_with_too_many_digits() {
        let long = "1".repeat(MAX_NUMBER_DIGITS + 1);
        let msg = failed("fromjson", json!(long));
        assert!(msg.contains("more than 4096 digits"), "{msg}");
        assert!(run("tonumber", json!(long)).is_err());
        let most = "1".repeat(MAX_NUMBER_DIGITS);
        assert_eq!(run("fromjson > 0", json!(most)).unwrap(), json!(true));
        // Digits inside a string are text.
        let quoted = format!("\"{long}\"");
        assert_eq!(
            run("fromjson | length", json!(quoted)).unwrap(),
            json!(4097)
        );
    }

    #[test]
    fn fromjson_charges_the_estimated_size_of_its_value_to_the_budget() {
        // 200 kB of text, 100 001 values: about 1.8 MB estimated.
        let text = format!("[{}0]", "0,".repeat(100_000));
        let program = JqProgram::compile("fromjson | length").unwrap();
        let err = program
            .run_bounded(json!(text), &with_alloc(1 << 20))
            .unwrap_err();
        assert!(
            err.to_string().contains("built more than 1048576 bytes"),
            "{err}"
        );
        let out = program.run_bounded(json!(text), &with_alloc(4 << 20));
        assert_eq!(out.unwrap(), json!(100_001));
    }

    #[test]
    fn string_repetition_beyond_the_budget_is_an_error_not_an_abort() {
        for (src, input) in [
            (r#""x" * 10000000000"#, json!(null)),
            (r#""x" * .n"#, json!({"n": 10_000_000_000u64})),
            (r#".n * "x""#, json!({"n": 10_000_000_000u64})),
            (r#""x" * 100000000000000000000"#, json!(null)),
            (r#""ab" * 40000000 | length"#, json!(null)),
            // A bound of the run, not an error of the filter: not caught.
            (r#"try ("x" * 10000000000) catch "caught""#, json!(null)),
        ] {
            let msg = failed(src, input);
            assert!(
                msg.contains("built more than 67108864 bytes"),
                "{src}: {msg}"
            );
        }
        assert_eq!(run(r#""ab" * 3"#, json!(null)).unwrap(), json!("ababab"));
        assert_eq!(run(r#"3 * "ab""#, json!(null)).unwrap(), json!("ababab"));
        assert_eq!(run(r#""ab" * 0"#, json!(null)).unwrap(), json!(null));
        // The budget is for the whole run: 20 × 100 kB do not fit in 1 MiB.
        let many = JqProgram::compile(r#"[range(20) | "x" * 100000] | length"#).unwrap();
        assert!(many.run_bounded(json!(null), &with_alloc(1 << 20)).is_err());
        let few = JqProgram::compile(r#"[range(5) | "x" * 100000] | length"#).unwrap();
        let out = few.run_bounded(json!(null), &with_alloc(1 << 20));
        assert_eq!(out.unwrap(), json!(5));
    }

    #[test]
    fn doubling_a_string_or_an_array_with_plus_stops_at_the_cap() {
        for src in [
            r#"reduce range(64) as $x ("x"; . + .)"#,
            "reduce range(64) as $x ([1]; . + .)",
            r#"reduce range(64) as $x ("x"; . += .)"#,
        ] {
            let msg = failed(src, json!(null));
            assert!(msg.contains("larger than 67108864 bytes"), "{src}: {msg}");
        }
        // Concatenation in a loop is capped per value, not charged: `join`
        // builds 2000 intermediate strings (10 MB in all) under a 64 KiB
        // budget.
        let parts: Vec<String> = (0..2000).map(|i| format!("{i:05}")).collect();
        let join = JqProgram::compile(r#"join("") | length"#).unwrap();
        let out = join.run_bounded(json!(parts), &with_alloc(64 << 10));
        assert_eq!(out.unwrap(), json!(10_000));
    }

    #[test]
    fn assigning_far_past_the_end_of_an_array_is_an_error_not_padding() {
        // jq pads with nulls (`.[1e10] = 1` would allocate 160 GB); jaq
        // does not, which this test pins down.
        for src in ["[] | .[10000000000] = 1", "[] | setpath([10000000000]; 1)"] {
            let msg = failed(src, json!(null));
            assert!(msg.contains("out of bounds"), "{src}: {msg}");
        }
    }

    #[test]
    fn plus_and_times_keep_jaq_semantics() {
        let cases = [
            (r#""a" + "b""#, json!(null), json!("ab")),
            ("[1] + [2]", json!(null), json!([1, 2])),
            ("{a: 1} + {b: 2}", json!(null), json!({"a": 1, "b": 2})),
            ("null + 1", json!(null), json!(1)),
            ("[(1, 2) + (10, 20)]", json!(null), json!([11, 21, 12, 22])),
            ("[(1, 2) * (10, 20)]", json!(null), json!([10, 20, 20, 40])),
            (
                ".a += 1 | .b *= 3",
                json!({"a": 1, "b": 2}),
                json!({"a": 2, "b": 6}),
            ),
            (".[] += 1", json!([1, 2]), json!([2, 3])),
            (r#".s *= 2"#, json!({"s": "ab"}), json!({"s": "abab"})),
            (
                "{a: {b: 1}} * {a: {c: 2}}",
                json!(null),
                json!({"a": {"b": 1, "c": 2}}),
            ),
            (
                "9223372036854775807 + 1",
                json!(null),
                json!(9223372036854775808u64),
            ),
            ("add", json!([1, 2, 3]), json!(6)),
            (r#"join("-")"#, json!(["a", "b"]), json!("a-b")),
            (
                "[combinations]",
                json!([[1, 2], [3]]),
                json!([[1, 3], [2, 3]]),
            ),
            ("3 - 1", json!(null), json!(2)),
        ];
        for (src, input, want) in cases {
            assert_eq!(run(src, input).unwrap(), want, "{src}");
        }
        let err = run(r#"{} + "a""#, json!(null)).unwrap_err();
        assert!(err.to_string().contains("cannot calculate"), "{err}");
        let caught = run(r#"try ({} * "a") catch "caught""#, json!(null));
        assert_eq!(caught.unwrap(), json!("caught"));
    }

    #[test]
    fn huge_integers_become_floats_instead_of_filling_memory() {
        // 3^(2^40) would need terabytes as a big integer.
        let out = run("reduce range(40) as $x (3; . * .)", json!(null)).unwrap();
        assert_eq!(out, json!(f64::MAX));
        let out = run("reduce range(5000) as $x (1; . + .)", json!(null)).unwrap();
        assert_eq!(out, json!(f64::MAX));
        let out = run("reduce range(3) as $x (3; . * .)", json!(null)).unwrap();
        assert_eq!(out, json!(6561));
    }

    #[test]
    fn tojson_and_tostring_of_a_shared_value_stop_at_the_budget() {
        // 2^64 leaves built from 64 nodes.
        for f in [
            "tojson",
            "tostring",
            r#""\(.)""#,
            "@json",
            "@text",
            "@base64",
        ] {
            let src = format!("reduce range(64) as $x (1; [., .]) | {f}");
            let program = JqProgram::compile(&src).unwrap();
            let err = program.run_bounded(json!(null), &with_alloc(1 << 20));
            let msg = err.unwrap_err().to_string();
            assert!(
                msg.contains("built more than 1048576 bytes"),
                "{src}: {msg}"
            );
        }
    }

    #[test]
    fn tojson_refuses_values_nested_deeper_than_the_value_depth() {
        let msg = failed("reduce range(600) as $x (1; [.]) | tojson", json!(null));
        assert!(msg.contains("nested more than 512 levels deep"), "{msg}");
        let src = r#"reduce range(600) as $x (1; [.]) | try tostring catch "deep""#;
        assert_eq!(run(src, json!(null)).unwrap(), json!("deep"));
    }

    #[test]
    fn tojson_tostring_and_interpolation_write_what_jaq_writes() {
        let cases = [
            (
                "tojson",
                json!([1, "a\n", {"b": null}, 1.5, true]),
                json!("[1,\"a\\n\",{\"b\":null},1.5,true]"),
            ),
            ("tostring", json!("x"), json!("x")),
            ("tostring", json!(1), json!("1")),
            ("tostring", json!({"a": [1]}), json!("{\"a\":[1]}")),
            (r#""a\(.)b\("c")""#, json!(1), json!("a1bc")),
            (r#"@json "v=\(.)""#, json!("q\""), json!("v=\"q\\\"\"")),
            ("@text", json!([1]), json!("[1]")),
            ("@base64", json!("hi"), json!("aGk=")),
            (r#"{("k\(1)"): 2}"#, json!(null), json!({"k1": 2})),
            (
                "map(tojson | fromjson)",
                json!([1, "x", [2]]),
                json!([1, "x", [2]]),
            ),
        ];
        for (src, input, want) in cases {
            assert_eq!(run(src, input).unwrap(), want, "{src}");
        }
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
    fn error_messages_are_cut_without_formatting_whole_values() {
        let msg = failed(r#"error("x" * 100000)"#, json!(null));
        assert_eq!(msg.len(), MAX_ERROR_MESSAGE_BYTES + 3);
        assert!(msg.ends_with("..."), "{msg}");
        assert_eq!(failed("error({a: 1})", json!(null)), "{\"a\":1}");
        // jaq quotes the whole value in "cannot index ... with ...": a
        // large one, a deep one, one that shares parts.
        for src in [
            "[range(100000)] | .a",
            "reduce range(100000) as $x (1; [.]) | .a",
            "reduce range(64) as $x (1; [., .]) | .a",
        ] {
            let msg = failed(src, json!(null));
            assert!(msg.starts_with("cannot index ["), "{src}: {msg}");
            assert!(msg.len() <= MAX_ERROR_MESSAGE_BYTES + 3, "{src}");
        }
    }

    #[test]
    fn a_panic_inside_jaq_is_a_run_error_and_the_worker_keeps_serving() {
        let pool: &'static Pool = Box::leak(Box::new(Pool::new(1)));
        let filter = compile_source(natives::PANIC_FOR_TESTS).unwrap();
        let panicking = JqProgram {
            inner: Arc::new(Compiled {
                source: natives::PANIC_FOR_TESTS.into(),
                filter,
            }),
        };
        let err = panicking
            .run_on(pool, json!(null), &short(5000))
            .unwrap_err();
        assert!(err.to_string().contains("panicked"), "{err}");
        assert!(err.to_string().contains("a panic for tests"), "{err}");
        let quick = JqProgram::compile(".").unwrap();
        let out = quick.run_on(pool, json!(1), &short(5000));
        assert_eq!(out.unwrap(), json!(1));
    }

    #[test]
    fn long_and_deeply_nested_programs_compile_without_overflowing() {
        let half = MAX_PROGRAM_BYTES / 2 - 1;
        let programs = [
            format!("{}{}", "[".repeat(half), "]".repeat(half)),
            format!("{}.{}", "(".repeat(half), ")".repeat(half)),
            format!("{}.", ". + ".repeat((MAX_PROGRAM_BYTES - 1) / 4)),
            format!("{}1", "-".repeat(MAX_PROGRAM_BYTES - 1)),
            format!("{}1{}", "{a:".repeat(half / 2), "}".repeat(half / 2)),
            format!("{}1{}", "\"\\(".repeat(half / 3), ")\"".repeat(half / 3)),
        ];
        for src in &programs {
            assert!(src.len() <= MAX_PROGRAM_BYTES);
            if let Err(e) = JqProgram::compile(src) {
                // Some are not valid jq; what matters is the answer.
                assert!(!e.message.is_empty());
            }
        }
        let err = JqProgram::compile(&" ".repeat(MAX_PROGRAM_BYTES + 1)).unwrap_err();
        assert!(err.message.contains("more than 16384"), "{err}");
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
}
