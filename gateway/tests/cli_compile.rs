//! `toolgate compile` and `toolgate lint` as a user runs them.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn toolgate(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_toolgate"))
        .args(args)
        .current_dir(workspace())
        .output()
        .expect("run toolgate")
}

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

const SPEC: &str = "deploy/examples/openapi/petstore.yaml";
const OVERLAY: &str = "deploy/examples/openapi/petstore-overlay.yaml";

#[test]
fn compile_writes_a_catalog_that_check_then_accepts() {
    let dir = tempdir();
    let out = dir.join("catalog.json");
    let out_s = out.to_str().unwrap();
    let r = toolgate(&[
        "compile",
        "--spec",
        SPEC,
        "--prefix",
        "pets",
        "--overlay",
        OVERLAY,
        "-o",
        out_s,
    ]);
    assert!(r.status.success(), "{}", text(&r.stderr));
    let catalog: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    let names: Vec<&str> = catalog["upstreams"][0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        vec![
            "pets__find_pets",
            "pets__create_pet",
            "pets__fetch_pet",
            "pets__get_pet_photo"
        ]
    );
    assert_eq!(catalog["upstreams"][0]["rejected"][0]["reason"], "Disabled");

    let r = toolgate(&[
        "compile",
        "--spec",
        SPEC,
        "--prefix",
        "pets",
        "--overlay",
        OVERLAY,
        "--check",
        out_s,
    ]);
    assert!(
        r.status.success(),
        "fresh catalog reported stale: {}",
        text(&r.stderr)
    );

    // Without the overlay the catalog differs: --check must say stale.
    let r = toolgate(&[
        "compile", "--spec", SPEC, "--prefix", "pets", "--check", out_s,
    ]);
    assert_eq!(r.status.code(), Some(1));
    assert!(text(&r.stderr).contains("stale"), "{}", text(&r.stderr));
}

#[test]
fn explain_prints_a_jq_request_program() {
    let r = toolgate(&[
        "compile",
        "--spec",
        SPEC,
        "--prefix",
        "pets",
        "--explain",
        "pets__fetch_pet",
    ]);
    assert!(r.status.success(), "{}", text(&r.stderr));
    let jq = text(&r.stdout);
    assert!(jq.contains("petId"), "{jq}");
    let r = toolgate(&[
        "compile",
        "--spec",
        SPEC,
        "--prefix",
        "pets",
        "--explain",
        "pets__nope",
    ]);
    assert_eq!(r.status.code(), Some(2));
    assert!(text(&r.stderr).contains("pets__nope"));
}

#[test]
fn explain_names_constants_and_lint_warns_of_optional_bodies() {
    let dir = tempdir();
    let spec = dir.join("api.yaml");
    std::fs::write(
        &spec,
        r#"openapi: 3.0.3
info: {title: Versions, version: "1"}
paths:
  /pets:
    post:
      operationId: addPet
      parameters:
        - {name: X-Api-Version, in: header, required: true, schema: {type: string, enum: ["2024-01-01"]}}
      requestBody:
        required: false
        content:
          application/json:
            schema: {type: object, required: [name], properties: {name: {type: string}}}
      responses: {"201": {description: created}}
"#,
    )
    .unwrap();
    let spec = spec.to_str().unwrap();
    let r = toolgate(&[
        "compile",
        "--spec",
        spec,
        "--prefix",
        "t",
        "--explain",
        "t__add_pet",
    ]);
    assert!(r.status.success(), "{}", text(&r.stderr));
    let jq = text(&r.stdout);
    assert!(
        jq.contains("# header X-Api-Version is always \"2024-01-01\": the only value the document allows, so not an argument."),
        "{jq}"
    );
    assert!(
        jq.contains("\"X-Api-Version\": (\"2024-01-01\" | wire)"),
        "{jq}"
    );

    let r = toolgate(&["lint", "--spec", spec, "--prefix", "t"]);
    assert!(r.status.success(), "{}", text(&r.stderr));
    let out = text(&r.stdout);
    assert!(out.contains("OptionalBodyRequiredProperties"), "{out}");
    assert!(
        out.contains("/paths/~1pets/post/requestBody/required"),
        "{out}"
    );
}

