//! Hostile documents and overlays fail fast with an error naming the input,
//! on a stack as small as a tokio worker's, instead of overflowing the
//! stack, running for minutes or allocating gigabytes.

use std::time::{Duration, Instant};

use catalog::error::{OverlayErrorKind, SpecErrorKind};
use catalog::{compile_upstream, CompileError, CompileOptions, Overlay, UpstreamSource};

/// Runs `f` on a thread with a tokio worker's default stack (2 MiB); a
/// stack overflow aborts the whole test binary.
fn on_a_2_mib_stack<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::Builder::new()
        .stack_size(2 << 20)
        .spawn(f)
        .unwrap()
        .join()
        .unwrap()
}

fn compile(spec: &[u8], overlays: &[Overlay]) -> Result<catalog::UpstreamCatalog, CompileError> {
    compile_upstream(&UpstreamSource {
        prefix: "t",
        document: "hostile.yaml",
        spec,
        overlays,
        options: &CompileOptions::default(),
    })
}

#[test]
fn a_yaml_document_nested_a_million_flow_levels_is_refused_at_once() {
    // Without the pre-scan libyaml reads every level before yaml_serde's
    // depth limit applies: minutes in a debug build.
    let spec = format!(
        "openapi: 3.1.0\ninfo: {{title: t, version: '1'}}\npaths: {}{}\n",
        "[".repeat(1_000_000),
        "]".repeat(1_000_000)
    );
    let started = Instant::now();
    let err = on_a_2_mib_stack(move || compile(spec.as_bytes(), &[]).unwrap_err());
    let CompileError::Spec(e) = &err else {
        panic!("expected a spec error, got {err}");
    };
    assert_eq!(e.document, "hostile.yaml");
    assert!(
        matches!(&e.kind, SpecErrorKind::Parse(m)
            if m.contains("nested deeper than 128 levels at line 3 column 136")),
        "{err}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "took {:?}",
        started.elapsed()
    );
}

#[test]
fn an_overlay_nested_a_million_flow_levels_is_a_parse_error() {
    let text = format!(
        "overlay: 1.1.0\ninfo: {{title: t, version: '1'}}\nactions:\n  - target: $.info\n    update: {}{}\n",
        "{a: ".repeat(1_000_000),
        "}".repeat(1_000_000)
    );
    let err = on_a_2_mib_stack(move || {
        Overlay::parse("McpOverlay ns/deep", text.as_bytes(), false).unwrap_err()
    });
    assert_eq!(err.overlay, "McpOverlay ns/deep");
    assert!(
        matches!(&err.kind, OverlayErrorKind::Parse(m) if m.contains("nested deeper than 128")),
        "{err}"
    );
}
