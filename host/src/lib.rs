//! What both binaries need of the machine they run on and of the
//! network, written once: the TLS provider ([`install_crypto_provider`]),
//! the container's memory limit ([`cgroup_memory_limit`]), the replica's
//! name ([`replica_id`]) and how a document is fetched from a URL
//! ([`documents`]).
//!
//! Beside `telemetry`, the other crate both binaries link: neither holds
//! domain types (those are `catalog`'s and `crds`'), so sharing them does
//! not tie the operator and the gateway together (ADR 0027).

pub mod documents;

use std::sync::Once;

/// Installs rustls' `ring` provider once per process. reqwest and kube
/// are built without a provider of their own, so that only one (ring) is
/// linked and every client of the process shares it.
pub fn install_crypto_provider() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

/// The container's memory limit, if it has one (cgroup v2, else v1).
pub fn cgroup_memory_limit() -> Option<u64> {
    [
        "/sys/fs/cgroup/memory.max",
        "/sys/fs/cgroup/memory/memory.limit_in_bytes",
    ]
    .iter()
    .filter_map(|p| std::fs::read_to_string(p).ok())
    .filter_map(|s| s.trim().parse::<u64>().ok())
    // cgroup v1 says "no limit" with a huge number.
    .find(|&n| n > 0 && n < (1 << 50))
}

/// This replica's name, for leases, published reports and session ids:
/// `given` (`--pod-name`, the downward API's `POD_NAME`), else the host
/// name (a pod's name in Kubernetes), else `{fallback}-{pid}`.
pub fn replica_id(given: Option<String>, fallback: &str) -> String {
    let nonempty = |s: String| {
        let s = s.trim().to_string();
        (!s.is_empty()).then_some(s)
    };
    given
        .and_then(nonempty)
        .or_else(|| std::env::var("HOSTNAME").ok().and_then(nonempty))
        .or_else(|| {
            std::fs::read_to_string("/etc/hostname")
                .ok()
                .and_then(nonempty)
        })
        .unwrap_or_else(|| format!("{fallback}-{}", std::process::id()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_given_replica_id_wins_and_a_blank_one_does_not() {
        assert_eq!(replica_id(Some("gw-0".into()), "gateway"), "gw-0");
        let fallback = replica_id(Some("  ".into()), "gateway");
        assert!(
            !fallback.trim().is_empty() && fallback != "  ",
            "{fallback:?}"
        );
    }
}
