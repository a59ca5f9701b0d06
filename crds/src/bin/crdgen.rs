//! Prints every CRD as YAML. Run as `crds::CRD_REGENERATE_COMMAND` says:
//! `cargo run -q -p crds --bin crdgen > crds/toolgate.dev.yaml && cp
//! crds/toolgate.dev.yaml charts/toolgate/crds/toolgate.dev.yaml`.
//!
//! With `--docs DIR`, writes the user guide's API reference pages there
//! instead (`crds::reference::REFERENCE_REGENERATE_COMMAND`).

use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.as_slice() {
        [] => {
            print!("{}", crds::crd_yaml());
            ExitCode::SUCCESS
        }
        [flag, dir] if flag == "--docs" => {
            for (name, page) in crds::reference::reference_pages() {
                let path = std::path::Path::new(dir).join(&name);
                if let Err(e) = std::fs::write(&path, page) {
                    eprintln!("crdgen: writing {}: {e}", path.display());
                    return ExitCode::FAILURE;
                }
            }
            ExitCode::SUCCESS
        }
        _ => {
            eprintln!("usage: crdgen [--docs DIR]");
            ExitCode::from(2)
        }
    }
}
