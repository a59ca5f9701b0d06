//! Prints both CRDs as YAML. Run with
//! `cargo run -p crds --bin crdgen > crds/toolgate.dev.yaml`.

fn main() {
    print!("{}", crds::crd_yaml());
}
