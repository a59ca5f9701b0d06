//! jq transforms (jaq): compiled with side-effecting builtins removed, run
//! with bounds on time, recursion depth and output size.
//!
//! # Contract
//!
//! * [`JqProgram::compile`] accepts jq source and returns a program or a
//!   [`JqCompileError`] whose message starts with `line:column` (1-based,
//!   columns in characters) and names the offending token.
//! * The language is jaq's core + std + json library **minus** everything
//!   that reads the environment or has side effects: `env`/`$ENV`, `input`,
//!   `inputs`, `input_filename`, `$__loc__`, `get_search_list`, `halt`,
//!   `halt_error`, `debug`, `stderr`, `localtime`, `strflocaltime` (both read
//!   the host time zone) and module loading (`import`/`include`). Using any of
//!   them is a compile error ("undefined ..."). `now`, `mktime`, `gmtime`,
//!   `strftime` remain: `now` reads the clock, so a transform that uses it is
//!   not deterministic; the others are pure functions of their input.
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
//!   longer than the timeout.
//!
//! # How runaway filters are bounded
//!
//! jaq has no fuel or interrupt API. Filters run on a small process-wide
//! pool of worker threads ([`MAX_WORKERS`]) with large stacks; the caller
//! waits on a channel with a timeout. To stop runaway filters *cooperatively*
//! (so that a timed-out filter does not keep burning a CPU), every `def` body
//! — the user's and the library's, including the loops inside `repeat`,
//! `recurse`, `while`, `until` — starts with a hidden native guard, and `range` is
//! replaced by a version that consults the same guard for every element. The
//! guard aborts the run with an exception that `try` cannot catch when the
//! deadline has passed or when the recursion used more than
//! [`MAX_RECURSION_STACK_BYTES`] of stack (non-tail recursion such as
//! `def f: f + 1; f` would otherwise overflow the stack and abort the
//! process).
//!
//! Limitations (documented, not fixed):
//!
//! * Work that never passes through a guard cannot be interrupted: a single
//!   huge native operation (`"x" * 1e9`, `sort` of a huge array) or a
//!   generator explosion built only from operators (`[combinations]` over a
//!   large input). Such a filter keeps its worker busy after the caller has
//!   received its timeout error. At most [`MAX_WORKERS`] can be stuck at a
//!   time; when all are, new runs fail at once with
//!   "jq worker pool exhausted" instead of queueing.
//! * Memory is not bounded: `[range(1e9)]` allocates until the deadline
//!   stops it.
//! * Values nested very deeply *by the filter itself* (e.g.
//!   `reduce range(1e6) as $x (.; [.])`, which is fast to build) are dropped
//!   recursively by jaq's value type, outside any guard. The worker's
//!   256 MiB stack absorbs a few hundred thousand levels (measured: 200 000
//!   fine, 1 000 000 overflows in a debug build); beyond that the stack
//!   overflows and the process aborts. Fixing this needs an iterative `Drop`
//!   in jaq-json; until then transforms must come from trusted catalog
//!   authors, which they do (overlays and the OpenAPI document).
//! * Values crossing the boundary are limited to [`MAX_VALUE_DEPTH`] levels
//!   of nesting so that the caller's (small) stack can serialise and drop
//!   them.
//!
//! # Value conversion
//!
//! Conversion is faithful: integers stay integers (beyond `i64`/`u64` jaq
//! uses big integers; those that do not fit a JSON integer become floats),
//! floats stay floats, object key order is kept both ways (jaq objects and
//! `serde_json` with `preserve_order` are both insertion ordered). Non-finite
//! floats are written like jq does: NaN as `null`, ±infinity as ±`f64::MAX`.
//! jaq object keys that are not strings are an error.

