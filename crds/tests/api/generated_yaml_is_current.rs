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
