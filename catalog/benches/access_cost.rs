//! `cargo bench -p catalog --bench access_cost`: how long the costliest
//! access rules the cost bound admits take to evaluate, on the largest
//! caller inputs it admits (64 KiB of claims), and the process's peak
//! memory after them. The bound's promise (README, Access rules): a `when`
//! that loads never takes more than tens of milliseconds, nor builds more
//! than a few MiB, so a listing never stalls a runtime worker for long.
//!
//! For each shape, the largest size the bound accepts is found by
//! bisection and then timed. A plain harness, like `compile.rs`; `cargo
//! test --benches` runs it once.

use std::time::{Duration, Instant};

use catalog::access::{AccessPolicy, AccessRule, CompiledAccess, PolicySite, Principal, ToolInfo};

fn compile(when: &str) -> Option<CompiledAccess> {
    AccessPolicy {
        rules: vec![AccessRule {
            when: Some(when.to_string()),
            ..Default::default()
        }],
    }
    .compile(&PolicySite::McpUpstream)
    .ok()
}

/// A caller at the input bound: `groups` of `n`-byte strings filling
/// about 64 KiB of claims.
fn principal(elem: usize) -> Principal {
    let count = 64 * 1024 / (elem + 3) - 8;
    let groups: Vec<String> = (0..count)
        .map(|i| format!("{:0>w$}", i % 10, w = elem))
        .collect();
    let claims = serde_json::json!({"groups": groups});
    Principal {
        subject: "alice".into(),
        issuer: Some("https://idp.example".into()),
        claims: claims.as_object().cloned().unwrap_or_default(),
        ..Default::default()
    }
}

/// The largest `n` in `1..=max` for which `shape(n)` loads.
fn largest_accepted(shape: &dyn Fn(usize) -> String, max: usize) -> Option<usize> {
    compile(&shape(1))?;
    let (mut lo, mut hi) = (1, max);
    while lo < hi {
        let mid = (lo + hi).div_ceil(2);
        if compile(&shape(mid)).is_some() && shape(mid).len() <= 4096 {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    Some(lo)
}

fn peak_rss_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}

fn main() {
    let quick = !std::env::args().any(|a| a == "--bench");
    let runs = if quick { 1 } else { 5 };
    let zeros = |n: usize| vec!["0"; n].join(",");
    type Shape = Box<dyn Fn(usize) -> String>;
    let shapes: Vec<(&str, Shape, usize)> = vec![
        (
            "literal list mapped to itself",
            Box::new(move |n| format!("[{z}].map(x, [{z}]).size() > 0", z = zeros(n))),
            2000,
        ),
        (
            "groups, each concatenated n times",
            Box::new(|n| {
                let body = vec!["g"; n].join(" + ");
                format!("claims.groups.map(g, {body}).size() > 0")
            }),
            500,
        ),
        (
            "groups filtered, n tests per element",
            Box::new(|n| {
                let body = vec!["g.contains(\"7\")"; n].join(" || ");
                format!("claims.groups.filter(g, {body}).size() > 0")
            }),
            200,
        ),
        (
            "four comprehensions over groups",
            Box::new(|n| {
                let body = vec!["g.endsWith(\"9\")"; n].join(" || ");
                format!(
                    "claims.groups.exists(g, {body}) || claims.groups.all(g, {body}) || \
                     claims.groups.exists_one(g, {body}) || claims.groups.filter(g, {body}).size() > 1"
                )
            }),
            100,
        ),
    ];
    println!("shape | largest accepted n | caller | evaluation (max of {runs})");
    let mut worst = Duration::ZERO;
    for (name, shape, max) in &shapes {
        let Some(n) = largest_accepted(shape.as_ref(), *max) else {
            println!("{name} | refused at n = 1 | |");
            continue;
        };
        let access = compile(&shape(n)).expect("accepted");
        for elem in [1, 64, 4000] {
            let p = principal(elem);
            let mut slowest = Duration::ZERO;
            for _ in 0..runs {
                let start = Instant::now();
                let _ = access.grants(
                    Some(&p),
                    &ToolInfo {
                        base_name: "get_pet",
                        read_only: true,
                    },
                );
                slowest = slowest.max(start.elapsed());
            }
            worst = worst.max(slowest);
            println!(
                "{name} | {n} | groups of {elem} B | {:.2} ms",
                slowest.as_secs_f64() * 1e3
            );
        }
    }
    println!(
        "slowest admitted evaluation: {:.2} ms; peak RSS {:.1} MiB",
        worst.as_secs_f64() * 1e3,
        peak_rss_mib()
    );
}
