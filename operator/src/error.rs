//! What goes wrong in a reconcile, in two kinds: a [`Failure`] is the
//! resource's fault (or the cluster's, when `transient`) and becomes a
//! condition; an [`Error`] aborts the reconcile, which is retried.

use crds::conditions::Reason;

/// Why an upstream (or one stage of it) is not good, as a condition says it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reason}: {message}")]
pub struct Failure {
    pub reason: Reason,
    pub message: String,
    /// The API server or network failed, not the user's input: retry with
    /// backoff instead of reporting it as the resource's fault.
    pub transient: bool,
    /// The overlay (`namespace/name`) at fault, when one is.
    pub overlay: Option<String>,
}

impl Failure {
    pub fn new(reason: Reason, message: impl Into<String>) -> Self {
        Failure {
            reason,
            message: message.into(),
            transient: false,
            overlay: None,
        }
    }
    /// Retried, never written to a condition (so its reason is moot).
    pub fn transient(message: impl Into<String>) -> Self {
        Failure {
            transient: true,
            ..Failure::new(Reason::Reconciling, message)
        }
    }
    /// A compile error, remembering which overlay caused it (if one did).
    pub fn compile(e: &catalog::CompileError) -> Self {
        Failure {
            overlay: match e {
                catalog::CompileError::Overlay(o) => Some(o.overlay.clone()),
                _ => None,
            },
            ..Failure::new(e.reason(), compile_message(e))
        }
    }
}

/// The condition message for a compile error.
fn compile_message(e: &catalog::CompileError) -> String {
    match e {
        catalog::CompileError::NameConflict(c) => {
            let list: Vec<String> = c
                .conflicts
                .iter()
                .take(10)
                .map(|c| {
                    format!(
                        "{} ({} {} and {} {})",
                        c.name, c.first.0, c.first.1, c.second.0, c.second.1
                    )
                })
                .collect();
            let more = match c.conflicts.len() {
                0..=10 => String::new(),
                n => format!("; and {} more", n - 10),
            };
            format!(
                "{} tool names are claimed by two operations: {}{more}; rename one with x-mcp-tool-name or set spec.naming.conflictResolution: qualify (keeps every operation), firstWins or skip",
                c.conflicts.len(),
                list.join("; ")
            )
        }
        other => other.to_string(),
    }
}

/// A reconcile that could not finish; the controller retries it.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    #[error("{0}")]
    Transient(String),
    #[error("finalizer: {0}")]
    Finalizer(#[source] Box<kube::runtime::finalizer::Error<Error>>),
}

impl Error {
    /// A short, bounded label for the reconcile error counter and the
    /// reconcile span's `error.type`.
    pub fn metric_label(&self) -> ErrorKind {
        match self {
            Error::Kube(_) => ErrorKind::Kube,
            Error::Transient(_) => ErrorKind::Transient,
            Error::Finalizer(e) => match e.as_ref() {
                // The reconcile's own error, not the finalizer's.
                kube::runtime::finalizer::Error::ApplyFailed(inner)
                | kube::runtime::finalizer::Error::CleanupFailed(inner) => inner.metric_label(),
                _ => ErrorKind::Finalizer,
            },
        }
    }
}

/// What kind of [`Error`] aborted a reconcile: the `error` label of
/// `toolgate_operator_reconcile_errors_total`. `Finalizer` is adding or
/// removing the finalizer itself; an error of the reconcile it wraps is
/// labelled as that error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    Kube,
    Transient,
    Finalizer,
}

impl ErrorKind {
    pub const ALL: [ErrorKind; 3] = [ErrorKind::Kube, ErrorKind::Transient, ErrorKind::Finalizer];

    pub const fn as_str(self) -> &'static str {
        match self {
            ErrorKind::Kube => "kube",
            ErrorKind::Transient => "transient",
            ErrorKind::Finalizer => "finalizer",
        }
    }
}

impl std::fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl prometheus_client::encoding::EncodeLabelValue for ErrorKind {
    fn encode(
        &self,
        encoder: &mut prometheus_client::encoding::LabelValueEncoder,
    ) -> Result<(), std::fmt::Error> {
        prometheus_client::encoding::EncodeLabelValue::encode(&self.as_str(), encoder)
    }
}

impl From<Failure> for Error {
    fn from(f: Failure) -> Self {
        Error::Transient(f.message)
    }
}
