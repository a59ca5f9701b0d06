//! `cargo bench -p catalog`: compile time of large real documents next to
//! the time to merely parse them. Goal: compile ≤ 5× parse.
//!
//! A plain harness (no criterion): each measurement is the median of
//! several runs after a warm-up, printed as a table.

use std::time::{Duration, Instant};

use catalog::{compile_upstream, CompileOptions, UpstreamSource};

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
        let bytes = toolgate_corpus::read(file);
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
    hostile(runs);
}

/// Generated documents that once blew up, and how long the compiler now
/// takes to refuse (or finish) them.
fn hostile(runs: usize) {
    println!(
        "\n{:<44} {:>10} {:>12}  outcome",
        "hostile document", "bytes", "time"
    );
    let row = |name: &str, spec: &str| {
        let mut outcome = String::new();
        let time = median(
            || {
                let r = compile_upstream(&UpstreamSource {
                    prefix: "bench",
                    document: name,
                    spec: spec.as_bytes(),
                    overlays: &[],
                    options: &CompileOptions::default(),
                });
                outcome = match r {
                    Ok(u) => format!("{} tools", u.tools.len()),
                    Err(e) => e.reason().as_str().to_string(),
                };
            },
            runs,
        );
        println!(
            "{:<44} {:>10} {:>10.1}ms  {outcome}",
            name,
            spec.len(),
            time.as_secs_f64() * 1e3
        );
    };
    // One 5,000-property schema as body and result of 800 operations.
    let props: Vec<String> = (0..5000)
        .map(|i| format!(r#""p{i:04}":{{"type":"string","maxLength":64}}"#))
        .collect();
    let r = r##"{"$ref":"#/components/schemas/Big"}"##;
    let paths: Vec<String> = (0..800)
        .map(|i| {
            format!(
                r#""/r{i}":{{"post":{{"operationId":"op{i}","requestBody":{{"content":{{"application/json":{{"schema":{r}}}}}}},"responses":{{"200":{{"description":"ok","content":{{"application/json":{{"schema":{r}}}}}}}}}}}}}"#
            )
        })
        .collect();
    row(
        "5,000-property schema x 800 operations",
        &format!(
            r#"{{"openapi":"3.1.0","info":{{"title":"t","version":"1"}},"paths":{{{}}},"components":{{"schemas":{{"Big":{{"type":"object","properties":{{{}}}}}}}}}}}"#,
            paths.join(","),
            props.join(",")
        ),
    );
    // One operation with 50,000 query parameters.
    let params: Vec<String> = (0..50_000)
        .map(|i| {
            format!(
                r#"{{"name":"p{i}","in":"query","required":true,"schema":{{"type":"string"}}}}"#
            )
        })
        .collect();
    row(
        "50,000 parameters in one operation",
        &format!(
            r#"{{"openapi":"3.0.3","info":{{"title":"t","version":"1"}},"paths":{{"/x":{{"get":{{"operationId":"x","parameters":[{}],"responses":{{"200":{{"description":"ok"}}}}}}}}}}}}"#,
            params.join(",")
        ),
    );
}
