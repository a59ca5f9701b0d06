//! Counters and gauges served at `/metrics` (see [`crate::http`]).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use crate::error::Error;

#[derive(Debug, Default)]
pub struct Metrics {
    pub reconciles: AtomicU64,
    /// By [`Error::metric_label`], in [`Error::METRIC_LABELS`] order.
    reconcile_errors: [AtomicU64; Error::METRIC_LABELS.len()],
    pub compiles: AtomicU64,
    pub publishes: AtomicU64,
    pub status_writes: AtomicU64,
    leader: AtomicBool,
    /// Documents kept for conditional GETs: entries and body bytes.
    document_cache: (AtomicU64, AtomicU64),
}

impl Metrics {
    pub fn set_leader(&self, v: bool) {
        self.leader.store(v, Ordering::Relaxed);
    }
    pub fn leader(&self) -> bool {
        self.leader.load(Ordering::Relaxed)
    }
    pub fn set_document_cache(&self, entries: usize, bytes: usize) {
        self.document_cache
            .0
            .store(entries as u64, Ordering::Relaxed);
        self.document_cache.1.store(bytes as u64, Ordering::Relaxed);
    }
    pub fn document_cache(&self) -> (u64, u64) {
        (
            self.document_cache.0.load(Ordering::Relaxed),
            self.document_cache.1.load(Ordering::Relaxed),
        )
    }
    pub fn reconcile_failed(&self, e: &Error) {
        let label = e.metric_label();
        if let Some(i) = Error::METRIC_LABELS.iter().position(|l| *l == label) {
            Self::inc(&self.reconcile_errors[i]);
        }
    }
    /// `(label, count)` for every error label, zeros included.
    pub fn reconcile_errors(&self) -> impl Iterator<Item = (&'static str, u64)> + '_ {
        Error::METRIC_LABELS
            .iter()
            .zip(&self.reconcile_errors)
            .map(|(l, c)| (*l, c.load(Ordering::Relaxed)))
    }
    pub fn inc(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }
}
