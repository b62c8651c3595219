//! Sharing one output buffer between rayon work items, and per-thread scratch.

use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

/// A raw pointer that work items may carry across threads. Whoever writes
/// through it must guarantee that items write disjoint elements.
#[derive(Clone, Copy)]
pub struct SendPtr(pub *mut f32);

impl SendPtr {
    /// The pointer. A method rather than `.0` so closures capture the
    /// whole (Sync) wrapper, not the raw field.
    #[inline]
    pub fn ptr(self) -> *mut f32 {
        self.0
    }
}

// SAFETY: the pointer is only dereferenced by work items that write disjoint
// elements (argued at each use), while the owning `&mut [f32]` is borrowed
// for the whole parallel call.
unsafe impl Send for SendPtr {}
// SAFETY: as above.
unsafe impl Sync for SendPtr {}

/// One scratch value per rayon thread, allocated at plan time.
///
/// Each slot sits behind a lock, so even when the pool has more threads
/// than slots (a pool resized after planning) two threads never share
/// scratch; with one slot per thread the locks are never contended.
pub struct Slots<T> {
    slots: Vec<RwLock<T>>,
}

impl<T> Slots<T> {
    pub fn new(mut make: impl FnMut() -> T) -> Self {
        let n = rayon::current_num_threads().max(1);
        Slots {
            slots: (0..n).map(|_| RwLock::new(make())).collect(),
        }
    }

    /// The calling thread's slot.
    pub fn lock(&self) -> RwLockWriteGuard<'_, T> {
        let i = rayon::current_thread_index().unwrap_or(0) % self.slots.len();
        // A poisoned slot only means another item panicked; the scratch holds
        // no invariants worth refusing over.
        self.slots[i].write().unwrap_or_else(|e| e.into_inner())
    }

    /// Shared access to slot `i`, for reductions over all slots.
    pub fn read(&self, i: usize) -> RwLockReadGuard<'_, T> {
        self.slots[i].read().unwrap_or_else(|e| e.into_inner())
    }

    /// Every slot, for resetting between calls (no locking needed).
    pub fn iter_mut(&mut self) -> impl Iterator<Item = &mut T> {
        self.slots
            .iter_mut()
            .map(|m| m.get_mut().unwrap_or_else(|e| e.into_inner()))
    }

    pub fn len(&self) -> usize {
        self.slots.len()
    }
}