#[test]
fn bad_input_exits_non_zero_naming_the_file_and_pointer() {
    let dir = tempdir();
    let spec = dir.join("bad.yaml");
    std::fs::write(
        &spec,
        "openapi: 3.0.3\ninfo: {title: t, version: '1'}\npaths:\n  /a:\n    get:\n      responses:\n        '200': {$ref: 'other.yaml#/r'}\n",
    )
    .unwrap();
    let r = toolgate(&["compile", "--spec", spec.to_str().unwrap(), "--prefix", "p"]);
    assert_eq!(r.status.code(), Some(2));
    let err = text(&r.stderr);
    assert!(
        err.contains("bad.yaml") && err.contains("/paths/~1a/get/responses/200/$ref"),
        "{err}"
    );

    let overlay = dir.join("bad-overlay.yaml");
    std::fs::write(
        &overlay,
        "overlay: 1.0.0\ninfo: {title: o, version: '1'}\nactions:\n  - target: \"$.paths[\"\n    remove: true\n",
    )
    .unwrap();
    let r = toolgate(&[
        "compile",
        "--spec",
        SPEC,
        "--prefix",
        "p",
        "--overlay",
        overlay.to_str().unwrap(),
    ]);
    assert_eq!(r.status.code(), Some(2));
    let err = text(&r.stderr);
    assert!(
        err.contains("bad-overlay.yaml") && err.contains("/actions/0"),
        "{err}"
    );

    let r = toolgate(&["compile", "--spec", "does/not/exist.yaml", "--prefix", "p"]);
    assert_eq!(r.status.code(), Some(2));
    assert!(text(&r.stderr).contains("does/not/exist.yaml"));
}

#[test]
fn lint_summarises_tools_rejections_and_longest_names() {
    let r = toolgate(&[
        "lint",
        "--spec",
        SPEC,
        "--prefix",
        "pets",
        "--overlay",
        OVERLAY,
    ]);
    assert!(r.status.success(), "{}", text(&r.stderr));
    let out = text(&r.stdout);
    assert!(out.contains("tools:    4"), "{out}");
    assert!(out.contains("rejected: 1"), "{out}");
    assert!(out.contains("DELETE /pets/{petId} [Disabled]"), "{out}");
    assert!(out.contains("19  pets__get_pet_photo"), "{out}");
}

/// The estimate is the library's (`catalog::listing`, which the operator's
/// `status.listing` uses too) for the catalog `compile` writes, under each
/// response validation mode, and the largest tools come first.
#[test]
fn lint_estimates_the_tools_list_size_and_names_the_largest_tools() {
    let dir = tempdir();
    let file = dir.join("catalog.json");
    let source = ["--spec", SPEC, "--prefix", "pets", "--overlay", OVERLAY];
    let r = toolgate(&[&["compile", "-o", file.to_str().unwrap()], &source[..]].concat());
    assert!(r.status.success(), "{}", text(&r.stderr));
    let compiled: catalog::Catalog =
        serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    let tools = &compiled.upstreams[0].tools;
    let r = toolgate(&[&["lint", "--largest", "2"], &source[..]].concat());
    assert!(r.status.success(), "{}", text(&r.stderr));
    let out = text(&r.stdout);

    // "  responseValidation warn, off (...):  1617 bytes  405 tokens"
    let numbers = |prefix: &str| -> (u64, u64) {
        let line = out
            .lines()
            .find(|l| l.trim_start().starts_with(prefix))
            .unwrap_or_else(|| panic!("no {prefix:?} line: {out}"));
        let words: Vec<&str> = line.split_whitespace().collect();
        let at = |unit: &str| -> u64 {
            let i = words.iter().position(|w| *w == unit).unwrap();
            words[i - 1].parse().unwrap()
        };
        (at("bytes"), at("tokens"))
    };
    for (prefix, output) in [
        ("responseValidation warn, off", false),
        ("responseValidation fail", true),
    ] {
        let expected = catalog::listing::size_of(tools, output);
        assert_eq!(numbers(prefix), (expected.bytes, expected.tokens), "{out}");
        assert_eq!(expected.tokens, expected.bytes.div_ceil(4));
    }
    assert!(numbers("responseValidation fail").0 > numbers("responseValidation warn").0);

    // The two largest, largest first: bytes, tokens, what fail adds, name.
    let mut by_size: Vec<_> = tools
        .iter()
        .map(|t| (catalog::listing::tool_bytes(t, false), t))
        .collect();
    by_size.sort_by_key(|(bytes, t)| (std::cmp::Reverse(*bytes), t.name.clone()));
    let rows: Vec<Vec<String>> = out
        .lines()
        .skip_while(|l| !l.starts_with("Largest tools"))
        .skip(2)
        .take_while(|l| !l.is_empty())
        .map(|l| l.split_whitespace().map(str::to_string).collect())
        .collect();
    assert_eq!(rows.len(), 2, "{out}");
    for (row, (bytes, t)) in rows.iter().zip(&by_size) {
        let added = catalog::listing::tool_bytes(t, true) - bytes;
        let expected = [
            bytes.to_string(),
            bytes.div_ceil(4).to_string(),
            added.to_string(),
            t.name.clone(),
        ];
        assert_eq!(row, &expected, "{out}");
    }
}

