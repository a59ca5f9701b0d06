//! What an endpoint lists, as a version: a content hash that
//! `tools/list` cursors carry ([`crate::mcp::pages`]) and the snapshot computes
//! once per catalog. A leaf, below both.

use sha2::{Digest, Sha256};

/// What an endpoint lists, as a content hash: equal on every replica for
/// the same catalog and access policies, different when any tool or
/// policy that listing shows changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub(crate) struct ListingVersion([u8; 16]);

impl ListingVersion {
    /// The version a cursor carried.
    pub(crate) fn from_bytes(bytes: [u8; 16]) -> ListingVersion {
        ListingVersion(bytes)
    }

    /// What a cursor carries.
    pub(crate) fn to_bytes(self) -> [u8; 16] {
        self.0
    }

    /// The version of what a hasher fed by [`VersionHasher`] saw.
    fn from_digest(h: Sha256) -> ListingVersion {
        let d = h.finalize();
        let mut v = [0u8; 16];
        v.copy_from_slice(&d[..16]);
        ListingVersion(v)
    }

    /// This version with `what` else the listing depends on mixed in (a
    /// toolset's definition: its filter decides what it lists without
    /// changing any tool).
    pub(crate) fn mixed_with(self, what: &[u8]) -> ListingVersion {
        let mut h = Sha256::new();
        h.update(b"toolgate listing part\0");
        h.update(self.0);
        h.update(what);
        ListingVersion::from_digest(h)
    }

    /// This version as one caller class sees it: upstreams without an
    /// access policy are listed or not by the gateway's default access,
    /// a setting of the process rather than of the catalog.
    pub(crate) fn with_default_access(
        self,
        default: catalog::access::DefaultAccess,
    ) -> ListingVersion {
        let mut h = Sha256::new();
        h.update(b"toolgate default access\0");
        h.update(self.0);
        h.update([match default {
            catalog::access::DefaultAccess::Allow => 0,
            catalog::access::DefaultAccess::Deny => 1,
        }]);
        ListingVersion::from_digest(h)
    }
}

/// Builds a [`ListingVersion`] from the pieces of a listing, in order.
pub(crate) struct VersionHasher(Sha256);

impl VersionHasher {
    /// A hasher for one upstream's listing.
    pub(crate) fn upstream(prefix: &str, access_policy: Option<&[u8]>) -> VersionHasher {
        let mut h = Sha256::new();
        h.update(b"toolgate upstream listing v1\0");
        field(&mut h, prefix.as_bytes());
        match access_policy {
            None => h.update([0]),
            Some(p) => {
                h.update([1]);
                field(&mut h, p);
            }
        }
        VersionHasher(h)
    }

    /// A hasher for a listing made of upstreams' listings.
    pub(crate) fn combined() -> VersionHasher {
        let mut h = Sha256::new();
        h.update(b"toolgate combined listing v1\0");
        VersionHasher(h)
    }

    /// Adds one listed tool: its catalog fingerprint covers its name,
    /// description and schemas; `listed_bytes` and `advertises_output`
    /// cover what the gateway itself adds or leaves out of the listing.
    pub(crate) fn tool(&mut self, fingerprint: &str, listed_bytes: usize, advertises_output: bool) {
        field(&mut self.0, fingerprint.as_bytes());
        self.0.update((listed_bytes as u64).to_be_bytes());
        self.0.update([u8::from(advertises_output)]);
    }

    /// Adds one part of a combined listing.
    pub(crate) fn part(&mut self, prefix: &str, version: ListingVersion) {
        field(&mut self.0, prefix.as_bytes());
        self.0.update(version.0);
    }

    pub(crate) fn finish(self) -> ListingVersion {
        ListingVersion::from_digest(self.0)
    }
}

/// Length-prefixed, so adjacent fields cannot run into each other.
fn field(h: &mut Sha256, bytes: &[u8]) {
    h.update((bytes.len() as u64).to_be_bytes());
    h.update(bytes);
}
