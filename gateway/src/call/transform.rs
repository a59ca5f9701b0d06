//! jq at runtime: programs compiled once per snapshot (in
//! [`crate::serving::snapshot`]) and run here with bounds on time and output size,
//! and on what a filter may build (arrays it collects, `+`, `fromjson`,
//! `tojson`, string repetition: [`JqLimits::DEFAULT`]'s `max_alloc_bytes`,
//! 64 MiB per run). Every failure of a run, including hostile input such
//! as megabytes of `[` given to `fromjson`, is an error of that one call.
//!
//! **Memory.** What a run builds is reserved, as it builds it, from the
//! same [`ResponseBudget`] as response bodies (in steps of
//! [`catalog::transform::RESERVE_CHUNK_BYTES`], without waiting): a filter such as
//! `[range(1e9)]` that passed the compiler's dry runs fails its own call
//! once the budget has no room, instead of several at once taking the pod
//! past its memory limit. The reservation is held until the worker is done
//! with the run, even when the caller has stopped waiting for it.
//!
//! A run happens on the blocking thread pool with
//! [`JqProgram::run_metered`], which stops the filter itself at the time and
//! output limits; an outer deadline (slightly longer) guarantees the call
//! returns even if a filter escapes those checks. Either way a runaway
//! filter yields an error for its own call and never stalls the async
//! workers that serve everyone else.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use catalog::transform::{JqLimits, JqMemory, JqProgram, JqRunError};
use futures::FutureExt as _;
use serde_json::Value;

use crate::call::upstream::{BudgetPermit, ResponseBudget};

/// Wall-clock budget of one run.
pub(crate) const RUN_TIMEOUT: Duration = Duration::from_secs(2);
/// Largest accepted output, serialised.
pub(crate) const MAX_OUTPUT_BYTES: usize = 10 * 1024 * 1024;

/// Why a run failed; shown to callers (it is about their data or the
/// catalog's filter, not about the gateway's internals).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum TransformError {
    #[error("{which} transform failed: {message}")]
    Failed {
        which: &'static str,
        message: String,
    },
    #[error("{which} transform did not finish within {RUN_TIMEOUT:?}")]
    Timeout { which: &'static str },
    #[error("{which} transform output exceeds {MAX_OUTPUT_BYTES} bytes")]
    TooLarge { which: &'static str },
    #[error(
        "{which} transform ran out of memory: the gateway's response memory budget \
         ({budget} bytes, --max-response-memory-bytes) had no room for more than the \
         {} MiB it built", .built.div_ceil(1 << 20)
    )]
    OutOfMemory {
        which: &'static str,
        built: usize,
        budget: u64,
    },
}

/// What a run has reserved from a [`ResponseBudget`], given back when the
/// worker drops it.
struct Reservation {
    budget: &'static ResponseBudget,
    what: &'static str,
    /// Entered to poll the budget's semaphore from the jq worker, which is
    /// not a runtime thread.
    runtime: tokio::runtime::Handle,
    held: Mutex<Vec<BudgetPermit>>,
}

impl JqMemory for Reservation {
    fn reserve(&self, bytes: usize) -> bool {
        let _runtime = self.runtime.enter();
        // Polled once: a worker must never wait for memory that other
        // calls hold (they may be waiting for a worker).
        let far = tokio::time::Instant::now() + Duration::from_secs(3600);
        match self
            .budget
            .acquire(self.what, bytes as u64, far)
            .now_or_never()
        {
            Some(Ok(permit)) => {
                self.held
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push(permit);
                true
            }
            _ => false,
        }
    }
}

/// Runs `program` on `input`. `which` names the transform in errors
/// (`request`, `response`, `error`).
pub(crate) async fn run(
    which: &'static str,
    program: &JqProgram,
    input: Value,
) -> Result<Value, TransformError> {
    run_within(ResponseBudget::get(), which, program, input).await
}

/// [`run`] against `budget`.
pub(crate) async fn run_within(
    budget: &'static ResponseBudget,
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
    let memory = Arc::new(Reservation {
        budget,
        what: match which {
            "request" => "the request transform",
            "error" => "the error transform",
            _ => "the response transform",
        },
        runtime: tokio::runtime::Handle::current(),
        held: Mutex::default(),
    });
    let task = tokio::task::spawn_blocking(move || program.run_metered(input, &limits, memory));
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
            JqRunError::OutOfMemory(built) => TransformError::OutOfMemory {
                which,
                built,
                budget: budget.total(),
            },
            JqRunError::Failed(message) => TransformError::Failed { which, message },
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[tokio::test]
    async fn a_filter_lives_inside_the_response_budget_and_gives_it_back() {
        let budget: &'static ResponseBudget = Box::leak(Box::new(ResponseBudget::new(8 << 20)));
        let hog = JqProgram::compile("if .big then [range(1e9)] | length else . end").unwrap();
        let err = run_within(budget, "response", &hog, json!({"big": true}))
            .await
            .unwrap_err();
        let TransformError::OutOfMemory { which, built, .. } = &err else {
            panic!("{err:?}")
        };
        assert_eq!(*which, "response");
        assert!(*built <= 8 << 20, "{built}");
        let text = err.to_string();
        assert!(
            text.starts_with("response transform ran out of memory"),
            "{text}"
        );
        assert!(text.contains("--max-response-memory-bytes"), "{text}");
        // Everything comes back once the worker is done with the run.
        for _ in 0..200 {
            if budget.available() == budget.total() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert_eq!(budget.available(), budget.total());
        let ok = run_within(budget, "response", &hog, json!({"big": false})).await;
        assert_eq!(ok.unwrap(), json!({"big": false}));
        // A call holding most of the budget leaves a filter less room.
        let held = budget
            .acquire("a body", 7 << 20, tokio::time::Instant::now())
            .await
            .unwrap();
        let small = JqProgram::compile("[range(100000)] | length").unwrap();
        let err = run_within(budget, "error", &small, json!(null))
            .await
            .unwrap_err();
        assert!(
            matches!(err, TransformError::OutOfMemory { which: "error", .. }),
            "{err:?}"
        );
        drop(held);
        let out = run_within(budget, "error", &small, json!(null)).await;
        assert_eq!(out.unwrap(), json!(100000));
    }
}