/// `lint` says where the listing's bytes go, and `--config` settings show
/// the document before the schema cuts: nested descriptions over the
/// budget, nested examples and title copies go; top-level descriptions
/// and everything else stay.
#[test]
fn lint_shows_where_the_bytes_go_before_and_after_the_schema_cuts() {
    let dir = tempdir();
    let long = "x".repeat(3000);
    let spec = serde_json::json!({
        "openapi": "3.1.0", "info": {"title": "t", "version": "1"},
        "paths": {"/things": {"post": {
            "operationId": "makeThing",
            "requestBody": {"required": true, "content": {"application/json": {"schema": {
                "type": "object",
                "properties": {"thing": {
                    "type": "object", "description": "The thing.",
                    "properties": {"size": {"type": "integer", "maximum": 9,
                        "description": long, "examples": [3], "title": "Size"}}
                }}
            }}}}
        }}}
    });
    let spec_file = dir.join("spec.json");
    std::fs::write(&spec_file, spec.to_string()).unwrap();
    let keep = dir.join("keep.yaml");
    std::fs::write(
        &keep,
        "schema: {descriptionBudget: 0, nestedExamples: true, titleCopies: true}\n",
    )
    .unwrap();
    let source = ["--spec", spec_file.to_str().unwrap(), "--prefix", "t"];
    let lint = |extra: &[&str]| {
        let r = toolgate(&[&["lint"], &source[..], extra].concat());
        assert!(r.status.success(), "{}", text(&r.stderr));
        text(&r.stdout)
    };
    // "    descriptions, nested   3017   3017": both modes.
    let row = |out: &str, what: &str| -> u64 {
        let line = out
            .lines()
            .find(|l| l.trim_start().starts_with(what))
            .unwrap_or_else(|| panic!("no {what:?} row: {out}"));
        let words: Vec<&str> = line.split_whitespace().collect();
        words[words.len() - 2].parse().unwrap()
    };
    let before = lint(&["--config", keep.to_str().unwrap()]);
    let after = lint(&[]);
    assert!(before.contains("Where the bytes go"), "{before}");
    let entry = |k: &str, v: &str| (k.len() + 2 + 1 + v.len() + 1) as u64;
    assert_eq!(
        row(&before, "descriptions, nested"),
        entry("description", &format!("\"{long}\""))
    );
    assert_eq!(row(&before, "examples, nested"), entry("examples", "[3]"));
    assert_eq!(
        row(&before, "titles repeating the name"),
        entry("title", "\"Size\"")
    );
    assert_eq!(row(&after, "descriptions, nested"), 0, "{after}");
    assert_eq!(row(&after, "examples, nested"), 0, "{after}");
    assert_eq!(row(&after, "titles repeating the name"), 0, "{after}");
    let top = entry("description", "\"The thing.\"");
    assert_eq!(row(&before, "descriptions, top-level"), top);
    assert_eq!(row(&after, "descriptions, top-level"), top);
    assert_eq!(
        row(&before, "the rest (types, validation)"),
        row(&after, "the rest (types, validation)")
    );
    assert!(row(&after, "total") < row(&before, "total") - 3000);
}

