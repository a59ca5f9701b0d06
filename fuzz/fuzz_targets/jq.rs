//! jq transforms on hostile data: upstream responses and tool arguments
//! reach catalog transforms, so fixed, known-dangerous programs run on
//! fuzzed values (a non-JSON input becomes one string, which is what
//! `fromjson`, `test`, `@base64d` ... parse).
//!
//! Input: one selector byte, then the data. Selector `0xff`: the rest is
//! `program \0 data`, so program text is fuzzed too (transforms come from
//! catalog authors, but must still fail cleanly). The data may be
//! amplified (`toolgate_fuzz::amplify`): deep nesting and long strings.
#![no_main]

use std::sync::OnceLock;
use std::time::Duration;

use catalog::transform::{JqLimits, JqProgram};
use libfuzzer_sys::fuzz_target;
use toolgate_fuzz::{amplify, json_or_string, split_nul};

/// Programs whose cost or result depends on the data: parsing, printing,
/// recursion over the value, repetition and arithmetic by data-given
/// amounts, regexes and formats taken from the data.
const PROGRAMS: &[&str] = &[
    ".",
    "fromjson",
    "tojson",
    "fromjson | tojson | fromjson",
    ".[]",
    "..",
    "[..] | length",
    "[paths]",
    "tostream",
    "fromstream(tostream)",
    "[leaf_paths]",
    "\"x\" * .n",
    ".s * .n",
    ".a * .b",
    ".a + .b",
    ".a - .b",
    ".a / .b",
    ".a % .b",
    "[range(.n)] | length",
    "[limit(.n; repeat(.))] | length",
    "[.[] | tostring] | join(.sep // \",\")",
    "tostring",
    "tonumber",
    "length",
    "keys",
    "to_entries | from_entries",
    "with_entries(.value |= tostring)",
    "sort",
    "sort_by(.k)",
    "group_by(.k)",
    "unique",
    "min, max",
    "add",
    "flatten",
    "flatten(.d)",
    "reverse",
    "explode | implode",
    "implode",
    "ascii_downcase, ascii_upcase",
    "ltrimstr(.p), rtrimstr(.p)",
    "split(.sep)",
    "join(.sep)",
    "test(.re)",
    ".s | test(.re)",
    "[.s | match(.re; .flags)]",
    "[.s | scan(.re)]",
    ".s | sub(.re; \"x\")",
    ".s | gsub(.re; .t)",
    "[.s | splits(.re)]",
    ".s | capture(.re)",
    "@base64d",
    "@base64",
    "@base32d",
    "@uri",
    "@csv",
    "@tsv",
    "@html",
    "@sh",
    "@json",
    "@text",
    "getpath(.p)",
    "setpath(.p; 1)",
    "delpaths([.p])",
    "paths(type == \"number\")",
    "indices(.x)",
    "index(.x), rindex(.x)",
    "has(.k)",
    "contains(.x)",
    "inside(.x)",
    ".[.i:.j]",
    ".[.i]",
    "first, last",
    "nth(.n)",
    "splits(\", \")",
    "ascii",
    "todate",
    "fromdate",
    "gmtime | mktime",
    "strftime(.f)",
    "strptime(.f)",
    "tojson | fromjson",
    "walk(if type == \"array\" then sort else . end)",
    "reduce .[] as $x (0; . + $x)",
    "[foreach .[] as $x (0; . + 1)]",
    "until(. > 100; . * 2)",
    "[recurse(.[]?)] | length",
    "env.HOME",
    "input",
    "$__loc__",
    "@base64d | fromjson",
    "ltrimstr(\"x\") | fromjson",
    "[splits(\"a\")] | length",
    "infinite, nan | tostring",
    "pow(.a; .b)",
    "log, exp, floor, sqrt",
    "significand, logb, gamma, frexp, ldexp(.; 2)",
    "tojson | .[0:10]",
    "getpath([\"a\", \"b\"]) |= . + 1",
    ".[] |= empty",
    "del(.. | select(. == null))",
    "to_entries",
    "abs",
    "toarray",
    "trim, ltrim, rtrim",
    "splits(.re; .flags)",
    "@uri \"https://x/\\(.)\"",
    "limit(.n; .[])",
    "[combinations] | length",
    "[combinations(.n)] | length",
    "transpose",
    "input_line_number",
    "getpath(.p) = .v",
    "tojson | test(.re)",
];

static COMPILED: OnceLock<Vec<JqProgram>> = OnceLock::new();

fn programs() -> &'static [JqProgram] {
    // Programs that do not exist in jaq (or are refused by toolgate, like
    // `env` and `input`) fail to compile and are skipped: the refusal is
    // what matters for them.
    COMPILED.get_or_init(|| {
        let compiled: Vec<JqProgram> = PROGRAMS
            .iter()
            .filter_map(|p| JqProgram::compile(p).ok())
            .collect();
        eprintln!(
            "jq: {} of {} fixed programs compile",
            compiled.len(),
            PROGRAMS.len()
        );
        compiled
    })
}

/// Short enough that a runaway program costs little of a run, long enough
/// that ordinary ones finish on a busy 2-core machine.
const LIMITS: JqLimits = JqLimits {
    timeout: Duration::from_millis(250),
    max_output_bytes: 1 << 20,
    max_alloc_bytes: 16 << 20,
};

fuzz_target!(|data: &[u8]| {
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    if selector == 0xff {
        let (program, input) = split_nul(rest);
        let Ok(source) = std::str::from_utf8(program) else {
            return;
        };
        let Ok(program) = JqProgram::compile(source) else {
            return;
        };
        let input = input
            .map(|i| json_or_string(&amplify(i)))
            .unwrap_or(serde_json::Value::Null);
        let _ = program.run_bounded(input, &LIMITS);
        return;
    }
    let programs = programs();
    let program = &programs[usize::from(selector) % programs.len()];
    let _ = program.run_bounded(json_or_string(&amplify(rest)), &LIMITS);
});
