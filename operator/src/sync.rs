//! Locking the operator's in-memory caches.

use std::sync::{Mutex, MutexGuard};

/// Locks a mutex, carrying on with the data if a panicking reconcile
/// poisoned it: every map here is a cache that stays consistent per entry.
pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