use std::cell::Cell;
use std::collections::VecDeque;
use std::sync::{mpsc, Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

use jaq_core::box_iter::box_once;
use jaq_core::load::lex::{Tok, Token};
use jaq_core::load::{self, Arena, File, Loader};
use jaq_core::native::{v, Fun};
use jaq_core::{Compiler, Ctx, Exn, Native, Vars};
use jaq_json::{Num, Val};
use serde_json::Value;

type Data = jaq_core::data::JustLut<Val>;
type Filter = jaq_core::Filter<Data>;

/// Name of the hidden native guard. Programs may not mention it, so they
/// cannot shadow it with a definition of their own.
const GUARD: &str = "__toolgate_guard";

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

/// Library definitions that loop, with the same semantics as jaq's
/// `defs.jq` and the guard at the head of each iteration. They replace the
/// originals by name and arity.
const GUARDED_DEFS: &str = r#"
def repeat(f): def rec: __toolgate_guard | f, rec; rec;
def recurse(f): def rec: __toolgate_guard | ., (f | rec); rec;
def while(cond; update): def rec: __toolgate_guard | if cond then ., (update | rec) else empty end; rec;
def until(cond; update): def rec: __toolgate_guard | if cond then . else update | rec end; rec;
"#;

/// Maximum number of jq worker threads (and so of filters that can be stuck
/// past their deadline at the same time).
pub const MAX_WORKERS: usize = 8;

/// Stack of each worker thread. Only touched pages are committed, so this is
/// mostly address space; it is large so that jaq's recursive drop of deeply
/// nested values built inside a filter does not overflow.
const WORKER_STACK_BYTES: usize = 256 << 20;

/// Stack a filter's recursion may use before the guard stops it.
pub const MAX_RECURSION_STACK_BYTES: usize = 32 << 20;

/// Maximum nesting of values passed to and returned from a filter.
pub const MAX_VALUE_DEPTH: usize = 512;

const HALT_TIMEOUT: i32 = 0x7467_0001;
const HALT_RECURSION: i32 = 0x7467_0002;

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

/// A run that failed (jq error, timeout, output too large, no output).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("jq: {0}")]
pub struct JqRunError(pub String);

impl JqRunError {
    /// Whether the run was stopped by its time limit (not a jq error).
    pub fn is_timeout(&self) -> bool {
        self.0.starts_with("timed out")
    }
}

/// Bounds of one run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JqLimits {
    /// Wall-clock time from the call until the result; includes waiting for
    /// a free worker.
    pub timeout: Duration,
    /// Maximum size of the output serialised as compact JSON.
    pub max_output_bytes: usize,
}

impl Default for JqLimits {
    /// The bounds [`JqProgram::run`] uses: 1 s, 16 MiB.
    fn default() -> Self {
        JqLimits {
            timeout: Duration::from_secs(1),
            max_output_bytes: 16 << 20,
        }
    }
}

impl JqProgram {
    /// Parses and compiles `source`.
    pub fn compile(source: &str) -> Result<JqProgram, JqCompileError> {
        if let Some(at) = source.find(GUARD) {
            return Err(JqCompileError {
                message: format!("{}: `{GUARD}` is a reserved name", line_col(source, at)),
            });
        }
        // Compile the program as written first, so that error positions refer
        // to the user's text; then compile the guarded version that runs.
        let plain = compile_source(source)?;
        let guarded = instrument(source);
        let filter = if guarded == source {
            plain
        } else {
            compile_source(&guarded).map_err(|e| JqCompileError {
                message: format!("cannot add run-time guards: {}", e.message),
            })?
        };
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
            max_output_bytes: limits.max_output_bytes,
            deadline,
            reply,
        };
        pool.submit(job)?;
        let wait = deadline.saturating_duration_since(Instant::now());
        match result.recv_timeout(wait) {
            Ok(r) => r,
            Err(mpsc::RecvTimeoutError::Timeout) => Err(timed_out(limits.timeout)),
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                Err(JqRunError("jq worker stopped without a result".into()))
            }
        }
    }
}

fn timed_out(timeout: Duration) -> JqRunError {
    JqRunError(format!("timed out after {timeout:?}"))
}

// ---------------------------------------------------------------- compiling

