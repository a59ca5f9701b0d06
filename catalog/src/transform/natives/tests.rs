use super::super::testing::*;
use super::super::*;
use serde_json::json;

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
        // One value past the cap, or the appended halves past the run's
        // budget: whichever comes first.
        let msg = failed(src, json!(null));
        assert!(
            msg.contains("larger than 67108864 bytes") || msg.contains("built more than 67108864"),
            "{src}: {msg}"
        );
    }
    // Concatenation in a loop is charged what it appends, not each
    // intermediate value: `join` builds 2000 intermediate strings (10 MB
    // in all) under a 64 KiB budget.
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

/// A host budget of a fixed size that records what it granted.
struct Meter {
    room: std::sync::atomic::AtomicUsize,
    granted: std::sync::atomic::AtomicUsize,
}

impl Meter {
    fn new(room: usize) -> std::sync::Arc<Meter> {
        std::sync::Arc::new(Meter {
            room: room.into(),
            granted: 0.into(),
        })
    }
}

impl JqMemory for Meter {
    fn reserve(&self, bytes: usize) -> bool {
        use std::sync::atomic::Ordering::SeqCst;
        let ok = self
            .room
            .fetch_update(SeqCst, SeqCst, |r| r.checked_sub(bytes))
            .is_ok();
        if ok {
            self.granted.fetch_add(bytes, SeqCst);
        }
        ok
    }
}

#[test]
fn collecting_a_huge_stream_into_an_array_stops_at_the_budget_not_the_deadline() {
    // Behind a condition on the data, so that compile-time dry runs on
    // other data never meet it; before, it grew until the deadline (183 MB
    // in one second) and a few at once took the pod.
    let src = "if .big then [range(1e9)] | length else . end";
    let program = JqProgram::compile(src).unwrap();
    let limits = JqLimits {
        timeout: std::time::Duration::from_secs(60),
        ..with_alloc(8 << 20)
    };
    let err = program
        .run_bounded(json!({"big": true}), &limits)
        .unwrap_err();
    let JqRunError::Failed(msg) = &err else {
        panic!("{err:?}")
    };
    assert!(msg.contains("built more than 8388608 bytes"), "{msg}");
    assert!(msg.contains("arrays"), "{msg}");
    let ok = program.run_bounded(json!({"big": false}), &limits);
    assert_eq!(ok.unwrap(), json!({"big": false}));
    // Other ways of collecting a stream, including over the input and
    // through the library's definitions (`map`, `limit`, `repeat`).
    for (src, input) in [
        ("[limit(1e9; repeat(1))] | length", json!(null)),
        (
            "[.[] as $x | .[] as $y | .[]] | length",
            json!(vec![0; 300]),
        ),
        ("[range(1e9)] | map(. + 1) | length", json!(null)),
        ("[range(1e9) | tostring] | length", json!(null)),
    ] {
        let err = JqProgram::compile(src)
            .unwrap()
            .run_bounded(input, &limits)
            .unwrap_err();
        assert!(err.to_string().contains("built more than"), "{src}: {err}");
    }
    // Ordinary collecting within the budget still works (with the long
    // deadline: a debug build on a loaded CI machine is slow, and time is
    // not what this asserts).
    let out = JqProgram::compile("[range(100000)] | map(. * 2) | add")
        .unwrap()
        .run_bounded(
            json!(null),
            &JqLimits {
                timeout: std::time::Duration::from_secs(60),
                ..JqLimits::DEFAULT
            },
        );
    assert_eq!(out.unwrap(), json!(9_999_900_000u64));
}

#[test]
fn a_run_reserves_what_it_builds_from_the_host_and_stops_when_refused() {
    let limits = JqLimits {
        timeout: std::time::Duration::from_secs(60),
        ..JqLimits::DEFAULT
    };
    // The host has 4 MiB: far less than the run's own 64 MiB cap.
    let meter = Meter::new(4 << 20);
    let program = JqProgram::compile("[range(1e9)] | length").unwrap();
    let err = program
        .run_metered(json!(null), &limits, meter.clone())
        .unwrap_err();
    let JqRunError::OutOfMemory(built) = err else {
        panic!("{err:?}")
    };
    assert!(built > 3 << 20 && built <= 4 << 20, "{built}");
    assert!(err.to_string().contains("memory budget"), "{err}");
    use std::sync::atomic::Ordering::SeqCst;
    assert_eq!(meter.granted.load(SeqCst), 4 << 20);
    // Small runs reserve one chunk, and nothing without building.
    let meter = Meter::new(64 << 20);
    let out = JqProgram::compile("[range(10)] | length")
        .unwrap()
        .run_metered(json!(null), &limits, meter.clone());
    assert_eq!(out.unwrap(), json!(10));
    assert_eq!(meter.granted.load(SeqCst), RESERVE_CHUNK_BYTES);
    let meter = Meter::new(0);
    let out =
        JqProgram::compile(".a")
            .unwrap()
            .run_metered(json!({"a": 1}), &limits, meter.clone());
    assert_eq!(out.unwrap(), json!(1));
}

#[test]
fn the_host_handle_is_released_when_the_run_ends() {
    let meter = Meter::new(64 << 20);
    let program = JqProgram::compile("[range(10)]").unwrap();
    program
        .run_metered(json!(null), &JqLimits::DEFAULT, meter.clone())
        .unwrap();
    // The worker drops its handle after replying; give it a moment.
    for _ in 0..200 {
        if std::sync::Arc::strong_count(&meter) == 1 {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    panic!("the worker still holds the host's memory handle");
}
