//! The compiler end to end: options + document (+ overlay) → catalog →
//! serialised catalog → parsed back by the gateway → a serving snapshot
//! (input/output validators, jq programs, HTTP clients).
//!
//! Input: one byte of options, then `document [\0 overlay]`, or an
//! amplified document alone (`toolgate_fuzz::amplify`).
#![no_main]

use std::sync::{Mutex, OnceLock};

use catalog::{BodyMode, CompileOptions, ConflictResolution, Overlay, UpstreamSource};
use gateway::serving::snapshot::{Overrides, RuntimeCache, Snapshot};
use libfuzzer_sys::fuzz_target;
use toolgate_fuzz::{amplify, split_nul};

fn options(bits: u8) -> CompileOptions {
    let mut o = CompileOptions::default();
    o.tools.read_only = bits & 1 != 0;
    o.tools.raw_request_tool = bits & 2 != 0;
    o.naming.conflict_resolution = match (bits >> 2) & 3 {
        1 => ConflictResolution::FirstWins,
        2 => ConflictResolution::Skip,
        3 => ConflictResolution::Qualify,
        _ => ConflictResolution::Error,
    };
    o.schema.body_mode = match (bits >> 4) & 3 {
        1 => BodyMode::Merge,
        2 => BodyMode::Nested,
        _ => BodyMode::Auto,
    };
    o.schema.additional_properties = bits & 0x40 != 0;
    o.allow_external_refs = bits & 0x80 != 0;
    o
}

struct Serving {
    overrides: Overrides,
    cache: Mutex<RuntimeCache>,
}

fn serving() -> &'static Serving {
    static S: OnceLock<Serving> = OnceLock::new();
    S.get_or_init(|| {
        gateway::net::install_crypto_provider();
        let mut overrides = Overrides::default();
        overrides
            .base_urls
            .insert("fz".into(), "http://127.0.0.1:9/api".into());
        Serving {
            overrides,
            cache: Mutex::new(RuntimeCache::default()),
        }
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((&bits, rest)) = data.split_first() else {
        return;
    };
    // An amplified document uses NULs itself, so it comes without overlay.
    let (spec, overlay) = match rest.first() {
        Some(&toolgate_fuzz::AMPLIFY) => (amplify(rest), None),
        _ => {
            let (spec, overlay) = split_nul(rest);
            (std::borrow::Cow::Borrowed(spec), overlay)
        }
    };
    let overlays: Vec<Overlay> =
        match overlay.map(|o| Overlay::parse("fuzz-overlay.yaml", o, false)) {
            Some(Ok(o)) => vec![o],
            Some(Err(_)) => return,
            None => Vec::new(),
        };
    let options = options(bits);
    let Ok(upstream) = catalog::compile_upstream(&UpstreamSource {
        prefix: "fz",
        document: "fuzz.yaml",
        spec: &spec,
        overlays: &overlays,
        options: &options,
    }) else {
        return;
    };
    for tool in &upstream.tools {
        // `toolgate explain` prints this program for users to adapt; a name
        // from the document that breaks out of its string literals would be
        // a jq injection.
        let explained = catalog::explain::request_jq(&tool.plan);
        if let Err(e) = catalog::transform::JqProgram::compile(&explained) {
            panic!("explain::request_jq does not compile ({e}):\n{explained}");
        }
    }
    let catalog = catalog::Catalog::new(vec![upstream]);
    let bytes = serde_json::to_vec(&catalog).expect("a catalog serialises");
    let parsed = gateway::serving::reload::parse_catalog(&bytes)
        .expect("the gateway reads a compiled catalog");
    assert_eq!(parsed, catalog, "a catalog changes through JSON");
    let s = serving();
    let mut cache = s.cache.lock().unwrap_or_else(|p| p.into_inner());
    let _ = Snapshot::build(&parsed, &Default::default(), &s.overrides, &mut cache);
});
