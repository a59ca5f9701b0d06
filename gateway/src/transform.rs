//! jq at runtime: programs compiled once per snapshot (in
//! [`crate::snapshot`]) and run here with bounds on time and output size.
//!
//! A run happens on the blocking thread pool with
//! [`JqProgram::run_bounded`], which stops the filter itself at the time and
//! output limits; an outer deadline (slightly longer) guarantees the call
//! returns even if a filter escapes those checks. Either way a runaway
//! filter yields an error for its own call and never stalls the async
//! workers that serve everyone else.

use std::time::Duration;

use catalog::transform::{JqLimits, JqProgram};
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
    };
    let task = tokio::task::spawn_blocking(move || program.run_bounded(input, &limits));
    let deadline = RUN_TIMEOUT + Duration::from_millis(500);
    let out = match tokio::time::timeout(deadline, task).await {
        Err(_) => return Err(TransformError::Timeout { which }),
        Ok(Err(_join)) => {
            return Err(TransformError::Failed {
                which,
                message: "the filter aborted".into(),
            })
        }
        Ok(Ok(r)) => r.map_err(|e| TransformError::Failed {
            which,
            message: e.0,
        })?,
    };
    if serialized_len_exceeds(&out, MAX_OUTPUT_BYTES) {
        return Err(TransformError::TooLarge { which });
    }
    Ok(out)
}

fn serialized_len_exceeds(v: &Value, max: usize) -> bool {
    struct Counter {
        n: usize,
        max: usize,
    }
    impl std::io::Write for Counter {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.n += buf.len();
            if self.n > self.max {
                return Err(std::io::Error::other("too large"));
            }
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    serde_json::to_writer(&mut Counter { n: 0, max }, v).is_err()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn output_size_is_measured_without_allocating_the_text() {
        assert!(!serialized_len_exceeds(&json!({"a": 1}), 7));
        assert!(serialized_len_exceeds(&json!({"a": 1}), 6));
    }
}
