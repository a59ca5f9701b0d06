//! Errors that stop a compile. Each names the input (document or overlay) and
//! where in it (JSON pointer, overlay action) the problem is.
//!
//! Per-operation problems are not errors: they become [`crate::Rejected`]
//! entries and the rest of the document still compiles.

use std::fmt;

use crate::Reason;

/// Why an upstream could not be compiled at all.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CompileError {
    #[error(transparent)]
    Spec(#[from] SpecError),
    #[error(transparent)]
    Overlay(#[from] OverlayError),
    #[error(transparent)]
    NameConflict(#[from] NameConflicts),
    /// Settings that cannot work (e.g. a prefix longer than `maxLength`).
    #[error("invalid settings: {field}: {message}")]
    Options { field: String, message: String },
    /// The tools' schemas would pass
    /// [`crate::CompileLimits::max_catalog_schema_bytes`]; reported before
    /// the tool that would pass it is rendered.
    #[error(
        "{document}: the catalog's schemas would pass the limit of {limit} bytes at the tool for \
         {method} {path} ({tools} tools compiled before it); exclude toolsets, disable \
         operations (x-mcp-enabled: false) or split the document to shrink the catalog"
    )]
    CatalogTooLarge {
        document: String,
        limit: usize,
        /// Tools compiled before the one that would pass the limit.
        tools: usize,
        method: String,
        path: String,
    },
}

impl CompileError {
    /// Why, as a condition says it.
    pub fn reason(&self) -> Reason {
        match self {
            CompileError::Spec(_) => Reason::SpecInvalid,
            CompileError::Overlay(e) => match e.kind {
                OverlayErrorKind::UnmatchedTarget => Reason::OverlayTargetUnmatched,
                _ => Reason::OverlayInvalid,
            },
            CompileError::NameConflict(_) => Reason::NameConflict,
            CompileError::Options { .. } => Reason::InvalidSettings,
            CompileError::CatalogTooLarge { .. } => Reason::CatalogTooLarge,
        }
    }
}

/// A problem with the OpenAPI document itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpecError {
    /// The document's name (file path, `ConfigMap ns/name key`, URL, ...).
    pub document: String,
    /// JSON pointer into the document (after overlays), `""` for the root.
    pub pointer: String,
    pub kind: SpecErrorKind,
}

impl SpecError {
    pub fn new(document: &str, pointer: impl Into<String>, kind: SpecErrorKind) -> Self {
        SpecError {
            document: document.to_string(),
            pointer: pointer.into(),
            kind,
        }
    }
}

impl std::error::Error for SpecError {}

impl fmt::Display for SpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.pointer.is_empty() {
            write!(f, "{}: {}", self.document, self.kind)
        } else {
            write!(f, "{}: at {}: {}", self.document, self.pointer, self.kind)
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpecErrorKind {
    /// Not JSON/YAML; carries the parser's message with line and column.
    #[error("cannot parse: {0}")]
    Parse(String),
    #[error("not an OpenAPI document: no `openapi` or `swagger` field")]
    NotOpenApi,
    #[error("unsupported OpenAPI version {0:?} (supported: 2.0, 3.0.x, 3.1.x)")]
    UnsupportedVersion(String),
    #[error("expected {expected}")]
    WrongType { expected: &'static str },
    #[error("external $ref {0:?} is not allowed (only local refs starting with `#/`)")]
    ExternalRef(String),
    #[error("$ref {0:?} does not resolve")]
    DanglingRef(String),
    #[error("$ref {0:?} refers to itself")]
    RefLoop(String),
    #[error("{0}")]
    Invalid(String),
}

/// A problem with an overlay document or one of its actions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OverlayError {
    /// The overlay's name (file path or `McpOverlay ns/name`).
    pub overlay: String,
    /// Index of the failing action in `actions`, if the problem is an action.
    pub action: Option<usize>,
    /// The action's target, if any.
    pub target: Option<String>,
    pub kind: OverlayErrorKind,
}

impl std::error::Error for OverlayError {}

impl fmt::Display for OverlayError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "overlay {}", self.overlay)?;
        if let Some(i) = self.action {
            write!(f, ": /actions/{i}")?;
        }
        if let Some(t) = &self.target {
            write!(f, " (target {t:?})")?;
        }
        write!(f, ": {}", self.kind)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OverlayErrorKind {
    #[error("cannot parse: {0}")]
    Parse(String),
    #[error("unsupported overlay version {0:?} (supported: 1.0.x, 1.1.x)")]
    UnsupportedVersion(String),
    #[error("invalid overlay: {0}")]
    Invalid(String),
    #[error("invalid JSONPath: {0}")]
    InvalidJsonPath(String),
    #[error("target matched nothing (strict mode)")]
    UnmatchedTarget,
    #[error("{0}")]
    Action(String),
    /// The document was a valid OpenAPI document before this overlay and
    /// is not after it.
    #[error("the document is no longer valid OpenAPI after this overlay: {0}")]
    BrokeDocument(String),
    /// The action would make the document larger or deeper than
    /// [`crate::overlay::DocumentBudget`] allows.
    #[error("{0}")]
    TooLarge(String),
}

/// Two or more operations of one upstream want the same tool name and
/// `conflictResolution` is `error`. Lists every conflicting pair.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NameConflicts {
    pub conflicts: Vec<NameConflict>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NameConflict {
    pub name: String,
    /// `(METHOD, path)` of the first operation with the name.
    pub first: (String, String),
    /// `(METHOD, path)` of the later operation.
    pub second: (String, String),
}

impl std::error::Error for NameConflicts {}

/// Conflicts the message of [`NameConflicts`] lists; the rest are counted.
pub const SHOWN_CONFLICTS: usize = 20;

impl fmt::Display for NameConflicts {
    /// One conflict a line, at most [`SHOWN_CONFLICTS`], then the settings
    /// that resolve them: a 55 KB single line helps nobody.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.conflicts.len();
        let s = if n == 1 { "" } else { "s" };
        writeln!(
            f,
            "{n} tool name conflict{s} (naming.conflictResolution: error):"
        )?;
        for c in self.conflicts.iter().take(SHOWN_CONFLICTS) {
            writeln!(
                f,
                "  {:?}: {} {} and {} {}",
                c.name, c.first.0, c.first.1, c.second.0, c.second.1
            )?;
        }
        if n > SHOWN_CONFLICTS {
            writeln!(f, "  and {} more", n - SHOWN_CONFLICTS)?;
        }
        write!(
            f,
            "set naming.conflictResolution: qualify (keeps every operation, qualifying the \
             names), firstWins or skip; or name one operation of each pair with \
             x-mcp-tool-name (an overlay can add it)"
        )
    }
}
