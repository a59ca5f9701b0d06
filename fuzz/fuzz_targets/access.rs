//! Access rules: a tenant's CEL `when` compiled (bounds before parsing,
//! the variable and comprehension checks after) and, when it compiles,
//! evaluated for a caller whose claims come from the input too.
//!
//! Input: `when \0 claims-json`. Without a NUL the claims are a small
//! fixed object. The expression may be amplified
//! (`toolgate_fuzz::amplify`), so depth bombs a few bytes long reach the
//! nesting check.
#![no_main]

use catalog::access::{AccessPolicy, AccessRule, PolicySite, Principal, ToolInfo};
use libfuzzer_sys::fuzz_target;
use toolgate_fuzz::{amplify, split_nul};

const CLAIMS: &str = r#"{"sub": "alice", "groups": ["sre", "dev"], "tenant": {"id": 7}}"#;

fuzz_target!(|data: &[u8]| {
    let (when, claims) = split_nul(data);
    let when = amplify(when);
    let Ok(when) = std::str::from_utf8(&when) else {
        return;
    };
    let policy = AccessPolicy {
        rules: vec![AccessRule {
            when: Some(when.to_string()),
            ..Default::default()
        }],
    };
    let Ok(compiled) = policy.compile(&PolicySite::McpUpstream) else {
        return;
    };
    let claims = serde_json::from_slice(claims.unwrap_or(CLAIMS.as_bytes()))
        .ok()
        .and_then(|v: serde_json::Value| v.as_object().cloned())
        .unwrap_or_default();
    let principal = Principal {
        subject: "alice".into(),
        issuer: Some("https://idp.example".into()),
        scopes: ["pets.read".to_string()].into(),
        claims,
        ..Default::default()
    };
    let tool = ToolInfo {
        base_name: "get_pet",
        read_only: true,
    };
    for p in [Some(&principal), None] {
        let _ = compiled.grants(p, &tool);
    }
});
