//! The worker threads that run filters: a small process-wide pool
//! ([`MAX_WORKERS`]) of threads with large stacks, a queue, and the
//! caller's wait on a channel that ends at the run's deadline whether or
//! not the filter has stopped. A worker whose filter is still running past
//! its deadline counts as stuck; when all are, a run fails at once instead
//! of queueing.

use std::collections::VecDeque;
use std::sync::{mpsc, Arc, Condvar, Mutex, OnceLock};
use std::time::Instant;

use serde_json::Value;

use super::{
    natives, panic_text, sandbox, Compiled, JqLimits, JqMemory, JqProgram, JqRunError,
    BIG_STACK_BYTES, MAX_WORKERS,
};

impl JqProgram {
    /// Runs on a worker of `pool`, waiting for the result until the run's
    /// deadline at most.
    pub(super) fn run_on(
        &self,
        pool: &'static Pool,
        input: Value,
        limits: &JqLimits,
        memory: Option<Arc<dyn JqMemory>>,
    ) -> Result<Value, JqRunError> {
        let deadline = Instant::now() + limits.timeout;
        let (reply, result) = mpsc::sync_channel(1);
        let job = Job {
            program: Arc::clone(&self.inner),
            input,
            limits: *limits,
            deadline,
            memory,
            reply,
        };
        pool.submit(job)?;
        let wait = deadline.saturating_duration_since(Instant::now());
        match result.recv_timeout(wait) {
            Ok(r) => r,
            Err(mpsc::RecvTimeoutError::Timeout) => Err(JqRunError::Timeout(limits.timeout)),
            Err(mpsc::RecvTimeoutError::Disconnected) => Err(JqRunError::Failed(
                "jq worker stopped without a result".into(),
            )),
        }
    }
}

struct Job {
    program: Arc<Compiled>,
    input: Value,
    limits: JqLimits,
    deadline: Instant,
    /// Held until the worker is done with the job, so that what it grants
    /// stays reserved while a filter runs on past its caller's timeout.
    memory: Option<Arc<dyn JqMemory>>,
    reply: mpsc::SyncSender<Result<Value, JqRunError>>,
}

pub(super) struct Pool {
    state: Mutex<PoolState>,
    wake: Condvar,
    max_workers: usize,
}

#[derive(Default)]
struct PoolState {
    queue: VecDeque<Job>,
    /// Deadline of the job each worker is running, `None` when idle.
    busy: Vec<Option<Instant>>,
}

pub(super) fn pool() -> &'static Pool {
    static POOL: OnceLock<Pool> = OnceLock::new();
    POOL.get_or_init(|| Pool::new(MAX_WORKERS))
}