fn tempdir() -> PathBuf {
    let d = std::env::temp_dir().join(format!(
        "toolgate-cli-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    ));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Runs `toolgate` to completion; its output and peak RSS in bytes (from
/// `wait4`, so other tests' children do not count).
// NB: the child is reaped with libc::wait4 (for its rusage), which clippy
// cannot see.
#[allow(clippy::zombie_processes)]
fn toolgate_peak(args: &[&str]) -> (Output, usize) {
    use std::io::Read;
    let mut child = Command::new(env!("CARGO_BIN_EXE_toolgate"))
        .args(args)
        .current_dir(workspace())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run toolgate");
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let mut so = child.stdout.take().unwrap();
    let mut se = child.stderr.take().unwrap();
    let t = std::thread::spawn(move || {
        let _ = so.read_to_end(&mut out);
        out
    });
    let _ = se.read_to_end(&mut err);
    let stdout = t.join().unwrap();
    let mut status = 0;
    // SAFETY: an all-zero rusage is valid; wait4 fills it for our child.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `child` is ours and not yet waited for.
    let pid = unsafe { libc::wait4(child.id() as i32, &mut status, 0, &mut usage) };
    assert_eq!(pid, child.id() as i32, "wait4");
    let output = Output {
        status: std::os::unix::process::ExitStatusExt::from_raw(status),
        stdout,
        stderr: err,
    };
    (output, usage.ru_maxrss as usize * 1024)
}

/// Hostile documents through the real CLI, with its peak memory: 40
/// overlay actions copying a node into itself (2.8 KB; it took 3.5 GB
/// before the overlay growth limit) and one 5,000-property schema under
/// 800 operations (400 KB; 1.4 GB before the catalog's schema limit) both
/// fail naming the limit, within a fixed bound.
#[test]
fn hostile_documents_fail_at_their_limits_within_bounded_memory() {
    let dir = tempdir();
    let spec = dir.join("spec.json");
    std::fs::write(
        &spec,
        r#"{"openapi":"3.0.3","info":{"title":"t","version":"1","x-a":["0123456789abcdef","0123456789abcdef","0123456789abcdef","0123456789abcdef"]},"paths":{}}"#,
    )
    .unwrap();
    let actions: String = (0..40)
        .map(|_| "  - target: \"$.info['x-a']\"\n    copy: \"$.info['x-a']\"\n")
        .collect();
    let overlay = dir.join("overlay.yaml");
    std::fs::write(
        &overlay,
        format!("overlay: 1.1.0\ninfo: {{title: grow, version: '1'}}\nactions:\n{actions}"),
    )
    .unwrap();
    let out = dir.join("c.json");
    let (r, copy_peak) = toolgate_peak(&[
        "compile",
        "--spec",
        spec.to_str().unwrap(),
        "--prefix",
        "t",
        "--overlay",
        overlay.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    assert!(!r.status.success());
    let e = text(&r.stderr);
    assert!(e.contains("over the limit"), "{e}");

    let props: Vec<String> = (0..5000)
        .map(|i| format!(r#""p{i:04}":{{"type":"string","maxLength":64}}"#))
        .collect();
    let big = r##"{"$ref":"#/components/schemas/Big"}"##;
    let paths: Vec<String> = (0..800)
        .map(|i| format!(r#""/r{i}":{{"post":{{"requestBody":{{"content":{{"application/json":{{"schema":{big}}}}}}},"responses":{{"200":{{"description":"ok","content":{{"application/json":{{"schema":{big}}}}}}}}}}}}}"#))
        .collect();
    std::fs::write(
        &spec,
        format!(
            r#"{{"openapi":"3.1.0","info":{{"title":"t","version":"1"}},"paths":{{{}}},"components":{{"schemas":{{"Big":{{"type":"object","properties":{{{}}}}}}}}}}}"#,
            paths.join(","),
            props.join(",")
        ),
    )
    .unwrap();
    let (r, schema_peak) = toolgate_peak(&[
        "compile",
        "--spec",
        spec.to_str().unwrap(),
        "--prefix",
        "t",
        "-o",
        out.to_str().unwrap(),
    ]);
    assert!(!r.status.success());
    let e = text(&r.stderr);
    assert!(e.contains("67108864"), "{e}");
    println!(
        "toolgate compile peak RSS: 40 self-copies {:.1} MiB, big schema x 800 {:.1} MiB",
        copy_peak as f64 / 1048576.0,
        schema_peak as f64 / 1048576.0
    );
    assert!(copy_peak < 128 << 20, "{copy_peak}");
    assert!(schema_peak < 384 << 20, "{schema_peak}");
}

#[test]
fn the_example_local_config_compiles_its_three_upstreams() {
    let r = toolgate(&["compile", "--config", "deploy/examples/local/toolgate.yaml"]);
    assert!(r.status.success(), "{}", text(&r.stderr));
    let catalog: serde_json::Value = serde_json::from_slice(&r.stdout).unwrap();
    let names: Vec<&str> = catalog["upstreams"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|u| u["tools"].as_array().unwrap())
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    for want in [
        "pets__find_pets",
        "places__search_places",
        "weather__get_forecast",
    ] {
        assert!(names.contains(&want), "{names:?}");
    }
    // The overlay hid deletePet; `tools.disabled` dropped getPlace.
    assert!(!names.contains(&"pets__delete_pet"), "{names:?}");
    assert!(!names.contains(&"places__get_place"), "{names:?}");
}

/// The whole corpus from one gateway config: each upstream is what the
/// compiler makes of its document alone, under the same prefix.
#[test]
fn the_whole_corpus_compiles_from_one_config() {
    let dir = tempdir();
    let config = dir.join("corpus.yaml");
    std::fs::write(
        &config,
        toolgate_corpus::gateway_config("http://127.0.0.1:9/api"),
    )
    .unwrap();
    let r = toolgate(&["compile", "--config", config.to_str().unwrap()]);
    assert!(r.status.success(), "{}", text(&r.stderr));
    let served: catalog::Catalog = serde_json::from_slice(&r.stdout).unwrap();
    let documents = toolgate_corpus::documents();
    assert_eq!(served.upstreams.len(), documents.len());
    let options = catalog::CompileOptions::declared(None, None, None);
    let mut alone = Vec::new();
    for doc in &documents {
        let prefix = toolgate_corpus::prefix_of(doc);
        let document = doc.display().to_string();
        let spec = std::fs::read(doc).unwrap();
        alone.push(
            catalog::compile_upstream(&catalog::UpstreamSource {
                prefix,
                document: &document,
                spec: &spec,
                overlays: &[],
                options: &options,
            })
            .unwrap_or_else(|e| panic!("{document}: {e}")),
        );
    }
    let alone = catalog::Catalog::new(alone);
    assert_eq!(served.hash, alone.hash);
    eprintln!(
        "{} documents, {} tools from one config",
        served.upstreams.len(),
        served.tool_count()
    );
}

/// Two operations named `same` and two named `other`: what
/// `conflictResolution: error` refuses.
const CLASH: &str = r#"{"openapi": "3.0.3", "info": {"title": "clash", "version": "1"},
  "paths": {
    "/v1/a": {"get": {"operationId": "same", "tags": ["one"], "responses": {"200": {"description": "ok"}}}},
    "/v2/a": {"get": {"operationId": "same", "tags": ["two"], "responses": {"200": {"description": "ok"}}}},
    "/b": {"get": {"operationId": "other", "responses": {"200": {"description": "ok"}}},
           "post": {"operationId": "other", "responses": {"200": {"description": "ok"}}}}}}"#;

#[test]
fn compile_refuses_name_conflicts_one_a_line_naming_the_settings() {
    let dir = tempdir();
    let spec = dir.join("clash.json");
    std::fs::write(&spec, CLASH).unwrap();
    let r = toolgate(&["compile", "--spec", spec.to_str().unwrap(), "--prefix", "c"]);
    assert!(!r.status.success());
    let err = text(&r.stderr);
    let lines: Vec<&str> = err.lines().collect();
    let first = lines
        .iter()
        .position(|l| l.contains("2 tool name conflicts (naming.conflictResolution: error):"))
        .unwrap_or_else(|| panic!("{err}"));
    assert_eq!(
        lines[first + 1],
        "  \"c__same\": GET /v1/a and GET /v2/a",
        "{err}"
    );
    assert_eq!(
        lines[first + 2],
        "  \"c__other\": GET /b and POST /b",
        "{err}"
    );
    assert!(
        lines[first + 3].contains("naming.conflictResolution: qualify")
            && lines[first + 3].contains("firstWins or skip"),
        "{err}"
    );

    // With qualify every operation is a tool.
    let settings = dir.join("settings.yaml");
    std::fs::write(&settings, "naming: {conflictResolution: qualify}\n").unwrap();
    let r = toolgate(&[
        "compile",
        "--spec",
        spec.to_str().unwrap(),
        "--prefix",
        "c",
        "--config",
        settings.to_str().unwrap(),
    ]);
    assert!(r.status.success(), "{}", text(&r.stderr));
    let catalog: catalog::Catalog = serde_json::from_slice(&r.stdout).unwrap();
    let mut names: Vec<&str> = catalog.upstreams[0]
        .tools
        .iter()
        .map(|t| t.name.as_str())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "c__get_other",
            "c__one_same",
            "c__post_other",
            "c__two_same"
        ]
    );
}

/// `lint` lists the conflicts as findings, succeeds, and reports the rest
/// on what `qualify` makes; for `--spec` and for a gateway config alike.
#[test]
fn lint_lists_name_conflicts_as_findings_and_succeeds() {
    let dir = tempdir();
    let spec = dir.join("clash.json");
    std::fs::write(&spec, CLASH).unwrap();
    let config = dir.join("gateway.yaml");
    std::fs::write(
        &config,
        "upstreams:\n  c:\n    openapi: {file: clash.json}\n    baseUrl: http://127.0.0.1:9\n",
    )
    .unwrap();
    let by_spec = ["lint", "--spec", spec.to_str().unwrap(), "--prefix", "c"];
    let by_config = ["lint", "--config", config.to_str().unwrap()];
    for args in [&by_spec[..], &by_config[..]] {
        let r = toolgate(args);
        let out = text(&r.stdout);
        assert!(r.status.success(), "{args:?}: {}{out}", text(&r.stderr));
        assert!(out.contains("tools:    4"), "{out}");
        assert!(out.contains("conflicts: 2"), "{out}");
        assert!(
            out.contains("\n  \"c__same\": GET /v1/a and GET /v2/a\n"),
            "{out}"
        );
        assert!(
            out.contains("\n  \"c__other\": GET /b and POST /b\n"),
            "{out}"
        );
        assert!(out.contains("[NameQualified]"), "{out}");
        assert!(out.contains("c__one_same"), "{out}");
        let summary = out
            .split("\nFindings summary:\n")
            .nth(1)
            .unwrap_or_else(|| panic!("no summary: {out}"));
        assert!(
            summary.contains("  4        0        4         2  "),
            "{summary}"
        );
        assert!(summary.contains("     2  name conflicts"), "{summary}");
        assert!(summary.contains("     4  NameQualified"), "{summary}");
    }
}

/// The must-show of issue 13: `toolgate lint` over every corpus document
/// (one gateway config, each under its corpus prefix) succeeds and prints
/// the findings summary, which goes to the test's stderr uncaptured so
/// that CI logs show it.
#[test]
fn lint_over_the_whole_corpus_prints_the_findings_summary() {
    use std::io::Write as _;
    let dir = tempdir();
    let config = dir.join("corpus.yaml");
    std::fs::write(
        &config,
        toolgate_corpus::gateway_config("http://127.0.0.1:9/api"),
    )
    .unwrap();
    let r = toolgate(&[
        "lint",
        "--largest",
        "0",
        "--longest",
        "0",
        "--config",
        config.to_str().unwrap(),
    ]);
    let out = text(&r.stdout);
    assert!(r.status.success(), "{}{out}", text(&r.stderr));
    let summary = out
        .split("\nFindings summary:\n")
        .nth(1)
        .unwrap_or_else(|| panic!("no summary: {out}"));
    for doc in toolgate_corpus::documents() {
        let row = format!("  upstream {} (", toolgate_corpus::prefix_of(&doc));
        assert!(summary.contains(&row), "{row:?} missing: {summary}");
    }
    // NB: written to the stream, not with eprint!, which the test harness
    // captures.
    let _ = std::io::stderr().write_all(
        format!("toolgate lint over the corpus: findings summary\n{summary}").as_bytes(),
    );
}

/// `toolgate lint … | head -1`: the reader is gone before anything is
/// written (its end of the pipe closed before the command starts, so
/// every write fails). `lint` panicked on it (exit 101); both commands
/// now stop quietly with success.
#[test]
fn lint_and_compile_stop_quietly_when_the_reader_closes_the_pipe() {
    for args in [
        &["lint", "--spec", SPEC, "--prefix", "pets"][..],
        &["compile", "--spec", SPEC, "--prefix", "pets"][..],
    ] {
        let (reader, writer) = std::io::pipe().expect("a pipe");
        drop(reader);
        let r = Command::new(env!("CARGO_BIN_EXE_toolgate"))
            .args(args)
            .current_dir(workspace())
            .stdout(writer)
            .stderr(std::process::Stdio::piped())
            .output()
            .expect("run toolgate");
        let stderr = text(&r.stderr);
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        assert_eq!(r.status.code(), Some(0), "{args:?}: {stderr}");
    }
}

/// `docs/reference/cli-toolgate.md` is what clap renders for `toolgate`.
#[test]
fn the_cli_reference_page_is_current() {
    const REGENERATE: &str =
        "TOOLGATE_BLESS=1 cargo test -p gateway --test cli_compile the_cli_reference_page_is_current";
    let page = toolgate_tests::reference::cli_page(
        env!("CARGO_BIN_EXE_toolgate"),
        "toolgate",
        &["serve", "compile", "lint", "demo"],
        REGENERATE,
    );
    toolgate_tests::reference::check_or_bless("cli-toolgate.md", &page, REGENERATE);
}

const CONFIG_REGENERATE: &str =
    "TOOLGATE_BLESS=1 cargo test -p gateway --test cli_compile the_config_file_reference";

#[test]
fn the_config_file_reference_and_its_schema_are_current() {
    let schema = gateway::config::json_schema();
    let page = toolgate_tests::reference::schema_page(
        "Gateway config file",
        "Every field of the file given to `toolgate serve --config` (and `toolgate compile \
         --config`), from the gateway's own types. Every field has a default: an empty file \
         means defaults. How to use it: [the guide](../guide/gateway-config.md). The same as \
         a JSON Schema, for editors: [gateway-file.schema.json](gateway-file.schema.json) \
         (e.g. `# yaml-language-server: $schema=<url of that file>` at the top of the file).",
        &schema,
        CONFIG_REGENERATE,
    );
    toolgate_tests::reference::check_or_bless("gateway-file.md", &page, CONFIG_REGENERATE);
    let json = serde_json::to_string_pretty(&schema).unwrap() + "\n";
    toolgate_tests::reference::check_or_bless("gateway-file.schema.json", &json, CONFIG_REGENERATE);
}

/// The published schema says what the gateway reads: files it accepts
/// validate, files it refuses for a field or a value do not.
#[test]
fn the_config_file_schema_agrees_with_the_gateway() {
    let validator = jsonschema::validator_for(&gateway::config::json_schema()).unwrap();
    let example =
        std::fs::read_to_string(workspace().join("deploy/examples/local/toolgate.yaml")).unwrap();
    let cases: [(&str, &str, bool); 8] = [
        ("the local example", &example, true),
        (
            "outbound auth of each kind",
            "upstreams:\n  a: {auth: {type: bearer, token: {file: /t}}}\n  \
             b: {auth: {type: apiKey, in: header, name: X-Key, value: {env: KEY}}}\n  \
             c: {auth: {type: oauth2ClientCredentials, tokenUrl: 'https://t', \
             clientId: {value: id}, clientSecret: {file: /s}, scopes: [r]}}\n",
            true,
        ),
        (
            "inbound and listing",
            "inbound:\n  resource: https://mcp.example.com/mcp\n  \
             jwt: [{issuer: 'https://idp', audiences: [mcp]}]\n  defaultAccess: deny\n\
             listing: {mode: search, pinned: [a__b]}\nmetrics: {toolLabels: off}\n",
            true,
        ),
        (
            "an unknown field",
            "upstreams:\n  a: {baseUrl: 'http://x', timeout: 3}\n",
            false,
        ),
        (
            "an unknown auth type",
            "upstreams:\n  a: {auth: {type: kerberos}}\n",
            false,
        ),
        (
            "a field of another auth type",
            "upstreams:\n  a: {auth: {type: bearer, token: {file: /t}, name: X}}\n",
            false,
        ),
        ("an unknown listing mode", "listing: {mode: some}\n", false),
        ("a wrong type", "inbound: {leewaySeconds: soon}\n", false),
    ];
    for (what, yaml, valid) in cases {
        let value: serde_json::Value = yaml_serde::from_str(yaml).unwrap();
        let gateway = yaml_serde::from_str::<gateway::config::GatewayFile>(yaml).map(|_| ());
        let schema: Vec<String> = validator
            .iter_errors(&value)
            .map(|e| e.to_string())
            .collect();
        assert_eq!(
            gateway.is_ok(),
            valid,
            "{what}: the gateway says {gateway:?}"
        );
        assert_eq!(
            schema.is_empty(),
            valid,
            "{what}: the schema says {schema:?}"
        );
    }
}
