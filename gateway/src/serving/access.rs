//! Which tools one caller may see and call, decided without stalling the
//! async workers.
//!
//! Every policy is bounded when it is loaded: all its `when`s together
//! cost at most [`catalog::access::MAX_WHEN_COST`] on the largest claims
//! the gateway admits. But a listing of `/mcp` decides every upstream's
//! policy, so its cost grows with the number of upstreams, and no tenant
//! may refuse another's policy for it. So a decision is priced first, for
//! the caller at hand ([`CompiledAccess::cost_for`]: real claims are tiny
//! next to the worst case), and
//! - runs inline, policy by policy as tools are matched, when the policies
//!   it may need cost at most [`INLINE_COST`] together (a millisecond at
//!   worst) — every upstream without a `when`, and most with one;
//! - otherwise takes what the snapshot remembers of this caller
//!   ([`crate::serving::snapshot::AccessMemo`]) and evaluates the rest on the blocking pool, at most
//!   [`BLOCKING_DECISIONS`] at a time, and remembers it.
//!
//! A decision that could not be made cheaply where no await is possible
//! (rmcp's `get_tool`) grants nothing; the call itself decides again.

use std::collections::HashMap;
use std::sync::Arc;

use catalog::access::{CallerInputs, CompiledAccess, DefaultAccess, Grants, Held, Principal};
use sha2::{Digest, Sha256};
use tokio::sync::Semaphore;

use crate::call::tool::ToolEntry;
use crate::serving::snapshot::Snapshot;

/// Most a decision may cost on an async worker, in the units of
/// [`catalog::access::MAX_WHEN_COST`] (~10 ns each): about a millisecond.
pub(crate) const INLINE_COST: u64 = 100_000;

/// Decisions evaluated on the blocking pool at once; others wait for a
/// turn without holding a worker.
pub(crate) const BLOCKING_DECISIONS: usize = 2;

static DECIDING: Semaphore = Semaphore::const_new(BLOCKING_DECISIONS);

/// The digest the memo keys a caller by: its whole principal, since rules
/// read claims and scopes as well as the identity.
fn digest(principal: Option<&Principal>) -> [u8; 32] {
    /// Feeds what is written to it to the hash.
    struct Hashing(Sha256);
    impl std::io::Write for Hashing {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.update(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut h = Hashing(Sha256::new());
    // NB: a principal is strings, sets and JSON, which always serialise;
    // `None` and `Some` differ by their first byte.
    let _ = serde_json::to_writer(&mut h, &principal);
    h.0.finalize().into()
}

/// Decides for `principal` (`None`: anonymous, in open mode) on
/// `snapshot`: ready to match every tool of `scope` (`None`: all) without
/// evaluating anything costly. See the module docs.
pub(crate) async fn resolve<'a>(
    snapshot: &'a Arc<Snapshot>,
    principal: Option<&'a Principal>,
    default: DefaultAccess,
    scope: Option<&str>,
) -> CallerAccess<'a> {
    let mut access = CallerAccess::new(snapshot, principal, default);
    // NB: the `tools/call` path: one upstream, most often without a
    // `when` (or without a policy); nothing to price then.
    if let Some(prefix) = scope {
        if snapshot.policy(prefix).is_none_or(|p| !p.has_conditions()) {
            return access;
        }
    }
    let total = snapshot
        .policies(scope)
        .map(|(_, p)| p.cost_for(&access.inputs))
        .fold(0u64, u64::saturating_add);
    if total <= INLINE_COST {
        return access;
    }
    let caller = digest(principal);
    let mut todo = Vec::new();
    for (prefix, policy) in snapshot.policies(scope) {
        if !policy.has_conditions() {
            continue;
        }
        match snapshot.access_memo().get(&caller, prefix) {
            Some(held) => {
                access.held.insert(prefix, held);
            }
            None => todo.push(prefix.to_string()),
        }
    }
    if todo.is_empty() {
        return access;
    }
    let decided = match DECIDING.acquire().await {
        Ok(_turn) => {
            let (snapshot, principal) = (Arc::clone(snapshot), principal.cloned());
            tracing::debug!(
                upstreams = todo.len(),
                "deciding access off the async workers"
            );
            tokio::task::spawn_blocking(move || {
                let mut inputs = CallerInputs::new(principal.as_ref());
                todo.into_iter()
                    .filter_map(|prefix| {
                        let held = snapshot.policy(&prefix)?.held_by(&mut inputs);
                        Some((prefix, held))
                    })
                    .collect::<Vec<_>>()
            })
            .await
        }
        // NB: the semaphore is static and never closed.
        Err(_) => return access,
    };
    // A decision that panicked stays undecided: nothing is granted.
    let Ok(decided) = decided else {
        tracing::warn!("deciding access failed; the caller is granted nothing of those upstreams");
        return access;
    };
    snapshot.access_memo().put(caller, &decided);
    for (prefix, held) in decided {
        if let Some((prefix, _)) = snapshot.policies(Some(&prefix)).next() {
            access.held.insert(prefix, held);
        }
    }
    access
}

/// One caller's view of a snapshot: each upstream's rules are decided for
/// the caller once, on its first tool (or up front by [`resolve`]), then
/// matched per tool.
pub(crate) struct CallerAccess<'a> {
    snapshot: &'a Snapshot,
    inputs: CallerInputs<'a>,
    default: DefaultAccess,
    /// Decided policies, by prefix.
    held: HashMap<&'a str, Held>,
}

