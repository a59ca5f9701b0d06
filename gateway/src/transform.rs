//! jq at runtime: programs compiled once per snapshot (in
//! [`crate::snapshot`]) and run here with bounds on time and output size,
//! and on what a filter may build (`fromjson`, `tojson`, string repetition
//! and concatenation: [`JqLimits::DEFAULT`]'s `max_alloc_bytes`, 64 MiB).
//! Every failure of a run, including hostile input such as megabytes of
//! `[` given to `fromjson`, is an error of that one call.
//!
//! A run happens on the blocking thread pool with
//! [`JqProgram::run_bounded`], which stops the filter itself at the time and
//! output limits; an outer deadline (slightly longer) guarantees the call
//! returns even if a filter escapes those checks. Either way a runaway
//! filter yields an error for its own call and never stalls the async
//! workers that serve everyone else.

use std::time::Duration;

use catalog::transform::{JqLimits, JqProgram, JqRunError};
use serde_json::Value;

/// Wall-clock budget of one run.
pub const RUN_TIMEOUT: Duration = Duration::from_secs(2);
/// Largest accepted output, serialised.
pub const MAX_OUTPUT_BYTES: usize = 10 * 1024 * 1024;

/// Why a run failed; shown to callers (it is about their data or the
/// catalog's filter, not about the gateway's internals).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TransformError {
    #[error("{which} transform failed: {message}")]
    Failed {
        which: &'static str,
        message: String,
    },
    #[error("{which} transform did not finish within {RUN_TIMEOUT:?}")]
    Timeout { which: &'static str },
    #[error("{which} transform output exceeds {MAX_OUTPUT_BYTES} bytes")]
    TooLarge { which: &'static str },
}

/// Runs `program` on `input`. `which` names the transform in errors
/// (`request`, `response`, `error`).
pub async fn run(
    which: &'static str,
    program: &JqProgram,
    input: Value,
) -> Result<Value, TransformError> {
    let program = program.clone();
    let limits = JqLimits {
        timeout: RUN_TIMEOUT,
        max_output_bytes: MAX_OUTPUT_BYTES,
        ..JqLimits::DEFAULT
    };
    let task = tokio::task::spawn_blocking(move || program.run_bounded(input, &limits));
    let deadline = RUN_TIMEOUT + Duration::from_millis(500);
    match tokio::time::timeout(deadline, task).await {
        Err(_) => Err(TransformError::Timeout { which }),
        Ok(Err(_join)) => Err(TransformError::Failed {
            which,
            message: "the filter aborted".into(),
        }),
        Ok(Ok(Ok(out))) => Ok(out),
        // The output's size is measured once, by the run itself.
        Ok(Ok(Err(e))) => Err(match e {
            JqRunError::Timeout(_) => TransformError::Timeout { which },
            JqRunError::OutputTooLarge(_) => TransformError::TooLarge { which },
            JqRunError::Failed(message) => TransformError::Failed { which, message },
        }),
    }
}
