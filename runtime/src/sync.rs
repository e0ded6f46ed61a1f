//! Locking shared by every layer (the lowest layer: it imports nothing of kusari).

use std::sync::{Mutex, MutexGuard, PoisonError};

/// Locks a mutex, ignoring poisoning (no lock in kusari is held across user code that panics
/// with the data half-updated).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}
