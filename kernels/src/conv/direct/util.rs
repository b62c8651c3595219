//! Small plumbing shared by the three directions: aligned scratch, a raw
//! pointer that may cross threads, work splitting, accumulation slots and
//! a software-prefetch cursor.

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

/// Bytes a `Vec<T>` of `n` pushed elements may hold: its capacity
/// doubles, so up to twice its length.
pub(super) fn pushed_bytes<T>(n: u128) -> u128 {
    2 * n * std::mem::size_of::<T>() as u128
}

/// Bytes of an [`AlignedBuf`] of `len` floats.
pub(super) fn aligned_bytes(len: u128) -> u128 {
    4 * (len + 16)
}

/// [`grid`]'s pixel chunks before clamping: sqrt(target · s / w).
fn ideal_chunks(s_bytes: f64, w_bytes: f64, target: usize) -> usize {
    (target as f64 * s_bytes / w_bytes.max(1.0)).sqrt().round() as usize
}

/// Most items (pixel chunks x block chunks) [`grid`] splits into for at
/// most `units` pixel units: with `pc` chunks first, at most
/// `target + pc`, or `2·target` when it raises `pc` to reach the target.
pub(super) fn grid_items_bound(units: usize, s_bytes: f64, w_bytes: f64, target: usize) -> u128 {
    let pc = ideal_chunks(s_bytes, w_bytes, target).clamp(1, units.max(1));
    (2 * target + pc) as u128
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
    let mut pc = ideal_chunks(s_bytes, w_bytes, target).clamp(1, units.max(1));
    let kc = target.div_ceil(pc).clamp(1, blocks.max(1));
    if pc * kc < target {
        pc = target.div_ceil(kc).clamp(1, units.max(1));
    }
    (pc, kc)
}

/// Pixels regrouped by the taps that reach real data, so that a tile never
/// multiplies padding. A pixel by the border reads fewer taps (a 3x3 tap
/// row above the image, a column left of it); in the flat order its tile
/// would run those taps on zeros for it: on 7x7 images with a 3x3 kernel
/// that was 18% of the FMAs (361 of 441 pixel-taps inside), 9% at 14x14.
/// Here every pixel of a tile shares its set of taps inside, and the tile
/// runs only those.
pub(super) struct TapTiles {
    /// Flat pixels `(n·ny + y)·nx + x`, grouped by their set of taps,
    /// each group in memory order.
    pub order: Vec<u32>,
    /// Per tile: first entry in `order`, pixels (at most `MR`), and the
    /// taps inside for all of them (bit `t`).
    pub tiles: Vec<(u32, u8, u64)>,
}

impl TapTiles {
    /// The tiles of `mb` images of `ny x nx` pixels whose taps inside are
    /// `mask(y, x)` (bits of `0..taps`, at most 64), when they save at
    /// least [`TapTiles::MIN_SAVED`] of the pixel-taps; `None` keeps the
    /// flat order, whose tiles read their rows' neighbours in memory.
    pub fn new(
        (mb, ny, nx): (usize, usize, usize),
        taps: usize,
        mr: usize,
        mask: impl Fn(usize, usize) -> u64,
    ) -> Option<TapTiles> {
        if !Self::pays((mb, ny, nx), taps, &mask) {
            return None;
        }
        let plane = ny * nx;
        let masks: Vec<u64> = (0..plane).map(|i| mask(i / nx, i % nx)).collect();
        // Groups in order of first appearance (every image has the same
        // masks, so the first image decides); a group's pixels in memory
        // order (images, then rows, then columns). Sized exactly, so that
        // the peak is near what is kept (see [`TapTiles::bytes_bound`]):
        // grown by pushing, the Vecs of a 1.9-million-pixel batch peaked
        // at 36 MB, 2.8 times what they kept.
        let mut keys: Vec<u64> = Vec::new();
        let group: Vec<u32> = masks
            .iter()
            .map(|m| match keys.iter().position(|k| k == m) {
                Some(g) => g as u32,
                None => {
                    keys.push(*m);
                    (keys.len() - 1) as u32
                }
            })
            .collect();
        drop(masks);
        // Plane pixels by group, each group's in memory order.
        let mut members: Vec<u32> = (0..plane as u32).collect();
        members.sort_by_key(|&i| group[i as usize]);
        let mut per_group = vec![0usize; keys.len()];
        for &g in &group {
            per_group[g as usize] += 1;
        }
        drop(group);
        let tiles_len: usize = per_group.iter().map(|&c| (mb * c).div_ceil(mr)).sum();
        let (mut order, mut tiles) = (
            Vec::with_capacity(mb * plane),
            Vec::with_capacity(tiles_len),
        );
        let mut first = 0;
        for (&m, &count) in keys.iter().zip(&per_group) {
            let start = order.len();
            let of_group = &members[first..first + count];
            for n in 0..mb {
                order.extend(of_group.iter().map(|&i| (n * plane) as u32 + i));
            }
            for c in (start..order.len()).step_by(mr) {
                tiles.push((c as u32, (order.len() - c).min(mr) as u8, m));
            }
            first += count;
        }
        Some(TapTiles { order, tiles })
    }

