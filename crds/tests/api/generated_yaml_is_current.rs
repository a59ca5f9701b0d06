//! The committed CRD YAML is what the types generate. `kubectl apply -f
//! crds/`, the chart and the in-memory API server all read the file, so a
//! type change without a regenerated file would ship a CRD that disagrees
//! with the operator.

use std::path::Path;

#[test]
fn generated_yaml_is_current() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(crds::CRD_YAML_PATH);
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    let generated = crds::crd_yaml();
    if committed != generated {
        let first_diff = committed
            .lines()
            .zip(generated.lines())
            .position(|(a, b)| a != b)
            .unwrap_or_else(|| committed.lines().count().min(generated.lines().count()));
        panic!(
            "{} is stale (first difference at line {}).\nRegenerate it from the workspace root with:\n\n    \
             {}\n",
            crds::CRD_YAML_PATH,
            first_diff + 1,
            crds::CRD_REGENERATE_COMMAND,
        );
    }
}

/// The user guide's API reference (`docs/reference/`) is what the CRD
/// schemas and the condition vocabulary generate.
#[test]
fn reference_pages_are_current() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/reference");
    let pages = crds::reference::reference_pages();
    assert!(pages.len() >= 4, "one page per kind and the conditions");
    let stale: Vec<String> = pages
        .into_iter()
        .filter(|(name, page)| std::fs::read_to_string(dir.join(name)).ok().as_ref() != Some(page))
        .map(|(name, _)| format!("docs/reference/{name}"))
        .collect();
    assert!(
        stale.is_empty(),
        "stale: {}.\nRegenerate from the workspace root with:\n\n    {}\n",
        stale.join(", "),
        crds::reference::REFERENCE_REGENERATE_COMMAND,
    );
}
