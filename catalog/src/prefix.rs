//! Cluster-wide prefix ownership. Two upstreams can never share a prefix;
//! this is decided before any tool-level conflict is looked at, and the
//! answer says who keeps the prefix so the caller can fail the others.

use std::collections::BTreeMap;

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

#[cfg(test)]
mod tests {
    use super::*;

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
