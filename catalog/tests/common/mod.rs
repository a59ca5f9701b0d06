//! What the behaviour tests share: compiling a document written in the test.

use catalog::{
    compile_upstream, CompileError, CompileOptions, Overlay, UpstreamCatalog, UpstreamSource,
};
use serde_json::Value;

/// `spec` compiled as upstream `t` (document `test.json`).
pub fn compile_json(
    spec: &Value,
    overlays: &[Overlay],
    options: &CompileOptions,
) -> Result<UpstreamCatalog, CompileError> {
    let bytes = serde_json::to_vec(spec).expect("a JSON value serialises");
    compile_upstream(&UpstreamSource {
        prefix: "t",
        document: "test.json",
        spec: &bytes,
        overlays,
        options,
    })
}
