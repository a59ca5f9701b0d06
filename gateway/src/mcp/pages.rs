//! `tools/list` pages: where a page ends, and the cursor that resumes it.
//!
//! **Budget.** A page ends at `--page-size` tools or when the next tool
//! would take its tools array past `--page-bytes` of JSON, whichever comes
//! first; a tool larger than the budget on its own goes alone on its page.
//! What each tool costs is counted once, when its snapshot is built
//! ([`crate::call::tool::ToolEntry::listed_bytes`]), so a page is sized
//! without serialising anything. Only the JSON-RPC envelope (`jsonrpc`,
//! `id`, `nextCursor`: about a hundred bytes) comes on top. Why: one
//! unbounded page of a large API (Box: 2.7 MB) is a single SSE event over
//! the 1 MiB event limit of the official Python SDK.
//!
//! **Cursor.** Opaque to clients: base64url of a fixed, versioned layout
//! (`PageCursor`), 44 characters. It names the endpoint it was issued
//! for, the [`ListingVersion`] of what that endpoint listed, and the
//! catalog position of the next tool. A cursor whose version is not the
//! current one is refused with `-32602` naming the reason, and the client
//! lists again from the start (it has a `list_changed` for the reload that
//! caused it): a reload between pages never skips or repeats a tool
//! silently. The version is derived from content only, so every replica
//! serving the same catalog and policies accepts every other replica's
//! cursors (stateless requests land on any of them), and a reload that
//! changes nothing keeps cursors valid. Positions index the catalog, not
//! the caller's filtered list, so the same cursor means the same place for
//! any caller; access filtering happens before paging and a cursor
//! carries no tool names. Why: [ADR 0015](../../docs/0015-tools-list-pages.md).

use std::sync::Arc;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use sha2::{Digest, Sha256};

use crate::call::tool::ToolEntry;
use crate::serving::listing_version::ListingVersion;

/// Default tools/list page size: tools on one page.
pub const DEFAULT_PAGE_SIZE: usize = 500;

/// Default tools/list page budget: JSON bytes of the tools on one page.
pub const DEFAULT_PAGE_BYTES: usize = 256 * 1024;

/// Where a page ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageLimits {
    /// Tools per page.
    pub tools: usize,
    /// JSON bytes of a page's `tools` array.
    pub bytes: usize,
}

impl Default for PageLimits {
    fn default() -> Self {
        PageLimits {
            tools: DEFAULT_PAGE_SIZE,
            bytes: DEFAULT_PAGE_BYTES,
        }
    }
}

/// The tools of one page, by reference.
pub struct Page<'a> {
    pub tools: Vec<&'a Arc<ToolEntry>>,
    /// JSON bytes of the page's `tools` array.
    pub bytes: usize,
    /// Catalog position of the first tool of the next page.
    pub next: Option<usize>,
}

/// Takes a page from `candidates` (catalog position, tool), the tools the
/// caller may see at this endpoint from the cursor's position on.
pub fn page<'a>(
    candidates: impl Iterator<Item = (usize, &'a Arc<ToolEntry>)>,
    limits: PageLimits,
) -> Page<'a> {
    // `[` and `]` plus one comma between tools: each tool brings its own
    // separator, and the array's brackets are counted once.
    let mut bytes = 1;
    let mut tools = Vec::new();
    for (position, tool) in candidates {
        let cost = tool.listed_bytes() + 1;
        let full = tools.len() >= limits.tools || bytes + cost > limits.bytes;
        if full && !tools.is_empty() {
            return Page {
                tools,
                bytes,
                next: Some(position),
            };
        }
        bytes += cost;
        tools.push(tool);
    }
    Page {
        bytes: if tools.is_empty() { 2 } else { bytes },
        tools,
        next: None,
    }
}

/// Which endpoint a cursor belongs to: a hash of the endpoint's identity
/// (`/mcp`, `/mcp/{prefix}`, …), so a cursor from one cannot page another.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct EndpointKey([u8; 8]);

impl EndpointKey {
    /// The key of the endpoint serving `scope` (`None`: every tool).
    pub(crate) fn of_scope(scope: Option<&str>) -> EndpointKey {
        match scope {
            None => EndpointKey::named("mcp"),
            Some(prefix) => EndpointKey::named(&format!("mcp/{prefix}")),
        }
    }

    /// The key of an endpoint identified by `name` (its path is a good
    /// name).
    pub(crate) fn named(name: &str) -> EndpointKey {
        let d = Sha256::digest(name.as_bytes());
        let mut k = [0u8; 8];
        k.copy_from_slice(&d[..8]);
        EndpointKey(k)
    }
}

/// Where the next page starts, and of what.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PageCursor {
    pub endpoint: EndpointKey,
    pub version: ListingVersion,
    /// Catalog position of the next page's first tool.
    pub next: u64,
}

/// Layout version of [`PageCursor`]; a cursor of another layout is
/// refused as malformed.
const CURSOR_FORMAT: u8 = 1;
/// format + endpoint + version + position.
const CURSOR_BYTES: usize = 1 + 8 + 16 + 8;
/// The base64url length of [`CURSOR_BYTES`]: anything longer is refused
/// before it is decoded.
const CURSOR_CHARS: usize = (CURSOR_BYTES * 8).div_ceil(6);

