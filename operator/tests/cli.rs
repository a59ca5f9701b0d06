//! The operator binary's own commands.

use std::process::Command;

#[test]
fn crds_prints_the_committed_crd_yaml() {
    let out = Command::new(env!("CARGO_BIN_EXE_toolgate-operator"))
        .arg("crds")
        .output()
        .expect("runs");
    assert!(out.status.success());
    let committed = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../crds/toolgate.dev.yaml"
    ))
    .expect("crds/toolgate.dev.yaml");
    assert!(
        String::from_utf8_lossy(&out.stdout) == committed,
        "crds/toolgate.dev.yaml is stale: regenerate it with `{}`",
        crds::CRD_REGENERATE_COMMAND
    );
}