impl<'a> CallerAccess<'a> {
    /// A view that decides inline, as tools are matched, whatever is cheap
    /// ([`INLINE_COST`]), and grants nothing of an upstream whose decision
    /// is costly and not remembered: where no await is possible. Prefer
    /// [`resolve`].
    pub(crate) fn new(
        snapshot: &'a Snapshot,
        principal: Option<&'a Principal>,
        default: DefaultAccess,
    ) -> CallerAccess<'a> {
        CallerAccess {
            snapshot,
            inputs: CallerInputs::new(principal),
            default,
            held: HashMap::new(),
        }
    }

    /// The grants of upstream `prefix`; `None` for one without a policy.
    fn grants(&mut self, prefix: &str) -> Option<Grants<'a>> {
        let (prefix, policy): (&'a str, &'a CompiledAccess) =
            self.snapshot.policies(Some(prefix)).next()?;
        let held = match self.held.get(prefix) {
            Some(&held) => held,
            None => {
                let held = self.decide(prefix, policy);
                self.held.insert(prefix, held);
                held
            }
        };
        Some(policy.grants_of(held))
    }

    fn decide(&mut self, prefix: &str, policy: &CompiledAccess) -> Held {
        if policy.cost_for(&self.inputs) <= INLINE_COST {
            return policy.held_by(&mut self.inputs);
        }
        let caller = digest(self.inputs.principal());
        self.snapshot
            .access_memo()
            .get(&caller, prefix)
            .unwrap_or_else(|| {
                tracing::debug!(
                    upstream = prefix,
                    "access decision too costly to make here: nothing granted"
                );
                Held::default()
            })
    }

    /// Whether the caller is granted anything of upstream `prefix` at
    /// all: for an upstream without tools, the only sign it is not hidden.
    pub(crate) fn grants_any_of(&mut self, prefix: &str) -> bool {
        if !self.snapshot.has_prefix(prefix) {
            return false;
        }
        match self.grants(prefix) {
            None => self.default == DefaultAccess::Allow,
            Some(g) => !g.is_empty(),
        }
    }

    /// Whether the caller may see and call `tool`.
    pub(crate) fn allows(&mut self, tool: &ToolEntry) -> bool {
        match self.grants(&tool.prefix) {
            None => self.default == DefaultAccess::Allow,
            Some(g) => g.allows(&tool.access_info()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::serving::snapshot::{Overrides, RuntimeCache};
    use serde_json::json;

    /// `pets` with one tool, whose policy is cheap for small claims and
    /// costs ~330K steps for 5 KiB of them.
    fn snapshot() -> Arc<Snapshot> {
        let catalog = serde_json::from_value(json!({
            "format": "toolgate.dev/catalog/v1", "hash": "", "upstreams": [{
            "prefix": "pets", "hash": "", "defaultBaseUrl": "http://127.0.0.1:9",
            "source": {"openapiVersion": "3.0.3", "operationCount": 1},
            "tools": [{"name": "pets__get", "inputSchema": {"type": "object"},
                "annotations": {},
                "operation": {"method": "GET", "path": "/pets", "pointer": "/paths/~1pets/get"},
                "plan": {"method": "GET", "path": "/pets", "params": []},
                "responseFormat": "auto"}]}]}))
        .expect("fixture");
        let config = crate::config::parse(
            "upstreams:\n  pets:\n    access:\n      rules:\n      - when: 'claims.groups.exists(g, g.startsWith(\"team-\"))'\n",
        )
        .expect("config");
        let snapshot = Snapshot::build(
            &catalog,
            &config,
            &Overrides::default(),
            &mut RuntimeCache::default(),
        )
        .expect("builds");
        Arc::new(snapshot)
    }

    fn member(padding: usize) -> Principal {
        let mut groups: Vec<String> = (0..padding).map(|i| format!("{i:0>44}-dev")).collect();
        groups.push("team-sre".into());
        Principal {
            subject: "alice".into(),
            issuer: Some("https://idp.example".into()),
            claims: json!({"groups": groups})
                .as_object()
                .cloned()
                .unwrap_or_default(),
            ..Default::default()
        }
    }

    #[tokio::test]
    async fn a_costly_decision_is_made_once_off_the_workers_and_remembered() {
        let snapshot = snapshot();
        let tool = snapshot.tool("pets__get").expect("tool").clone();
        let (small, large) = (member(0), member(100));
        let allow = DefaultAccess::Allow;

        // Cheap: decided inline wherever it is asked.
        assert!(CallerAccess::new(&snapshot, Some(&small), allow).allows(&tool));
        // Costly, where no await is possible and nothing is remembered:
        // nothing granted (the call decides again).
        assert!(!CallerAccess::new(&snapshot, Some(&large), allow).allows(&tool));
        let mut resolved = resolve(&snapshot, Some(&large), allow, None).await;
        assert!(resolved.allows(&tool));
        // Remembered on the snapshot for the same caller, and only for it.
        assert!(CallerAccess::new(&snapshot, Some(&large), allow).allows(&tool));
        let mut other = member(100);
        other.subject = "bob".into();
        assert!(!CallerAccess::new(&snapshot, Some(&other), allow).allows(&tool));
        // Not across snapshots: a reload may have changed the policy.
        let next = self::snapshot();
        assert!(!CallerAccess::new(&next, Some(&large), allow).allows(&tool));
    }
}