/// Why a cursor is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub(crate) enum CursorError {
    /// Not a cursor this gateway issues.
    #[error("invalid pagination cursor")]
    Malformed,
    /// Issued by another endpoint.
    #[error("invalid pagination cursor: it was issued for another endpoint")]
    OtherEndpoint,
    /// Issued for a listing that has changed since.
    #[error(
        "stale pagination cursor: the tool list changed since it was issued; \
         list the tools again from the start (no cursor)"
    )]
    Stale,
}

impl PageCursor {
    pub(crate) fn encode(&self) -> String {
        let mut b = [0u8; CURSOR_BYTES];
        b[0] = CURSOR_FORMAT;
        b[1..9].copy_from_slice(&self.endpoint.0);
        b[9..25].copy_from_slice(&self.version.to_bytes());
        b[25..].copy_from_slice(&self.next.to_be_bytes());
        URL_SAFE_NO_PAD.encode(b)
    }

    /// Decodes a cursor a client sent; never panics, whatever the text.
    pub(crate) fn decode(text: &str) -> Result<PageCursor, CursorError> {
        if text.len() != CURSOR_CHARS {
            return Err(CursorError::Malformed);
        }
        let bytes = URL_SAFE_NO_PAD
            .decode(text)
            .map_err(|_| CursorError::Malformed)?;
        let b: [u8; CURSOR_BYTES] = bytes.try_into().map_err(|_| CursorError::Malformed)?;
        if b[0] != CURSOR_FORMAT {
            return Err(CursorError::Malformed);
        }
        let mut endpoint = [0u8; 8];
        endpoint.copy_from_slice(&b[1..9]);
        let mut version = [0u8; 16];
        version.copy_from_slice(&b[9..25]);
        let mut next = [0u8; 8];
        next.copy_from_slice(&b[25..]);
        Ok(PageCursor {
            endpoint: EndpointKey(endpoint),
            version: ListingVersion::from_bytes(version),
            next: u64::from_be_bytes(next),
        })
    }

    /// The catalog position to resume at, if this cursor belongs to
    /// `endpoint` and its listing is still at `version`.
    pub(crate) fn resume(
        &self,
        endpoint: EndpointKey,
        version: ListingVersion,
    ) -> Result<usize, CursorError> {
        if self.endpoint != endpoint {
            return Err(CursorError::OtherEndpoint);
        }
        if self.version != version {
            return Err(CursorError::Stale);
        }
        // A position past the catalog (only a forged cursor has one) is
        // an empty page.
        Ok(usize::try_from(self.next).unwrap_or(usize::MAX))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::serving::listing_version::VersionHasher;

    fn cursor() -> PageCursor {
        PageCursor {
            endpoint: EndpointKey::of_scope(Some("pets")),
            version: VersionHasher::upstream("pets", None).finish(),
            next: 42,
        }
    }

    #[test]
    fn a_cursor_round_trips_at_a_fixed_length() {
        let c = cursor();
        let text = c.encode();
        assert_eq!(text.len(), CURSOR_CHARS);
        assert_eq!(PageCursor::decode(&text), Ok(c));
        assert_eq!(c.resume(c.endpoint, c.version), Ok(42));
    }

    #[test]
    fn anything_but_an_issued_cursor_is_malformed() {
        let good = cursor().encode();
        let mut other_format = URL_SAFE_NO_PAD.decode(&good).unwrap();
        other_format[0] = 2;
        let long = "A".repeat(10_000);
        for bad in [
            String::new(),
            "0".into(),
            "500".into(),
            format!("{good}A"),
            good[..good.len() - 1].to_string(),
            good.replace(|c: char| c.is_ascii_alphanumeric(), "*"),
            URL_SAFE_NO_PAD.encode(other_format),
            long,
            "é".repeat(CURSOR_CHARS / 2),
        ] {
            assert_eq!(
                PageCursor::decode(&bad),
                Err(CursorError::Malformed),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn a_cursor_resumes_only_its_endpoint_and_version() {
        let c = cursor();
        assert_eq!(
            c.resume(EndpointKey::of_scope(None), c.version),
            Err(CursorError::OtherEndpoint)
        );
        let changed = VersionHasher::upstream("pets", Some(b"{}")).finish();
        assert_eq!(c.resume(c.endpoint, changed), Err(CursorError::Stale));
    }

    #[test]
    fn versions_differ_by_content_and_default_access() {
        use catalog::access::DefaultAccess;
        let v = |fp: &str, bytes: usize, output: bool| {
            let mut h = VersionHasher::upstream("pets", None);
            h.tool(fp, bytes, output);
            h.finish()
        };
        assert_eq!(v("a", 10, true), v("a", 10, true));
        assert_ne!(v("a", 10, true), v("b", 10, true));
        assert_ne!(v("a", 10, true), v("a", 11, true));
        assert_ne!(v("a", 10, true), v("a", 10, false));
        assert_ne!(
            VersionHasher::upstream("pets", None).finish(),
            VersionHasher::upstream("pets", Some(b"")).finish()
        );
        let base = v("a", 10, true);
        assert_ne!(
            base.with_default_access(DefaultAccess::Allow),
            base.with_default_access(DefaultAccess::Deny)
        );
    }
}
