//! Which tools an endpoint serves: `/mcp`, one upstream's, a toolset's, listed whole or in search mode.

use std::sync::Arc;

use catalog::listing::ListMode;
use catalog::toolset::ToolsetName;

use crate::call::tool::ToolEntry;
use crate::mcp::pages::EndpointKey;
use crate::serving::reload::ToolDiff;

/// Which tools an endpoint serves.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Scope {
    /// Every tool: `/mcp`.
    All,
    /// One upstream's tools: `/mcp/{prefix}`.
    Prefix(Arc<str>),
    /// The tools a toolset selects: `/mcp/toolsets/{namespace}/{name}`.
    Toolset(Arc<ToolsetName>),
}

/// What one MCP endpoint serves and how it lists it. Each view has its
/// own session manager, and session ids are signed for their view, so a
/// session cannot be carried to another endpoint to widen what it sees.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct View {
    pub scope: Scope,
    pub mode: ListMode,
}

impl View {
    /// Every tool, listed whole: `/mcp`.
    pub(crate) const ROOT: View = View {
        scope: Scope::All,
        mode: ListMode::All,
    };

    /// One upstream's tools, listed whole: `/mcp/{prefix}`.
    pub fn prefix(prefix: &str) -> View {
        View {
            scope: Scope::Prefix(Arc::from(prefix)),
            mode: ListMode::All,
        }
    }

    /// This view listed in `mode`.
    pub(crate) fn with_mode(self, mode: ListMode) -> View {
        View { mode, ..self }
    }

    /// A toolset's tools, listed as the toolset's `mode` says.
    pub fn toolset(name: ToolsetName, mode: ListMode) -> View {
        View {
            scope: Scope::Toolset(Arc::new(name)),
            mode,
        }
    }

    /// Whether the tool belongs to this endpoint (before access rules).
    pub fn serves(&self, tool: &ToolEntry) -> bool {
        match &self.scope {
            Scope::All => true,
            Scope::Prefix(p) => **p == *tool.prefix,
            Scope::Toolset(t) => tool.in_toolset(t),
        }
    }

    /// The prefix whose tools this view serves, if it is one upstream's.
    pub(crate) fn prefix_scope(&self) -> Option<&str> {
        match &self.scope {
            Scope::All | Scope::Toolset(_) => None,
            Scope::Prefix(p) => Some(p),
        }
    }

    /// What a listing cursor is bound to, so that a cursor of one
    /// endpoint cannot page another.
    pub(crate) fn endpoint_key(&self) -> EndpointKey {
        match &self.scope {
            Scope::Toolset(t) => EndpointKey::named(&format!("mcp/toolsets/{t}")),
            _ => EndpointKey::of_scope(self.prefix_scope()),
        }
    }

    /// Whether a session on this view sees a change in `diff`.
    pub(crate) fn affected_by(&self, diff: &ToolDiff) -> bool {
        match &self.scope {
            Scope::Toolset(t) => diff.toolsets.contains(&**t),
            _ => diff.affects(self.prefix_scope()),
        }
    }

    /// What session ids are signed for: `None` for `/mcp` (so its ids
    /// keep their form), else a text no other view has. Prefixes hold no
    /// `?`, so the suffix cannot collide with another prefix; nor `/`, so
    /// a toolset's `toolsets/{namespace}/{name}` is no prefix's.
    pub(crate) fn session_scope(&self) -> Option<Arc<str>> {
        let base = match &self.scope {
            Scope::All => None,
            Scope::Prefix(p) => Some(p.to_string()),
            Scope::Toolset(t) => Some(format!("toolsets/{t}")),
        };
        match (base, self.mode) {
            (None, ListMode::All) => None,
            (Some(b), ListMode::All) => Some(Arc::from(b)),
            (b, ListMode::Search) => Some(Arc::from(format!("{}?search", b.unwrap_or_default()))),
        }
    }
}
