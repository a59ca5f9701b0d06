//! Every crate's modules depend on each other one way only: no module
//! imports one that imports it back. In the operator data flows sources →
//! compile → publish → status; in the gateway a request flows edge →
//! protocol → call pipeline → upstream, over the serving catalog, and
//! types several of them need live in leaves below them (ADR 0027).
//! Re-exports (`pub use`) in `lib.rs` and `mod.rs` files are the crate's
//! surface, not dependencies, and are not counted.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Module path (`upstream::reconcile`) → source file.
fn modules(src: &Path) -> BTreeMap<String, PathBuf> {
    let mut out = BTreeMap::new();
    let mut stack = vec![src.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("reading a crate's src") {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let rel = path.strip_prefix(src).expect("under src");
            let parts: Vec<String> = rel
                .with_extension("")
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            let name = match parts.as_slice() {
                [one] if one == "lib" || one == "main" => continue,
                [.., last] if last == "mod" => parts[..parts.len() - 1].join("::"),
                _ => parts.join("::"),
            };
            out.insert(name, path);
        }
    }
    out
}

/// The modules `module`'s code refers to, through `crate::` or `super::`.
fn references(module: &str, text: &str, known: &BTreeSet<String>) -> BTreeSet<String> {
    let is_mod_file = known.iter().any(|k| k.starts_with(&format!("{module}::")));
    let parent: Vec<&str> = {
        let mut p: Vec<&str> = module.split("::").collect();
        if !is_mod_file {
            p.pop();
        }
        p
    };
    let mut out = BTreeSet::new();
    for line in text.lines() {
        let line = line.trim_start();
        if line.starts_with("//") || (is_mod_file && line.starts_with("pub use ")) {
            continue;
        }
        for (marker, base) in [("crate::", Vec::new()), ("super::", parent.clone())] {
            let mut rest = line;
            while let Some(i) = rest.find(marker) {
                let after = &rest[i + marker.len()..];
                let path: Vec<&str> = after
                    .split(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
                    .next()
                    .unwrap_or("")
                    .split("::")
                    .filter(|s| !s.is_empty())
                    .collect();
                // The longest known module the path names.
                let mut full: Vec<&str> = base.clone();
                let mut best = None;
                for seg in path {
                    full.push(seg);
                    let name = full.join("::");
                    if known.contains(&name) {
                        best = Some(name);
                    }
                }
                if let Some(m) = best.filter(|m| m != module) {
                    out.insert(m);
                }
                rest = after;
            }
        }
    }
    out
}

/// A cycle of `graph`, if it has one.
fn find_cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    // Depth-first search for a back edge, reporting the cycle.
    fn visit(
        m: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(i) = path.iter().position(|p| p == m) {
            let mut cycle = path[i..].to_vec();
            cycle.push(m.to_string());
            return Some(cycle);
        }
        if done.contains(m) {
            return None;
        }
        path.push(m.to_string());
        for next in graph.get(m).into_iter().flatten() {
            if let Some(c) = visit(next, graph, path, done) {
                return Some(c);
            }
        }
        path.pop();
        done.insert(m.to_string());
        None
    }
    let mut done = BTreeSet::new();
    graph
        .keys()
        .find_map(|m| visit(m, graph, &mut Vec::new(), &mut done))
}

/// Which module of `krate` (a directory of the workspace) imports which.
fn graph_of(krate: &str) -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(krate)
        .join("src");
    let files = modules(&src);
    let known: BTreeSet<String> = files.keys().cloned().collect();
    files
        .iter()
        .map(|(m, path)| {
            let text = std::fs::read_to_string(path).expect("reading a module");
            (m.clone(), references(m, &text, &known))
        })
        .collect()
}

#[test]
fn no_module_of_any_crate_imports_one_that_imports_it_back() {
    // The checker must see real references, or it proves nothing.
    for (krate, module, uses) in [
        ("catalog", "compile", "spec"),
        ("operator", "upstream::reconcile", "compile"),
        ("gateway", "call::pipeline", "call::upstream"),
        ("gateway", "serving::access", "serving::snapshot"),
        ("gateway", "observe::metrics", "outcome"),
        ("tests", "apiserver::store", "apiserver::selector"),
    ] {
        let graph = graph_of(krate);
        assert!(
            graph.get(module).is_some_and(|m| m.contains(uses)),
            "{krate}: {module} must be seen to use {uses}: {graph:#?}"
        );
    }
    for krate in [
        "catalog",
        "crds",
        "gateway",
        "host",
        "operator",
        "telemetry",
        "tests",
    ] {
        if let Some(cycle) = find_cycle(&graph_of(krate)) {
            panic!("{krate}: import circle: {}", cycle.join(" → "));
        }
    }
}

#[test]
fn the_checker_finds_a_circle() {
    let graph: BTreeMap<String, BTreeSet<String>> = [
        ("a", vec!["b"]),
        ("b", vec!["c"]),
        ("c", vec!["a"]),
        ("d", vec![]),
    ]
    .into_iter()
    .map(|(m, to)| (m.to_string(), to.into_iter().map(String::from).collect()))
    .collect();
    assert_eq!(
        find_cycle(&graph),
        Some(vec!["a".into(), "b".into(), "c".into(), "a".into()])
    );
}