    /// The least share of pixel-taps in the padding worth regrouping for.
    /// ResNet-50's 3x3 forwards at batch 16 regrouped against the flat
    /// order (AVX-512, Zen 5, 2 threads, ABBA, before loops were aligned):
    /// 56x56 (2.4% padding) 0.97x, 28x28 (4.7%) 1.03x, 14x14 1.05x, 7x7
    /// 1.16x. With the 4% threshold and aligned loops, all 23 layers: see
    /// `results/reference/cpu-resnet50-zen5-avx512/abba-tap-tiles.txt`.
    pub const MIN_SAVED: f64 = 0.04;

    /// Tile `i`'s pixels and the mask of the taps they run.
    pub fn tile(&self, i: usize) -> (&[u32], u64) {
        let (start, m, mask) = self.tiles[i];
        (&self.order[start as usize..][..m as usize], mask)
    }

    /// Bytes it holds.
    pub fn bytes(&self) -> usize {
        self.order.len() * 4 + self.tiles.len() * std::mem::size_of::<(u32, u8, u64)>()
    }

    /// Whether [`TapTiles::new`] makes tiles for these pixels: at most 64
    /// taps, pixels numbered in a u32, and at least
    /// [`TapTiles::MIN_SAVED`] of the pixel-taps in the padding.
    fn pays(
        (mb, ny, nx): (usize, usize, usize),
        taps: usize,
        mask: impl Fn(usize, usize) -> u64,
    ) -> bool {
        if taps > 64 || mb * ny * nx > u32::MAX as usize || taps == 0 {
            return false;
        }
        let inside: usize = (0..ny * nx)
            .map(|i| mask(i / nx, i % nx).count_ones() as usize)
            .sum();
        1.0 - inside as f64 / (ny * nx * taps) as f64 >= Self::MIN_SAVED
    }

    /// Most bytes [`TapTiles::new`] allocates for these arguments: 0 when
    /// it makes no tiles, else [`TapTiles::bytes_bound`].
    pub fn bytes_bound_for(
        (mb, ny, nx): (usize, usize, usize),
        taps: usize,
        mr: usize,
        mask: impl Fn(usize, usize) -> u64,
    ) -> u128 {
        if Self::pays((mb, ny, nx), taps, mask) {
            Self::bytes_bound(mb, ny * nx, mr)
        } else {
            0
        }
    }

    /// Most bytes [`TapTiles::new`] allocates for `mb` images of `plane`
    /// pixels, at its peak: the order and the tiles (at most one partial
    /// tile per group, and at most `plane` groups), beside the per-plane
    /// masks, group keys (grown by doubling), members and the stable
    /// sort's buffer it builds them from.
    pub fn bytes_bound(mb: usize, plane: usize, mr: usize) -> u128 {
        let (mb, plane, mr) = (mb as u128, plane as u128, mr.max(1) as u128);
        let tile = std::mem::size_of::<(u32, u8, u64)>() as u128;
        4 * mb * plane + tile * (mb * plane / mr + plane) + 48 * plane
    }
}

/// A tile row's origin: (row, column) of tap (0, 0), which may lie in the
/// padding, and the flat offset it would have.
pub(super) type Origin = (isize, isize, isize);

/// The origin of a row past the tile: far outside, so every tap reads the
/// zero row (tiles on [`Igemm::tap_off`](super::ukernel::Igemm::tap_off)
/// point such rows at row 0's data instead).
pub(super) const NO_PIXEL: Origin = (isize::MIN / 2, 0, 0);

/// Fills a tile's `org` and output `rows` for its `m` pixels, `pixel(i)`
/// giving row `i`'s; rows `m..mr` get [`NO_PIXEL`].
#[inline(always)]
pub(super) fn fill_tile<R>(
    org: &mut [Origin],
    rows: &mut [R],
    (mr, m): (usize, usize),
    mut pixel: impl FnMut(usize) -> (Origin, R),
) {
    for i in 0..mr {
        if i >= m {
            org[i] = NO_PIXEL;
            continue;
        }
        (org[i], rows[i]) = pixel(i);
    }
}

/// (image, row, column) of flat pixel `q` of `ny x nx` planes.
#[inline(always)]
pub(super) fn pixel_of(q: usize, (ny, nx): (usize, usize)) -> (usize, usize, usize) {
    let row = q / nx;
    (row / ny, row % ny, q % nx)
}

/// Consecutive pixels of `ny x nx` planes from a flat pixel on, as
/// (image, row, column), advanced one at a time: no divisions per tile.
pub(super) struct PixelWalk {
    cur: (usize, usize, usize),
    ny: usize,
    nx: usize,
}

impl PixelWalk {
    pub(super) fn from(q: usize, (ny, nx): (usize, usize)) -> PixelWalk {
        PixelWalk {
            cur: pixel_of(q, (ny, nx)),
            ny,
            nx,
        }
    }