impl Pool {
    pub(super) fn new(max_workers: usize) -> Pool {
        Pool {
            state: Mutex::new(PoolState::default()),
            wake: Condvar::new(),
            max_workers,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, PoolState> {
        // A worker panicking while holding the lock leaves consistent state
        // (it only pushes/pops), so poisoning is ignored.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn submit(&'static self, job: Job) -> Result<(), JqRunError> {
        let now = Instant::now();
        let mut state = self.lock();
        let idle = state.busy.iter().filter(|b| b.is_none()).count();
        if idle <= state.queue.len() {
            if state.busy.len() < self.max_workers {
                let id = state.busy.len();
                let spawned = std::thread::Builder::new()
                    .name(format!("toolgate-jq-{id}"))
                    .stack_size(BIG_STACK_BYTES)
                    .spawn(move || self.work(id));
                if spawned.is_ok() {
                    state.busy.push(None);
                }
            }
            let stuck = state
                .busy
                .iter()
                .filter(|b| b.is_some_and(|d| d <= now))
                .count();
            if state.busy.is_empty() || stuck == state.busy.len() {
                return Err(JqRunError::Failed(format!(
                    "jq worker pool exhausted ({stuck} of {} workers are still running \
                     filters past their timeout)",
                    self.max_workers
                )));
            }
        }
        state.queue.push_back(job);
        drop(state);
        self.wake.notify_one();
        Ok(())
    }

    fn work(&self, id: usize) {
        loop {
            let job = {
                let mut state = self.lock();
                loop {
                    if let Some(job) = state.queue.pop_front() {
                        if let Some(slot) = state.busy.get_mut(id) {
                            *slot = Some(job.deadline);
                        }
                        break job;
                    }
                    state = self.wake.wait(state).unwrap_or_else(|p| p.into_inner());
                }
            };
            let result = if Instant::now() >= job.deadline {
                // The caller has already given up.
                Err(JqRunError::Timeout(job.limits.timeout))
            } else {
                let run = std::panic::AssertUnwindSafe(|| {
                    sandbox::execute(
                        &job.program.filter,
                        job.input,
                        &job.limits,
                        job.deadline,
                        job.memory,
                    )
                });
                std::panic::catch_unwind(run).unwrap_or_else(|panic| {
                    Err(JqRunError::Failed(format!(
                        "jq panicked while running the filter: {}",
                        panic_text(&*panic)
                    )))
                })
            };
            natives::end_run();
            let _ = job.reply.send(result);
            if let Some(slot) = self.lock().busy.get_mut(id) {
                *slot = None;
            }
        }
    }
}
#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use super::super::*;
    use super::*;
    use serde_json::json;
    use std::time::{Duration, Instant};

    #[test]
    fn timed_out_filters_stop_their_worker() {
        // Guarded loops stop at the deadline, so more runaways than workers
        // can run one after the other without exhausting the pool.
        let program = JqProgram::compile("last(range(1e18))").unwrap();
        for _ in 0..(MAX_WORKERS * 2) {
            let err = program.run_bounded(json!(0), &short(50)).unwrap_err();
            assert!(matches!(err, JqRunError::Timeout(_)), "{err}");
        }
        assert_eq!(run("1", json!(0)).unwrap(), json!(1));
    }

    #[test]
    fn all_workers_stuck_fails_fast_with_pool_exhausted() {
        // A reduce over a large input never passes a guard, so the single
        // worker stays busy after the caller's deadline.
        let pool: &'static Pool = Box::leak(Box::new(Pool::new(1)));
        let slow = JqProgram::compile("reduce .[] as $x (0; . + $x)").unwrap();
        let input = Value::Array(vec![json!(1); 2_000_000]);
        let err = slow.run_on(pool, input, &short(200), None).unwrap_err();
        assert!(matches!(err, JqRunError::Timeout(_)), "{err}");
        std::thread::sleep(Duration::from_millis(5));
        let started = Instant::now();
        let quick = JqProgram::compile(".").unwrap();
        let err = quick
            .run_on(pool, json!(1), &short(10_000), None)
            .unwrap_err();
        assert!(err.to_string().contains("pool exhausted"), "{err}");
        assert!(started.elapsed() < Duration::from_millis(100));
        // Once the stuck filter finishes, the worker serves again.
        let mut last = Err(JqRunError::Failed(String::new()));
        for _ in 0..600 {
            last = quick.run_on(pool, json!(1), &short(10_000), None);
            if last.is_ok() {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        assert_eq!(last.unwrap(), json!(1));
    }

    #[test]
    fn a_panic_inside_jaq_is_a_run_error_and_the_worker_keeps_serving() {
        let pool: &'static Pool = Box::leak(Box::new(Pool::new(1)));
        let filter = sandbox::compile_source(natives::PANIC_FOR_TESTS).unwrap();
        let panicking = JqProgram {
            inner: Arc::new(Compiled {
                source: natives::PANIC_FOR_TESTS.into(),
                filter,
            }),
        };
        let err = panicking
            .run_on(pool, json!(null), &short(5000), None)
            .unwrap_err();
        assert!(err.to_string().contains("panicked"), "{err}");
        assert!(err.to_string().contains("a panic for tests"), "{err}");
        let quick = JqProgram::compile(".").unwrap();
        let out = quick.run_on(pool, json!(1), &short(5000), None);
        assert_eq!(out.unwrap(), json!(1));
    }
}
