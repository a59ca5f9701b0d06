//! Document loading: bytes (JSON or YAML, Swagger 2.0 or OpenAPI 3.x) →
//! raw value → loaded 3.x document → its operations and base URL.
//! Anything may fail with an error; nothing may panic, hang or blow up.
//! The input may be amplified (`toolgate_fuzz::amplify`).
#![no_main]

use libfuzzer_sys::fuzz_target;
use toolgate_fuzz::amplify;

fuzz_target!(|data: &[u8]| {
    let data = amplify(data);
    let Ok(raw) = catalog::spec::parse_value("fuzz.yaml", &data) else {
        return;
    };
    // Both settings: external refs are checked (refused) or left alone.
    for allow_external_refs in [false, true] {
        let Ok(doc) = catalog::spec::load("fuzz.yaml", raw.clone(), allow_external_refs) else {
            continue;
        };
        let _ = catalog::spec::operation_count(&doc);
        let _ = catalog::spec::default_base_url(&doc);
        for site in catalog::spec::operations(&doc).into_iter().flatten() {
            std::hint::black_box(&site);
        }
    }
});
