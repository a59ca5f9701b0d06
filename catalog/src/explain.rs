//! `toolgate compile --explain TOOL`: the jq request expression equivalent to a
//! tool's request plan, a starting point for `x-mcp-request-transform`.
//!
//! CONTRACT (owned by the transform work):

use crate::model::RequestPlan;

/// A jq program that, given the tool arguments, builds
/// `{method, path, query, headers, cookies, body}`.
pub fn request_jq(plan: &RequestPlan) -> String {
    let _ = plan;
    String::from(".")
}
