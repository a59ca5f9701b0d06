//! Compiles admitted against the operator's memory budget (issue 26, item
//! 8): hostile upstreams applied at once queue for memory instead of
//! compiling together past the operator's limit, and all of them end
//! Ready. Before, compiles were bounded only by `--compile-concurrency`:
//! two 1.1 MB schema-amplifying documents peaked at 521 MB against a 512Mi
//! limit.

use serde_json::json;

use crate::support::*;

const MIB: u64 = 1 << 20;
/// Room for one of the documents below, not two.
const BUDGET_BYTES: u64 = 64 * MIB;

/// An OpenAPI document of about `target` bytes: many operations with
/// long descriptions. Its size, not its content, sets its estimate.
fn large_document(target: usize) -> String {
    let mut paths = serde_json::Map::new();
    let mut i = 0;
    let mut size = 0;
    while size < target {
        let description = format!(
            "Operation {i}. {}",
            "Lorem ipsum dolor sit amet. ".repeat(20)
        );
        let op = json!({"get": {
            "operationId": format!("op{i}"),
            "description": description,
            "parameters": [{"name": "q", "in": "query", "schema": {"type": "string"}}],
            "responses": {"200": {"description": "ok", "content": {"application/json": {
                "schema": {"type": "object", "properties": {"id": {"type": "integer"}}}}}}}
        }});
        size += op.to_string().len() + 16;
        paths.insert(format!("/things{i}"), op);
        i += 1;
    }
    json!({"openapi": "3.0.3", "info": {"title": "Large", "version": "1"}, "paths": paths})
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_large_upstreams_compile_one_at_a_time_within_the_memory_budget() {
    let w = World::new().await;
    // Slots for all four: only memory holds them back.
    let op = w.operator_with("operator", false, |o| {
        o.compile_concurrency = 4;
        o.compile_memory_bytes = Some(BUDGET_BYTES);
    });
    let doc = large_document(120_000);
    let one = operator::compile::estimate_bytes(doc.len()).div_ceil(MIB) * MIB;
    assert!(
        one <= BUDGET_BYTES && 2 * one > BUDGET_BYTES,
        "the fixture must fit the budget once, not twice: {one}"
    );
    let names = ["big-a", "big-b", "big-c", "big-d"];
    for name in names {
        let prefix = name.replace('-', "");
        w.apply_upstream(NS, name, inline(&doc, &prefix)).await;
    }
    for name in names {
        wait_ready(&w, NS, name, "True", "Published").await;
    }
    let m = op.metrics().await;
    let get = |name: &str| m.get(name, &[]) as u64;
    assert_eq!(
        get("toolgate_operator_compile_memory_budget_bytes"),
        BUDGET_BYTES
    );
    assert!(get("toolgate_operator_compiles_total") >= 4);
    // The most reserved at once is one compile's estimate: never two.
    let peak = get("toolgate_operator_compile_memory_peak_bytes");
    assert!(
        peak >= one.saturating_sub(MIB) && peak <= one + MIB,
        "peak {peak} bytes reserved at once, one compile is {one}"
    );
    assert_eq!(get("toolgate_operator_compile_memory_reserved_bytes"), 0);
    op.stop().await;
}

#[test]
fn estimates_grow_with_the_input_and_stop_at_the_ceiling() {
    use operator::compile::{estimate_bytes, BASE_COMPILE_BYTES, MAX_COMPILE_BYTES};
    assert_eq!(estimate_bytes(0), BASE_COMPILE_BYTES);
    assert!(estimate_bytes(100_000) > estimate_bytes(10_000));
    // The 1.1 MB schema-amplifying document: ~240 MB measured.
    assert!(estimate_bytes(1_100_000) >= 240_000_000);
    assert_eq!(estimate_bytes(usize::MAX), MAX_COMPILE_BYTES);
}
