//! Cluster-wide prefix ownership. Two upstreams can never share a prefix;
//! this is decided before any tool-level conflict is looked at, and the
//! answer says who keeps the prefix so the caller can fail the others.

use std::collections::BTreeMap;

use crate::CompileError;

/// An upstream that wants a prefix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrefixClaim {
    pub prefix: String,
    pub namespace: String,
    pub name: String,
    /// Creation time as Unix seconds (Kubernetes `creationTimestamp`).
    pub created: i64,
}

impl PrefixClaim {
    /// Oldest first, then namespace/name: the order in which claims win.
    fn rank(&self) -> (i64, &str, &str) {
        (self.created, &self.namespace, &self.name)
    }
}

/// A claim that lost its prefix to an older one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrefixConflict {
    /// Index into the claims passed in.
    pub loser: usize,
    /// Index of the claim that keeps the prefix.
    pub holder: usize,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PrefixResolution {
    /// prefix → index of the claim that holds it.
    pub holders: BTreeMap<String, usize>,
    /// Every other claimant, in input order.
    pub conflicts: Vec<PrefixConflict>,
}

impl PrefixResolution {
    /// The holder of `claims[i]`'s prefix when it is not `i` itself.
    pub fn conflict_for(&self, i: usize) -> Option<usize> {
        self.conflicts
            .iter()
            .find(|c| c.loser == i)
            .map(|c| c.holder)
    }
}

/// Decides, for every prefix, which claim keeps it: the oldest, ties broken
/// by namespace then name. Deterministic whatever the input order.
pub fn resolve_prefixes(claims: &[PrefixClaim]) -> PrefixResolution {
    let mut holders: BTreeMap<String, usize> = BTreeMap::new();
    for (i, c) in claims.iter().enumerate() {
        match holders.get(&c.prefix) {
            Some(&h) if claims[h].rank() <= c.rank() => {}
            _ => {
                holders.insert(c.prefix.clone(), i);
            }
        }
    }
    let conflicts = claims
        .iter()
        .enumerate()
        .filter_map(|(i, c)| {
            let h = holders[&c.prefix];
            (h != i).then_some(PrefixConflict {
                loser: i,
                holder: h,
            })
        })
        .collect();
    PrefixResolution { holders, conflicts }
}

/// The separator between prefix and base name on a gateway shared by
/// several owners (every McpUpstream): fixed, so that owning a prefix is
/// owning every tool name that starts with it (see [`check_shared`]).
pub const SHARED_SEPARATOR: &str = "__";

/// Longest tool prefix on a shared gateway.
pub const MAX_SHARED_PREFIX: usize = 30;

/// Checks a prefix and separator for a gateway shared by several owners.
///
/// NB: prefix ownership alone does not protect tool names when either part
/// is free-form: prefix `a` with separator `b__` produces the names of
/// prefix `ab` with `__`. With the separator fixed to `__` and prefixes
/// that are `[a-z]` then `[a-z0-9]` runs joined by single `_` (so no `__`
/// inside, no `_` at the end), the first `__` of a full name always ends
/// its prefix ([`prefix_of`]): two different prefixes can never produce
/// one name, whatever the base names are.
pub fn check_shared(prefix: &str, separator: &str) -> Result<(), CompileError> {
    if separator != SHARED_SEPARATOR {
        return Err(CompileError::Options {
            field: "naming.separator".into(),
            message: format!(
                "{separator:?} is not allowed: on a shared gateway the separator is {SHARED_SEPARATOR:?}, so that a tool name always says which upstream it belongs to"
            ),
        });
    }
    let grammar = prefix.len() <= MAX_SHARED_PREFIX
        && prefix
            .bytes()
            .next()
            .is_some_and(|b| b.is_ascii_lowercase())
        && prefix
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
        && !prefix.contains("__")
        && !prefix.ends_with('_');
    if !grammar {
        return Err(CompileError::Options {
            field: "toolPrefix".into(),
            message: format!(
                "{prefix:?} must be 1 to {MAX_SHARED_PREFIX} characters: a lowercase letter, then lowercase letters and digits, with single `_` between them (no `__`, no `_` at the end)"
            ),
        });
    }
    Ok(())
}

/// The prefix of a tool name served under [`check_shared`] rules.
pub fn prefix_of(name: &str) -> Option<&str> {
    name.split_once(SHARED_SEPARATOR).map(|(p, _)| p)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn under_shared_rules_a_tool_name_says_which_prefix_it_belongs_to(
            prefix in "[a-z](_?[a-z0-9]){0,12}",
            base in "[A-Za-z0-9_.-]{0,40}",
        ) {
            prop_assert!(check_shared(&prefix, SHARED_SEPARATOR).is_ok());
            let opts = crate::NamingOptions::default();
            let name = crate::naming::full_name(&prefix, &base, &opts);
            prop_assert_eq!(prefix_of(&name), Some(prefix.as_str()));
        }
    }

    #[test]
    fn shared_rules_refuse_the_prefix_and_separator_of_a_name_hijack() {
        // `a` + `b__` + `echo` would be `ab` + `__` + `echo`.
        let e = check_shared("a", "b__").expect_err("separator");
        assert!(e.to_string().contains("naming.separator"), "{e}");
        for bad in ["a__b", "a_", "A", "1a", "", &"a".repeat(31), "a-b"] {
            let e = check_shared(bad, "__").expect_err(bad);
            assert!(e.to_string().contains("toolPrefix"), "{bad}: {e}");
        }
        for good in ["a", "ab", "a_b", "git_hub2", &"a".repeat(30)] {
            assert!(check_shared(good, "__").is_ok(), "{good}");
        }
    }

    fn claim(prefix: &str, ns: &str, name: &str, created: i64) -> PrefixClaim {
        PrefixClaim {
            prefix: prefix.into(),
            namespace: ns.into(),
            name: name.into(),
            created,
        }
    }

    #[test]
    fn oldest_claim_keeps_the_prefix_whatever_the_order() {
        let claims = vec![
            claim("pets", "b", "new", 20),
            claim("pets", "a", "old", 10),
            claim("users", "a", "u", 30),
        ];
        let r = resolve_prefixes(&claims);
        assert_eq!(r.holders["pets"], 1);
        assert_eq!(r.holders["users"], 2);
        assert_eq!(
            r.conflicts,
            vec![PrefixConflict {
                loser: 0,
                holder: 1
            }]
        );
        assert_eq!(r.conflict_for(0), Some(1));
        assert_eq!(r.conflict_for(1), None);
    }

    #[test]
    fn same_creation_time_is_decided_by_namespace_then_name() {
        let claims = vec![
            claim("p", "ns2", "a", 5),
            claim("p", "ns1", "z", 5),
            claim("p", "ns1", "b", 5),
        ];
        let r = resolve_prefixes(&claims);
        assert_eq!(r.holders["p"], 2);
        assert_eq!(r.conflicts.len(), 2);
        assert!(r.conflicts.iter().all(|c| c.holder == 2));
    }
}
