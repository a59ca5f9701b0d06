//! Prints every CRD as YAML. Run as `crds::CRD_REGENERATE_COMMAND` says:
//! `cargo run -q -p crds --bin crdgen > crds/toolgate.dev.yaml && cp
//! crds/toolgate.dev.yaml charts/toolgate/crds/toolgate.dev.yaml`.

fn main() {
    print!("{}", crds::crd_yaml());
}
