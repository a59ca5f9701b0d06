//! Conditions with stable transition times, and writing status.
//!
//! A condition's `lastTransitionTime` moves only when its status does, and a
//! status is written only when something other than timestamps changed: a
//! restarted operator that reaches the same conclusions writes nothing.

use crds::conditions::Reason;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::api::{Api, Patch, PatchParams};
use kube::Resource;
use serde::Serialize;

/// The field manager of everything the operator writes.
pub const FIELD_MANAGER: &str = "toolgate-operator";

/// Writes a whole status by server-side apply. The operator owns every
/// status field, so the API server removes the ones it no longer sets (no
/// nulls written by hand), and `force` takes back a field someone else
/// edited.
///
/// NB: apply removes only fields *this manager* applied before. A field
/// another manager set with a plain update, and this apply does not set,
/// stays: the status an older operator wrote with merge patches, or a
/// hand edit. Those are cleared once with a merge patch, so the status is
/// exactly what was applied.
#[tracing::instrument(name = "status", skip_all)]
pub async fn apply<K>(api: &Api<K>, name: &str, status: &impl Serialize) -> Result<(), kube::Error>
where
    K: Resource<DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + Serialize,
{
    let status = serde_json::to_value(status).unwrap_or_default();
    let body = serde_json::json!({
        "apiVersion": K::api_version(&()),
        "kind": K::kind(&()),
        "status": status,
    });
    let written = api
        .patch_status(
            name,
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(body),
        )
        .await?;
    let written = serde_json::to_value(&written).unwrap_or_default();
    let leftover: serde_json::Map<String, serde_json::Value> = written["status"]
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(k, _)| status.get(k.as_str()).is_none())
        .map(|(k, _)| (k.clone(), serde_json::Value::Null))
        .collect();
    if !leftover.is_empty() {
        let params = PatchParams {
            field_manager: Some(FIELD_MANAGER.into()),
            ..Default::default()
        };
        api.patch_status(
            name,
            &params,
            &Patch::Merge(serde_json::json!({ "status": leftover })),
        )
        .await?;
    }
    Ok(())
}

/// One condition as a reconcile concludes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cond {
    pub type_: &'static str,
    /// `Some(true)` True, `Some(false)` False, `None` Unknown.
    pub status: Option<bool>,
    pub reason: Reason,
    pub message: String,
}

impl Cond {
    pub fn ok(type_: &'static str, reason: Reason, message: impl Into<String>) -> Self {
        Cond {
            type_,
            status: Some(true),
            reason,
            message: message.into(),
        }
    }
    pub fn fail(type_: &'static str, reason: Reason, message: impl Into<String>) -> Self {
        Cond {
            type_,
            status: Some(false),
            reason,
            message: message.into(),
        }
    }
    pub fn unknown(type_: &'static str, reason: Reason, message: impl Into<String>) -> Self {
        Cond {
            type_,
            status: None,
            reason,
            message: message.into(),
        }
    }
}

/// Kubernetes caps condition messages at 32768 bytes.
const MAX_MESSAGE: usize = 32 * 1024 - 16;

fn status_str(s: Option<bool>) -> &'static str {
    match s {
        Some(true) => "True",
        Some(false) => "False",
        None => "Unknown",
    }
}

/// The new condition list: one entry per `conds`, in their order, keeping
/// the old `lastTransitionTime` where the status did not change.
pub fn merge(old: &[Condition], conds: &[Cond], generation: Option<i64>) -> Vec<Condition> {
    let now = Time(k8s_openapi::jiff::Timestamp::now());
    conds
        .iter()
        .map(|c| {
            let status = status_str(c.status).to_string();
            let prev = old.iter().find(|o| o.type_ == c.type_);
            let last_transition_time = match prev {
                Some(p) if p.status == status => p.last_transition_time.clone(),
                _ => now.clone(),
            };
            Condition {
                type_: c.type_.to_string(),
                status,
                reason: c.reason.as_str().to_string(),
                message: truncate(&c.message, MAX_MESSAGE),
                observed_generation: generation,
                last_transition_time,
            }
        })
        .collect()
}

/// Cuts at a char boundary, saying that it did.
pub fn truncate(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max.saturating_sub(20);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{} … (truncated)", &s[..end])
}

/// The Ready condition of a list, if any.
pub fn ready(conds: &[Condition]) -> Option<&Condition> {
    conds
        .iter()
        .find(|c| c.type_ == crds::conditions::types::READY)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transition_time_moves_only_with_status() {
        let first = merge(&[], &[Cond::ok("Ready", Reason::Published, "a")], Some(1));
        std::thread::sleep(std::time::Duration::from_millis(5));
        let same = merge(
            &first,
            &[Cond::ok("Ready", Reason::Published, "b")],
            Some(2),
        );
        assert_eq!(first[0].last_transition_time, same[0].last_transition_time);
        let flipped = merge(
            &same,
            &[Cond::fail("Ready", Reason::SpecInvalid, "c")],
            Some(3),
        );
        assert_ne!(
            same[0].last_transition_time,
            flipped[0].last_transition_time
        );
    }

    #[test]
    fn long_messages_are_cut_on_a_char_boundary() {
        let s = "é".repeat(40);
        let t = truncate(&s, 31);
        assert!(t.ends_with("(truncated)"));
    }
}