fn compile_source(source: &str) -> Result<Filter, JqCompileError> {
    // Definitions may only refer to earlier ones, so the guarded loops take
    // the place of the originals.
    let guarded = guarded_defs();
    let defs = jaq_core::defs()
        .chain(jaq_std::defs())
        .chain(jaq_json::defs())
        .filter(|d| !FORBIDDEN.contains(&d.name))
        .map(|d| {
            guarded
                .iter()
                .find(|g| g.name == d.name && g.args.len() == d.args.len())
                .cloned()
                .unwrap_or_else(|| guard_body(d))
        });
    let funs = jaq_core::funs::<Data>()
        .chain(jaq_std::funs::<Data>())
        .chain(jaq_json::funs::<Data>())
        .filter(|(name, args, _)| {
            // `range/3` is replaced by the guarded version from `guard_funs`.
            let replaced = *name == "range" && args.len() == 3;
            !(FORBIDDEN.contains(name) || replaced)
        })
        .chain(guard_funs());

    let loader = Loader::new(defs);
    let arena = Arena::default();
    let modules = loader
        .load(
            &arena,
            File {
                code: source,
                path: (),
            },
        )
        .map_err(|errs| load_error(source, errs))?;
    Compiler::default()
        .with_funs(funs)
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

/// Puts the guard in front of a library definition's body, so that
/// recursion through it (e.g. `flatten($d)` on deeply nested data built by
/// the filter) is bounded like the user's own definitions.
fn guard_body(mut def: load::parse::Def<&'static str>) -> load::parse::Def<&'static str> {
    use load::parse::{BinaryOp, Term};
    let body = std::mem::take(&mut def.body);
    def.body = Term::BinOp(
        Box::new(Term::Call(GUARD, Vec::new())),
        BinaryOp::Pipe(None),
        Box::new(body),
    );
    def
}

fn guarded_defs() -> Vec<load::parse::Def<&'static str>> {
    // A constant, checked by the tests; an empty list would only lose guards.
    load::parse(GUARDED_DEFS, |p| p.defs()).unwrap_or_default()
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

/// Inserts a guard call at the head of every `def` body. Works on tokens:
/// `def NAME [(ARGS)] :` is unambiguous in jq, and the guard is followed by
/// `|`, the operator with the lowest precedence, so the body parses the same
/// and stays in tail position (jaq's tail-call optimisation still applies).
fn instrument(source: &str) -> String {
    let Ok(tokens) = load::Lexer::new(source).lex() else {
        return source.to_string();
    };
    let mut offsets = Vec::new();
    def_bodies(source, &tokens, &mut offsets);
    offsets.sort_unstable();
    let mut out = String::with_capacity(source.len() + offsets.len() * 24);
    let mut last = 0;
    for at in offsets {
        out.push_str(&source[last..at]);
        out.push(' ');
        out.push_str(GUARD);
        out.push_str(" |");
        last = at;
    }
    out.push_str(&source[last..]);
    out
}

fn def_bodies(source: &str, tokens: &[Token<&str>], offsets: &mut Vec<usize>) {
    for (i, token) in tokens.iter().enumerate() {
        match &token.1 {
            Tok::Word if token.0 == "def" => {
                let mut j = i + 1;
                if !matches!(tokens.get(j), Some(Token(_, Tok::Word))) {
                    continue;
                }
                j += 1;
                if let Some(Token(s, Tok::Block(_))) = tokens.get(j) {
                    if s.starts_with('(') {
                        j += 1;
                    }
                }
                if let Some(Token(colon, Tok::Sym)) = tokens.get(j) {
                    if *colon == ":" {
                        let span = load::span(source, colon);
                        offsets.push(span.end);
                    }
                }
            }
            Tok::Block(inner) => def_bodies(source, inner, offsets),
            Tok::Str(parts) => {
                for part in parts {
                    if let load::lex::StrPart::Term(t) = part {
                        def_bodies(source, std::slice::from_ref(t), offsets);
                    }
                }
            }
            _ => {}
        }
    }
}

// ------------------------------------------------------------------- guards

#[derive(Clone, Copy)]
struct GuardState {
    deadline: Instant,
    stack_base: usize,
}

thread_local! {
    static GUARD_STATE: Cell<Option<GuardState>> = const { Cell::new(None) };
}

fn stack_address() -> usize {
    let marker = 0u8;
    std::hint::black_box(std::ptr::addr_of!(marker)) as usize
}

/// `Err(halt code)` when the run must stop.
fn check_guard() -> Result<(), i32> {
    let Some(state) = GUARD_STATE.with(Cell::get) else {
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

fn guard_funs() -> impl Iterator<Item = Fun<Data>> {
    let guard = Native::<Data>::new(|cv| match check_guard() {
        Ok(()) => box_once(Ok(cv.1)),
        Err(code) => box_once(Err(Exn::halt(code))),
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
    [(GUARD, v(0), guard), ("range", v(3), range)].into_iter()
}

/// jaq's `range/3`, consulting the guard before each element.
fn guarded_range<'a>(
    from: Val,
    to: Val,
    by: Val,
) -> impl Iterator<Item = jaq_core::ValX<'a, Val>> + 'a {
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

// ------------------------------------------------------------------ running

struct Job {
    program: Arc<Compiled>,
    input: Value,
    max_output_bytes: usize,
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
                    .stack_size(WORKER_STACK_BYTES)
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
                return Err(JqRunError(format!(
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
                Err(JqRunError("timed out while queued".into()))
            } else {
                let run = std::panic::AssertUnwindSafe(|| {
                    execute(
                        &job.program.filter,
                        job.input,
                        job.deadline,
                        job.max_output_bytes,
                    )
                });
                std::panic::catch_unwind(run).unwrap_or_else(|_| {
                    Err(JqRunError("jq panicked while running the filter".into()))
                })
            };
            GUARD_STATE.with(|g| g.set(None));
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
    deadline: Instant,
    max_output_bytes: usize,
) -> Result<Value, JqRunError> {
    let input = to_val(input, 0)?;
    GUARD_STATE.with(|g| {
        g.set(Some(GuardState {
            deadline,
            stack_base: stack_address(),
        }))
    });
    let ctx = Ctx::<Data>::new(&filter.lut, Vars::new([]));
    let first = filter.id.run((ctx, input)).next();
    let out = match first {
        None => return Err(JqRunError("produced no output".into())),
        Some(Ok(v)) => v,
        Some(Err(exn)) => return Err(exn_error(exn)),
    };
    let mut budget = max_output_bytes;
    let value = from_val(out, 0, &mut budget).map_err(|e| match e {
        Conv::TooLarge => too_large(max_output_bytes),
        Conv::Other(e) => e,
    })?;
    let mut counter = Counter {
        n: 0,
        limit: max_output_bytes,
    };
    if serde_json::to_writer(&mut counter, &value).is_err() {
        return Err(too_large(max_output_bytes));
    }
    Ok(value)
}

fn too_large(max: usize) -> JqRunError {
    JqRunError(format!("output is larger than {max} bytes"))
}

fn exn_error(exn: Exn<'_, Val>) -> JqRunError {
    match exn.get_err() {
        Ok(err) => match err.into_val() {
            Val::TStr(s) | Val::BStr(s) => JqRunError(String::from_utf8_lossy(&s).into_owned()),
            v => JqRunError(v.to_string()),
        },
        Err(exn) => match exn.get_halt() {
            Ok(HALT_TIMEOUT) => JqRunError("timed out".into()),
            Ok(HALT_RECURSION) => JqRunError(format!(
                "recursion too deep (more than {} MiB of stack)",
                MAX_RECURSION_STACK_BYTES >> 20
            )),
            Ok(code) => JqRunError(format!("halted with code {code}")),
            Err(_) => JqRunError("internal control flow escaped the filter".into()),
        },
    }
}

/// Counts serialised bytes, failing once past the limit.
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

// --------------------------------------------------------------- conversion

fn to_val(v: Value, depth: usize) -> Result<Val, JqRunError> {
    if depth > MAX_VALUE_DEPTH {
        return Err(JqRunError(format!(
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

/// Converts back, charging a lower bound of the serialised size to `budget`
/// so that a huge output is refused before it is fully built.
fn from_val(v: Val, depth: usize, budget: &mut usize) -> Result<Value, Conv> {
    if depth > MAX_VALUE_DEPTH {
        return Err(Conv::Other(JqRunError(format!(
            "output is nested more than {MAX_VALUE_DEPTH} levels deep"
        ))));
    }
    let mut charge = |n: usize| -> Result<(), Conv> {
        *budget = budget.checked_sub(n).ok_or(Conv::TooLarge)?;
        Ok(())
    };
    Ok(match v {
        Val::Null => {
            charge(4)?;
            Value::Null
        }
        Val::Bool(b) => {
            charge(4)?;
            Value::Bool(b)
        }
        Val::Num(n) => {
            charge(1)?;
            num_to_json(&n)
        }
        Val::TStr(s) | Val::BStr(s) => {
            charge(s.len() + 2)?;
            Value::String(String::from_utf8_lossy(&s).into_owned())
        }
        Val::Arr(a) => {
            charge(2 + a.len().saturating_sub(1))?;
            let items = jaq_json::Rc::try_unwrap(a).unwrap_or_else(|a| (*a).clone());
            let mut out = Vec::with_capacity(items.len());
            for x in items {
                out.push(from_val(x, depth + 1, budget)?);
            }
            Value::Array(out)
        }
        Val::Obj(o) => {
            charge(2 + o.len().saturating_sub(1))?;
            let map = jaq_json::Rc::try_unwrap(o).unwrap_or_else(|o| (*o).clone());
            let mut out = serde_json::Map::with_capacity(map.len());
            for (k, x) in map {
                let key = match k {
                    Val::TStr(s) | Val::BStr(s) => String::from_utf8_lossy(&s).into_owned(),
                    other => {
                        return Err(Conv::Other(JqRunError(format!(
                            "object key {other} is not a string"
                        ))))
                    }
                };
                *budget = budget.checked_sub(key.len() + 3).ok_or(Conv::TooLarge)?;
                out.insert(key, from_val(x, depth + 1, budget)?);
            }
            Value::Object(out)
        }
    })
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
        assert!(err.0.contains("produced no output"), "{err}");
    }

    #[test]
    fn jq_errors_carry_their_message() {
        let err = run(r#"error("boom")"#, json!(null)).unwrap_err();
        assert_eq!(err.0, "boom");
        let err = run(".a.b", json!({"a": 1})).unwrap_err();
        assert!(err.0.contains("cannot"), "{err}");
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
    fn the_guard_name_is_reserved() {
        let err = JqProgram::compile("def __toolgate_guard: .; 1").unwrap_err();
        assert!(err.message.contains("reserved"), "{err}");
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
        let stopped = err.0.contains("timed out") || err.0.contains("recursion too deep");
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
            assert!(err.0.contains("timed out"), "{err}");
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
        assert!(err.0.contains("timed out"), "{err}");
        std::thread::sleep(Duration::from_millis(5));
        let started = Instant::now();
        let quick = JqProgram::compile(".").unwrap();
        let err = quick.run_on(pool, json!(1), &short(10_000)).unwrap_err();
        assert!(err.0.contains("pool exhausted"), "{err}");
        assert!(started.elapsed() < Duration::from_millis(100));
        // Once the stuck filter finishes, the worker serves again.
        let mut last = Err(JqRunError(String::new()));
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
        assert!(err.0.contains("recursion too deep"), "{err}");
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
        assert!(err.0.contains("recursion too deep"), "{err}");
    }

    #[test]
    fn large_output_is_rejected() {
        let limits = JqLimits {
            timeout: Duration::from_secs(5),
            max_output_bytes: 1000,
        };
        let program = JqProgram::compile("[range(1000)]").unwrap();
        let err = program.run_bounded(json!(null), &limits).unwrap_err();
        assert!(err.0.contains("larger than 1000 bytes"), "{err}");
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
        assert!(run(".", deep).unwrap_err().0.contains("nested"));
        let err = run("reduce range(1000) as $x (1; [.])", json!(null)).unwrap_err();
        assert!(err.0.contains("nested"), "{err}");
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