    /// This pixel, then on to the next.
    #[inline(always)]
    pub(super) fn next(&mut self) -> (usize, usize, usize) {
        let at = self.cur;
        self.cur.2 += 1;
        if self.cur.2 == self.nx {
            self.cur.2 = 0;
            self.cur.1 += 1;
            if self.cur.1 == self.ny {
                self.cur.1 = 0;
                self.cur.0 += 1;
            }
        }
        at
    }
}

/// Most strided segment sets one [`Ahead`] holds.
pub(super) const AHEAD_SETS: usize = 64;

/// Software prefetch of the data the next block of work will read, issued a
/// few cache lines at a time between the current block's micro-kernel
/// calls. A block's first reads otherwise wait on DRAM: the hardware
/// prefetchers follow each stream but do not run ahead across the jump to
/// the next block's rows, and a copy that packs those rows has no arithmetic
/// to hide the misses behind.
///
/// The data is a list of sets of `count` segments of `seg` bytes, `stride`
/// bytes apart. Prefetching is a hint that never faults, so the addresses
/// need not be valid.
pub(super) struct Ahead {
    /// `(base, count, stride, seg)` in bytes.
    sets: [(usize, usize, usize, usize); AHEAD_SETS],
    n: usize,
    lines: usize,
    /// Lines issued per [`Ahead::step`].
    per_step: usize,
    /// Cursor: set, segment, line within the segment.
    at: (usize, usize, usize),
}

impl Ahead {
    pub(super) fn new() -> Self {
        Ahead {
            sets: [(0, 0, 0, 0); AHEAD_SETS],
            n: 0,
            lines: 0,
            per_step: 0,
            at: (0, 0, 0),
        }
    }

    /// Adds `count` segments of `seg` floats starting at `base`, `stride`
    /// floats apart. Sets past the capacity are dropped (a hint is lost).
    pub(super) fn push(&mut self, base: *const f32, count: usize, stride: usize, seg: usize) {
        if self.n == AHEAD_SETS || count == 0 || seg == 0 {
            return;
        }
        // Back-to-back segments are one.
        let (count, seg) = if stride == seg {
            (1, count * seg)
        } else {
            (count, seg)
        };
        let (base, stride, seg) = (base as usize, stride * 4, seg * 4);
        self.sets[self.n] = (base, count, stride, seg);
        self.n += 1;
        // At most one more line than the bytes fill, for a straddled start.
        self.lines += count * (seg.div_ceil(64) + 1);
    }

    /// Bytes of the lines pushed so far (an upper bound).
    pub(super) fn bytes(&self) -> usize {
        self.lines * 64
    }

    /// Spreads the lines pushed so far over `steps` calls of [`Ahead::step`].
    pub(super) fn spread(&mut self, steps: usize) {
        self.per_step = self.lines.div_ceil(steps.max(1));
    }

    /// Issues the next `per_step` prefetches (none once all are issued).
    #[inline]
    pub(super) fn step(&mut self) {
        for _ in 0..self.per_step {
            match self.next_line() {
                Some(line) => prefetch_line(line),
                None => return,
            }
        }
    }

    /// The next line's address, walking each set's segments in order.
    fn next_line(&mut self) -> Option<usize> {
        while self.at.0 < self.n {
            let (base, count, stride, seg) = self.sets[self.at.0];
            let start = base + self.at.1 * stride;
            let line = (start & !63) + self.at.2 * 64;
            if line < start + seg {
                self.at.2 += 1;
                return Some(line);
            }
            self.at = if self.at.1 + 1 < count {
                (self.at.0, self.at.1 + 1, 0)
            } else {
                (self.at.0 + 1, 0, 0)
            };
        }
        None
    }
}

/// Asks for the cache line holding byte address `addr` (a hint; never
/// faults). T1, though on the Zen 5 measured it ran as T0.
#[inline(always)]
fn prefetch_line(addr: usize) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch of any address is architecturally a no-op hint.
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T1};
        _mm_prefetch::<_MM_HINT_T1>(addr as *const i8);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = addr;
}

#[cfg(test)]
mod tests {
    use super::Ahead;

    /// Every line a segment touches, each once, in order; back-to-back
    /// segments merge; the byte bound covers what is walked.
    #[test]
    fn ahead_walks_the_lines_of_its_segments() {
        let mut a = Ahead::new();
        // Two 20-float segments 100 floats apart from byte 4096 + 40.
        let base = (4096 + 40) as *const f32;
        a.push(base, 2, 100, 20);
        // Three back-to-back 16-float segments from byte 65536.
        a.push(65536 as *const f32, 3, 16, 16);
        let mut lines = Vec::new();
        while let Some(l) = a.next_line() {
            lines.push(l);
        }
        let seg = |from: usize, bytes: usize| (from & !63..from + bytes).step_by(64);
        let mut want: Vec<usize> = seg(4096 + 40, 80).collect();
        want.extend(seg(4096 + 40 + 400, 80));
        want.extend(seg(65536, 192));
        assert_eq!(lines, want);
        assert!(a.bytes() >= 64 * lines.len());
        assert_eq!(a.next_line(), None);
    }
}
