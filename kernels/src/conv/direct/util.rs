//! Small plumbing shared by the three directions: aligned scratch, a raw
//! pointer that may cross threads, work splitting and accumulation slots.

use std::sync::atomic::{AtomicBool, Ordering};

/// Zero-initialised f32 scratch whose first element is 64-byte aligned, so
/// that vector loads from packed data never split cache lines.
pub(super) struct AlignedBuf {
    buf: Vec<f32>,
    off: usize,
    len: usize,
}

impl AlignedBuf {
    pub(super) fn zeroed(len: usize) -> Self {
        let buf = vec![0f32; len + 16];
        // align_offset on an f32 pointer counts elements; < 16 for 64 bytes.
        let off = buf.as_ptr().align_offset(64).min(16);
        AlignedBuf { buf, off, len }
    }
    pub(super) fn as_slice(&self) -> &[f32] {
        &self.buf[self.off..self.off + self.len]
    }
    pub(super) fn as_mut_slice(&mut self) -> &mut [f32] {
        &mut self.buf[self.off..self.off + self.len]
    }
    pub(super) fn bytes(&self) -> usize {
        self.buf.len() * 4
    }
}

/// A mutable pointer shared by parallel work items that write disjoint
/// parts of one output. Access it through [`SyncPtr::get`] so closures
/// capture the wrapper, not the bare pointer.
#[derive(Clone, Copy)]
pub(super) struct SyncPtr(*mut f32);

// SAFETY: only used to hand one output buffer to work items that write
// disjoint elements of it, while the owning `&mut` borrow is held.
unsafe impl Send for SyncPtr {}
unsafe impl Sync for SyncPtr {}

impl SyncPtr {
    pub(super) fn new(s: &mut [f32]) -> Self {
        SyncPtr(s.as_mut_ptr())
    }
    /// Stands for an absent output.
    pub(super) fn null() -> Self {
        SyncPtr(std::ptr::null_mut())
    }
    pub(super) fn get(self) -> *mut f32 {
        self.0
    }
}

/// Work items to aim for: enough that rayon's stealing balances the last
/// items across threads to within a few percent.
pub(super) fn target_items() -> usize {
    16 * rayon::current_num_threads().max(1)
}

/// Splits `0..n` into `parts` contiguous ranges whose starts are multiples
/// of `unit` (except the end), as evenly as that allows.
pub(super) fn split(n: usize, parts: usize, unit: usize) -> Vec<(usize, usize)> {
    let units = n.div_ceil(unit);
    let parts = parts.clamp(1, units.max(1));
    (0..parts)
        .map(|i| {
            (
                (units * i / parts * unit).min(n),
                (units * (i + 1) / parts * unit).min(n),
            )
        })
        .filter(|(a, b)| a < b)
        .collect()
}

/// A fixed set of accumulation buffers that work items borrow one at a time:
/// items on different threads add into different buffers, and the buffers are
/// summed at the end. Claiming by flag (not by thread index) stays correct
/// even when `execute` runs in a pool of another size than the plan saw.
pub(super) struct Slots {
    /// Owns the memory; only reached through `ptrs` once built.
    bufs: Vec<AlignedBuf>,
    /// Base of each buffer, taken from a unique borrow at construction (the
    /// heap blocks never move), so items may write through them.
    ptrs: Vec<SyncPtr>,
    busy: Vec<AtomicBool>,
    len: usize,
}

impl Slots {
    pub(super) fn new(count: usize, len: usize) -> Self {
        let mut bufs: Vec<AlignedBuf> = (0..count).map(|_| AlignedBuf::zeroed(len)).collect();
        let ptrs = bufs
            .iter_mut()
            .map(|b| SyncPtr::new(b.as_mut_slice()))
            .collect();
        Slots {
            bufs,
            ptrs,
            busy: (0..count).map(|_| AtomicBool::new(false)).collect(),
            len,
        }
    }

    pub(super) fn count(&self) -> usize {
        self.ptrs.len()
    }

    /// Length of each buffer in floats.
    pub(super) fn len(&self) -> usize {
        self.len
    }

    /// Base pointer of buffer `i`. Callers must not race on its elements.
    pub(super) fn ptr(&self, i: usize) -> *mut f32 {
        self.ptrs[i].get()
    }

    pub(super) fn bytes(&self) -> usize {
        self.bufs.iter().map(AlignedBuf::bytes).sum()
    }

    /// Runs `f` with exclusive use of one buffer, waiting if all are taken
    /// (only when more threads run items than there are slots).
    pub(super) fn with<R>(&self, f: impl FnOnce(*mut f32) -> R) -> R {
        loop {
            for (i, flag) in self.busy.iter().enumerate() {
                if flag
                    .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
                    .is_ok()
                {
                    // The flag gives this item sole use of buffer i until it
                    // is released below.
                    let r = f(self.ptrs[i].get());
                    flag.store(false, Ordering::Release);
                    return r;
                }
            }
            std::thread::yield_now();
        }
    }
}

/// Splits work over `units` pixel units and `blocks` weight blocks into
/// about `target` items. Each extra pixel chunk re-reads the weights
/// (`w_bytes`) and each extra block chunk re-reads the pixels (`s_bytes`);
/// the split that minimises that traffic has pixel chunks ≈
/// sqrt(target · s / w). Returns (pixel chunks, block chunks).
pub(super) fn grid(
    units: usize,
    blocks: usize,
    s_bytes: f64,
    w_bytes: f64,
    target: usize,
) -> (usize, usize) {
    let ideal = (target as f64 * s_bytes / w_bytes.max(1.0)).sqrt().round() as usize;
    let mut pc = ideal.clamp(1, units.max(1));
    let kc = target.div_ceil(pc).clamp(1, blocks.max(1));
    if pc * kc < target {
        pc = target.div_ceil(kc).clamp(1, units.max(1));
    }
    (pc, kc)
}
