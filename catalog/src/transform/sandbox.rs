//! The jq sandbox: the language minus what reads the environment or has
//! side effects, programs rewritten by [`super::harden`] so that the
//! guard of [`super::natives`] bounds them, compile errors with positions,
//! and one run of a compiled filter within its [`JqLimits`] on the
//! current thread (the worker's; see [`super::pool`]).

use std::sync::{Arc, OnceLock};
use std::time::Instant;

use jaq_core::load::parse::Def;
use jaq_core::load::{self, Arena, File, Loader};
use jaq_core::native::Fun;
use jaq_core::{Compiler, Ctx, Exn, Vars};
use jaq_json::Val;
use serde_json::Value;

use super::{
    convert, harden, natives, panic_text, Data, Filter, JqCompileError, JqLimits, JqMemory,
    JqRunError, BIG_STACK_BYTES, MAX_ERROR_MESSAGE_BYTES, MAX_PROGRAM_BYTES,
    MAX_RECURSION_STACK_BYTES,
};

/// Prefix of the names the rewrite adds; programs may not mention it, so
/// they cannot shadow or call those names.
const RESERVED: &str = "__toolgate_";

/// Name of the hidden native guard.
pub(super) const GUARD: &str = "__toolgate_guard";

/// The program itself, as the last definition of the prelude.
const MAIN: &str = "__toolgate_main";

/// Builtins removed from the language (see the parent module's doc).
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

// ---------------------------------------------------------------- compiling

/// Checks the program's length and names, then parses and compiles it on a
/// thread of its own with a large stack (see the parent module's doc).
pub(super) fn compile(source: &str) -> Result<Filter, JqCompileError> {
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
    std::thread::scope(|scope| {
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
    })
}

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

pub(super) fn compile_source(source: &str) -> Result<Filter, JqCompileError> {
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

/// Runs `filter` on `input` on the current thread, within `limits`,
/// returning its first output.
pub(super) fn execute(
    filter: &Filter,
    input: Value,
    limits: &JqLimits,
    deadline: Instant,
    memory: Option<Arc<dyn JqMemory>>,
) -> Result<Value, JqRunError> {
    let input = convert::to_val(input, 0)?;
    natives::begin_run(deadline, limits.max_alloc_bytes, memory);
    let ctx = Ctx::<Data>::new(&filter.lut, Vars::new([]));
    let first = filter.id.run((ctx, input)).next();
    let out = match first {
        None => return Err(JqRunError::Failed("produced no output".into())),
        Some(Ok(v)) => v,
        Some(Err(exn)) => return Err(exn_error(exn, limits)),
    };
    convert::to_json(out, limits.max_output_bytes)
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
            "the filter built more than {built} bytes (arrays, concatenation, fromjson, \
             tojson, tostring, string interpolation and repetition; the run's budget)"
        ),
        Ok(natives::HALT_MEMORY) => return JqRunError::OutOfMemory(natives::charged()),
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

pub(super) fn bounded_display(v: &dyn std::fmt::Display) -> String {
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
#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use super::super::*;
    use serde_json::json;
    use std::time::Instant;

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
}
