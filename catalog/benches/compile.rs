//! `cargo bench -p catalog`: compile time of large real documents next to
//! the time to merely parse them. Goal: compile ≤ 5× parse.
//!
//! A plain harness (no criterion): each measurement is the median of
//! several runs after a warm-up, printed as a table.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use catalog::{compile_upstream, CompileOptions, UpstreamSource};

fn corpus_dir() -> PathBuf {
    match std::env::var_os("TOOLGATE_SPECS") {
        Some(p) => PathBuf::from(p),
        None => PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../shared/specs")),
    }
}

fn median(mut f: impl FnMut(), runs: usize) -> Duration {
    f();
    let mut times: Vec<Duration> = (0..runs)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed()
        })
        .collect();
    times.sort();
    times[runs / 2]
}

fn main() {
    // `cargo test --benches` passes --bench-less args; run quickly there.
    let quick = !std::env::args().any(|a| a == "--bench");
    let runs = if quick { 1 } else { 9 };
    let options = CompileOptions::default();
    println!(
        "{:<32} {:>10} {:>12} {:>12} {:>8} {:>6}",
        "document", "bytes", "parse", "compile", "ratio", "tools"
    );
    for file in [
        "gitea-v1.26.3-swagger.json",
        "asana-oas.yaml",
        "box-openapi.json",
        "discord-openapi.json",
    ] {
        let bytes = std::fs::read(corpus_dir().join(file)).expect("corpus file");
        let parse = median(
            || {
                std::hint::black_box(catalog::spec::parse_value(file, &bytes).expect("parse"));
            },
            runs,
        );
        let mut tools = 0;
        let compile = median(
            || {
                let u = compile_upstream(&UpstreamSource {
                    prefix: "bench",
                    document: file,
                    spec: &bytes,
                    overlays: &[],
                    options: &options,
                })
                .expect("compile");
                tools = u.tools.len();
            },
            runs,
        );
        println!(
            "{:<32} {:>10} {:>10.1}ms {:>10.1}ms {:>7.2}x {:>6}",
            file,
            bytes.len(),
            parse.as_secs_f64() * 1e3,
            compile.as_secs_f64() * 1e3,
            compile.as_secs_f64() / parse.as_secs_f64(),
            tools
        );
    }
}
