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
