//! A row-major GEMM whose A is packed once and multiplied many times:
//! `C[m×n] (+)= A[m×k] · B[k×n]` for the recurrent layers' per-step
//! products, where the same weights (A) meet a new state (B, `n` = the
//! batch) at every step. [`rows_gemm`](super::rows_gemm) reads A in place
//! through one pointer per tile row; here A is laid out once per pass in
//! panels of the tile's rows, `[k][mr]`, so the micro-kernel walks one
//! pointer and every row of a tile shares its cache lines.
//!
//! A is packed in `blocks` of `bm` rows each (an LSTM's four gates), each
//! block's rows in panels of their own, so that a thread of a team can own
//! the same panels of every block: the same hidden units of every gate
//! (see `rnn::team`).

use super::ukernel::{
    by_columns as by_columns_whole, panel, panel_by_columns, panel_narrow_mr, panel_rows, tile,
    Panel, PANEL_MAX_ROWS, PANEL_NARROW_MAX,
};
use crate::gemm::SendPtr;
use crate::Isa;
use std::cell::RefCell;
use std::ops::Range;

/// A packed for one width of B (the panel's rows depend on it).
#[derive(Default)]
pub struct PackedRows {
    isa: Option<Isa>,
    /// Whether the products run on the column tile (see
    /// [`PackedRows::runs_by_columns`]).
    by_columns: bool,
    mr: usize,
    blocks: usize,
    bm: usize,
    k: usize,
    n: usize,
    data: Vec<f32>,
}

/// Packs of at least this many floats (256 KiB) run on the pool's threads.
const PACK_PARALLEL_FLOATS: usize = 1 << 16;

/// The smallest A (bytes) whose products up to a vector wide run by
/// columns in halves on AVX-512 (see [`PackedRows::runs_by_columns`]):
/// weights that stream from L3 or DRAM at every step, which the column
/// tile loads as whole vectors where the narrow panel tile broadcasts
/// them one float at a time. LSTM forward and backward-data at batch 16,
/// 2 threads, Zen 5, ABBA against the narrow panel tile (or, past the
/// cache, `rows_gemm`): h512 (4 MiB) 1.05x and 1.06x, h1024 1.08x and
/// 1.07x (batch 12: 1.17x, 1.15x), h1536 1.14x and 1.00x, h2048 1.06x and
/// 1.07x; but h256 (1 MiB, in L2) 0.94x and 1.01x, h64 0.84x and 0.96x.
const HALVES_MIN_BYTES: usize = 4 << 20;

/// Rows of the reduction per pass in halves: a panel's 32 rows of them
/// (128 KiB) stay in L2 from the first half to the second. Whole, the
/// backward's `W_hhᵀ` at h1536 (a reduction of 6144, 768 KiB a panel)
/// streamed from DRAM twice: 0.93x.
const HALVES_K_BLOCK: usize = 1024;

/// Where [`PackedRows::pack_from`] reads A.
#[derive(Clone, Copy)]
enum Source<'a> {
    /// Row-major, `blocks·bm` rows of `k`.
    Rows(&'a [f32]),
    /// One block transposed: `k` rows of `bm`.
    Transposed(&'a [f32]),
}

thread_local! {
    /// B padded to whole AVX2 vectors of columns (see [`PackedRows::gemm_panels`]),
    /// per thread, reused from one step to the next.
    static PADDED_B: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
}

impl PackedRows {
    /// An empty value whose first [`PackedRows::pack`] of up to `floats`
    /// packed values (see [`PackedRows::floats_for`]) allocates nothing.
    pub fn with_capacity(floats: usize) -> Option<PackedRows> {
        let mut data = Vec::new();
        data.try_reserve_exact(floats).ok()?;
        Some(PackedRows {
            data,
            ..PackedRows::default()
        })
    }

    /// The most floats a pack of `blocks` blocks of `bm` rows of `k` takes,
    /// whatever the ISA and width (`None` past `usize`).
    pub fn floats_for(blocks: usize, bm: usize, k: usize) -> Option<usize> {
        let most_rows = bm.checked_add(PANEL_MAX_ROWS)?.checked_mul(blocks)?;
        most_rows.checked_mul(k)
    }

    /// Packs `a` (`blocks·bm` rows of `k`, row-major) for products `n`
    /// columns wide on `isa`, reusing this value's allocation. A block's
    /// last panel is padded with zero rows.
    pub fn pack(&mut self, isa: Isa, a: &[f32], blocks: usize, bm: usize, k: usize, n: usize) {
        assert_eq!(a.len(), blocks * bm * k, "A size");
        let by_columns = PackedRows::runs_by_columns(isa, n, a.len());
        self.pack_from(isa, Source::Rows(a), blocks, bm, k, n, by_columns);
    }

    /// [`PackedRows::pack`] of one block whose A is given transposed:
    /// `a_t` is `k` rows of `bm` (A's row `i` is column `i` of `a_t`).
    pub fn pack_transposed(&mut self, isa: Isa, a_t: &[f32], bm: usize, k: usize, n: usize) {
        assert_eq!(a_t.len(), bm * k, "A size");
        let by_columns = PackedRows::runs_by_columns(isa, n, a_t.len());
        self.pack_from(isa, Source::Transposed(a_t), 1, bm, k, n, by_columns);
    }

    /// [`PackedRows::pack`] of `a` (as many blocks of as many rows as
    /// `like`, each of `k`) in `like`'s panels: the same ISA, width, tile
    /// and rows per panel, whatever `a`'s size, so that a thread owning
    /// some of `like`'s panels owns the same rows of `a`'s (a recurrent
    /// layer's team, whose members' shares are counted in `W_hh`'s panels,
    /// computes the input's product on `W_ih`'s too).
    pub fn pack_like(&mut self, like: &PackedRows, a: &[f32], k: usize) {
        let Some(isa) = like.isa else {
            panic!("PackedRows::pack_like of a value never packed")
        };
        let (blocks, bm, n) = (like.blocks, like.bm, like.n);
        assert_eq!(a.len(), blocks * bm * k, "A size");
        self.pack_from(isa, Source::Rows(a), blocks, bm, k, n, like.by_columns);
        debug_assert_eq!((self.mr, self.panels()), (like.mr, like.panels()));
    }

    /// Packs A from `src`. A panel is written in order, one column of its
    /// rows (`mr` floats) after another: from row-major A each column
    /// gathers one float of each of the panel's rows, whose cache lines
    /// stay in L1 for the next 15 columns; from A transposed it is one
    /// contiguous copy. (A row at a time, writing every `mr`-th float with
    /// a bounds-checked read each, took a quarter of a small LSTM's
    /// forward pass.) Large packs run on the pool's threads, a panel per
    /// task. Every float is written, padding rows as zeros, so the buffer
    /// is never cleared first.
    #[allow(clippy::too_many_arguments)]
    fn pack_from(
        &mut self,
        isa: Isa,
        src: Source,
        blocks: usize,
        bm: usize,
        k: usize,
        n: usize,
        by_columns: bool,
    ) {
        let isa = if isa.is_supported() { isa } else { Isa::Scalar };
        let by_columns = by_columns && isa != Isa::Scalar;
        let mr = match by_columns && !by_columns_whole(isa, n) {
            // Halves of the batch: the column tile of two vectors of rows.
            true => 2 * isa.f32_lanes(),
            false => panel_rows(isa, n),
        };
        debug_assert!(mr <= PANEL_MAX_ROWS, "see floats_for");
        let ppb = bm.div_ceil(mr);
        *self = PackedRows {
            isa: Some(isa),
            by_columns,
            mr,
            blocks,
            bm,
            k,
            n,
            data: std::mem::take(&mut self.data),
        };
        let len = blocks * ppb * k * mr;
        self.data.resize(len, 0.0);
        if len == 0 {
            return;
        }
        let fill = |(q, panel): (usize, &mut [f32])| {
            let (blk, r0) = (q / ppb, q % ppb * mr);
            let rows = mr.min(bm - r0);
            match src {
                Source::Rows(a) => {
                    let mut from: [&[f32]; PANEL_MAX_ROWS] = [&[]; PANEL_MAX_ROWS];
                    for (i, f) in from[..rows].iter_mut().enumerate() {
                        *f = &a[(blk * bm + r0 + i) * k..][..k];
                    }
                    // Whole panels on AVX-512, 16 columns at a time through
                    // registers (panels of 6 rows, or 16 x 16 blocks); the
                    // last `k % 16` columns as below.
                    #[allow(unused_mut)]
                    let mut done = 0;
                    #[cfg(target_arch = "x86_64")]
                    if isa == Isa::Avx512 && rows == mr && mr == super::simd::PANEL6_ROWS {
                        done = k - k % 16;
                        let six = from[..mr].try_into().expect("a panel's rows");
                        for c0 in (0..done).step_by(16) {
                            // SAFETY: an AVX-512 CPU (`isa` is supported,
                            // checked above); the panel holds `k·mr` floats,
                            // so the 16·mr of columns `c0..c0 + 16` are in it.
                            unsafe {
                                super::simd::panel6_16(six, c0, panel[c0 * mr..].as_mut_ptr())
                            };
                        }
                    }
                    #[cfg(target_arch = "x86_64")]
                    if isa == Isa::Avx512 && rows == mr && mr.is_multiple_of(16) {
                        done = k - k % 16;
                        for g in 0..mr / 16 {
                            let group: &[&[f32]; 16] =
                                from[g * 16..][..16].try_into().expect("16 rows");
                            for c0 in (0..done).step_by(16) {
                                let dst = panel[c0 * mr + g * 16..].as_mut_ptr();
                                // SAFETY: an AVX-512 CPU (`isa` is
                                // supported, checked above); the panel holds
                                // `k·mr` floats, so each of the 16 columns
                                // `c0..` has its 16 rows `g·16..` in it.
                                unsafe { super::simd::store_transposed_16x16(group, c0, dst, mr) };
                            }
                        }
                    }
                    for (c, out) in panel.chunks_exact_mut(mr).enumerate().skip(done) {
                        for (o, f) in out.iter_mut().zip(&from[..rows]) {
                            *o = f[c];
                        }
                        out[rows..].fill(0.0);
                    }
                }
                Source::Transposed(a_t) => {
                    for (c, out) in panel.chunks_exact_mut(mr).enumerate() {
                        out[..rows].copy_from_slice(&a_t[c * bm + r0..][..rows]);
                        out[rows..].fill(0.0);
                    }
                }
            }
        };
        if len >= PACK_PARALLEL_FLOATS && rayon::current_num_threads() > 1 {
            use rayon::prelude::*;
            self.data.par_chunks_mut(k * mr).enumerate().for_each(fill);
        } else {
            self.data.chunks_mut(k * mr).enumerate().for_each(fill);
        }
    }

    /// Whether products `n` columns wide with `a_floats` of A run on the
    /// tile whose vectors run along A's rows, broadcasting each column of
    /// B: a batch of at most half a vector (not on the scalar ISA); on
    /// AVX-512 up to a whole vector where A has at least
    /// [`HALVES_MIN_BYTES`], in halves of up to 8 columns, each panel's
    /// halves one after the other (its rows still in L1 or L2).
    pub fn runs_by_columns(isa: Isa, n: usize, a_floats: usize) -> bool {
        by_columns_whole(isa, n)
            || (isa == Isa::Avx512
                && (1..=isa.f32_lanes()).contains(&n)
                && 4 * a_floats >= HALVES_MIN_BYTES)
    }

    /// Floats this value holds room for.
    pub fn capacity(&self) -> usize {
        self.data.capacity()
    }

    /// Rows per panel.
    pub fn panel_rows(&self) -> usize {
        self.mr
    }

    /// Panels per block.
    pub fn panels(&self) -> usize {
        self.bm.div_ceil(self.mr.max(1))
    }

    /// Rows of one block.
    pub fn block_rows(&self) -> usize {
        self.bm
    }

    /// `C (+)= A·B` on the calling thread: B `k×n`, C `blocks·bm × n`.
    pub fn gemm(&self, b: &[f32], c: &mut [f32], accumulate: bool) {
        assert_eq!(c.len(), self.blocks * self.bm * self.n, "C size");
        // SAFETY: C is this call's alone, of the size checked.
        unsafe { self.gemm_panels(0..self.panels(), b, SendPtr(c.as_mut_ptr()), accumulate) }
    }

    /// The rows of panels `panels` of every block.
    ///
    /// # Safety
    /// `c` points at the whole `blocks·bm × n` output, and no other thread
    /// touches those rows meanwhile.
    pub(crate) unsafe fn gemm_panels(
        &self,
        panels: Range<usize>,
        b: &[f32],
        c: SendPtr,
        accumulate: bool,
    ) {
        let Some(isa) = self.isa else {
            panic!("PackedRows used before pack")
        };
        let (mr, k, n, bm) = (self.mr, self.k, self.n, self.bm);
        assert_eq!(b.len(), k * n, "B size");
        assert!(panels.end <= self.panels(), "panels");
        if n == 0 || bm == 0 {
            return;
        }
        let lanes = isa.f32_lanes();
        if self.by_columns {
            // Tiles by columns per panel: the whole batch where it is at
            // most half a vector, else its halves.
            let ppb = self.panels();
            let half = lanes / 2;
            // In halves, the reduction in blocks whose rows of the panel
            // (up to 128 KiB) stay in L2 for the second half.
            let kc = if n > half { HALVES_K_BLOCK } else { k.max(1) };
            for blk in 0..self.blocks {
                for p in panels.clone() {
                    let r0 = p * mr;
                    let a = self.data.as_ptr().add((blk * ppb + p) * k * mr);
                    // (An empty reduction still writes its zeros.)
                    for k0 in (0..k.max(1)).step_by(kc) {
                        for j0 in (0..n).step_by(half) {
                            let tile = Panel {
                                a: a.add(k0 * mr),
                                b: b.as_ptr().add(k0 * n + j0),
                                ldb: n,
                                kc: kc.min(k - k0),
                                c: c.get().add((blk * bm + r0) * n + j0),
                                ldc: n,
                                m: mr.min(bm - r0),
                                n: half.min(n - j0),
                                acc: accumulate || k0 > 0,
                            };
                            panel_by_columns(isa, &tile, mr);
                        }
                    }
                }
            }
            return;
        }
        let nr = if mr == panel_narrow_mr(isa) {
            lanes
        } else {
            tile(isa).1
        };
        // AVX2 has no cheap masked store (AMD microcodes `vmaskmovps` to
        // memory), so a batch that is not whole vectors runs on B padded
        // with zero columns, its last column tile through a buffer.
        let pad = isa == Isa::Avx2 && n % lanes != 0;
        let run = |bp: *const f32, ldb: usize, cols: usize| {
            let c = c.get();
            let ppb = self.panels();
            // Column tiles outermost: one tile's columns of B (`k x nr`)
            // stay in cache while every panel of A streams past them.
            for j0 in (0..cols).step_by(nr) {
                let nb = nr.min(cols - j0);
                let real = nb.min(n - j0);
                for blk in 0..self.blocks {
                    for p in panels.clone() {
                        let r0 = p * mr;
                        let valid = mr.min(bm - r0);
                        let row0 = blk * bm + r0;
                        let mut tile = Panel {
                            a: self.data.as_ptr().add((blk * ppb + p) * k * mr),
                            b: bp.add(j0),
                            ldb,
                            kc: k,
                            c: c.add(row0 * n + j0),
                            ldc: n,
                            m: valid,
                            n: nb,
                            acc: accumulate,
                        };
                        if real == nb {
                            panel(isa, &tile, mr);
                            continue;
                        }
                        // A padded tile: through a buffer of whole vectors.
                        let mut buf = [0f32; PANEL_NARROW_MAX * 16];
                        for i in 0..valid {
                            if accumulate {
                                let src = std::slice::from_raw_parts(tile.c.add(i * n), real);
                                buf[i * nb..][..real].copy_from_slice(src);
                            }
                        }
                        let out = tile.c;
                        tile.c = buf.as_mut_ptr();
                        tile.ldc = nb;
                        panel(isa, &tile, mr);
                        for i in 0..valid {
                            std::slice::from_raw_parts_mut(out.add(i * n), real)
                                .copy_from_slice(&buf[i * nb..][..real]);
                        }
                    }
                }
            }
        };
        if !pad {
            run(b.as_ptr(), n, n);
            return;
        }
        let np = n.next_multiple_of(lanes);
        // Tiles of AVX2 are at most 16 columns: the buffer above holds them.
        debug_assert!(nr <= 16);
        PADDED_B.with_borrow_mut(|pb| {
            pb.clear();
            pb.resize(k * np, 0.0);
            for (dst, src) in pb.chunks_exact_mut(np).zip(b.chunks_exact(n)) {
                dst[..n].copy_from_slice(src);
            }
            run(pb.as_ptr(), np, np);
        });
    }
}

/// `dst[c][r] = src[r][c]` for a `rows x cols` row-major `src`, where
/// `isa` is AVX-512: 16 x 16 blocks through registers
/// ([`super::simd::store_transposed_16x16`]), the last rows and columns
/// one float at a time. Each block of 16 columns walks every row before
/// the next, so that its 16 rows of `dst` (a page each, for a `W_ih` of
/// 1,024 rows) stay in the TLB: row blocks outside took 14% of a batch-1
/// h256 LSTM's forward, against 3-4% for packing the same weights.
/// Bands of 64 columns run on the pool's threads when large. Returns
/// false (and writes nothing) on other ISAs; panics where `dst` is not
/// `src`'s size, whatever the ISA.
pub fn transpose_avx512(isa: Isa, src: &[f32], rows: usize, cols: usize, dst: &mut [f32]) -> bool {
    assert_eq!(dst.len(), src.len(), "dst size");
    transpose_avx512_strided(isa, src, rows, cols, dst, rows)
}

/// Whether `len` floats hold `cols` rows of `rows` floats, `stride` apart
/// (the last row need not be followed by a whole stride); false where that
/// size would overflow. At least one row and column.
pub fn strided_fits(len: usize, rows: usize, cols: usize, stride: usize) -> bool {
    (cols - 1)
        .checked_mul(stride)
        .and_then(|n| n.checked_add(rows))
        .is_some_and(|n| len >= n)
}

/// [`transpose_avx512`] into rows of `dst` `stride` apart:
/// `dst[c·stride + r] = src[r][c]`, the floats between rows untouched.
pub fn transpose_avx512_strided(
    isa: Isa,
    src: &[f32],
    rows: usize,
    cols: usize,
    dst: &mut [f32],
    stride: usize,
) -> bool {
    if isa != Isa::Avx512 || !isa.is_supported() {
        return false;
    }
    assert_eq!(rows.checked_mul(cols), Some(src.len()), "src size");
    assert!(stride >= rows, "stride");
    if rows == 0 || cols == 0 {
        return true;
    }
    assert!(strided_fits(dst.len(), rows, cols, stride), "dst size");
    let out = SendPtr(dst.as_mut_ptr());
    let (whole_rows, band) = (rows - rows % 16, 64);
    let columns_of = |b: usize| {
        let c_end = ((b + 1) * band).min(cols);
        let mut c0 = b * band;
        while c0 < c_end {
            let n = 16.min(c_end - c0);
            #[cfg(target_arch = "x86_64")]
            if n == 16 {
                for r0 in (0..whole_rows).step_by(16) {
                    let from: [&[f32]; 16] =
                        std::array::from_fn(|i| &src[(r0 + i) * cols..][..cols]);
                    // SAFETY: an AVX-512 CPU (checked above); rows c0..c0+16
                    // of dst, `stride` apart, hold `rows` floats each (dst's
                    // length checked above), so the 16 writes of 16 at r0
                    // stay inside dst, and only this band writes those rows.
                    unsafe {
                        super::simd::store_transposed_16x16(
                            &from,
                            c0,
                            out.get().add(c0 * stride + r0),
                            stride,
                        )
                    };
                }
            }
            // The rows past whole blocks of 16, and the last columns.
            let first = match cfg!(target_arch = "x86_64") && n == 16 {
                true => whole_rows,
                false => 0,
            };
            for c in c0..c0 + n {
                for r in first..rows {
                    // SAFETY: inside dst (c < cols, r < rows), this band's.
                    unsafe { *out.get().add(c * stride + r) = src[r * cols + c] };
                }
            }
            c0 += n;
        }
    };
    let bands = cols.div_ceil(band);
    if rows * cols >= 1 << 18 && rayon::current_num_threads() > 1 {
        use rayon::prelude::*;
        (0..bands).into_par_iter().for_each(columns_of);
    } else {
        (0..bands).for_each(columns_of);
    }
    true
}

#[cfg(test)]
mod tests {
    use super::super::rows_gemm::tests::check_gemm;
    use super::*;

    #[test]
    fn avx512_transposes_match_the_plain_one() {
        let isa = Isa::Avx512;
        // A size past usize never fits; an empty shape moves nothing.
        assert!(!strided_fits(usize::MAX, 2, 3, usize::MAX / 2));
        assert!(strided_fits(7, 3, 2, 4) && !strided_fits(6, 3, 2, 4));
        if isa.is_supported() {
            for (rows, cols) in [(0, 5), (5, 0)] {
                let mut dst = [f32::NAN; 3];
                assert!(transpose_avx512_strided(isa, &[], rows, cols, &mut dst, 6));
                assert!(dst.iter().all(|v| v.is_nan()));
            }
        }
        let shapes = [
            (1, 1),
            (5, 40),
            (33, 16),
            (16, 16),
            (17, 33),
            (64, 48),
            (130, 70),
            (600, 520),
        ];
        for (rows, cols) in shapes {
            let src: Vec<f32> = (0..rows * cols).map(|i| i as f32).collect();
            // Packed rows, and rows 3 floats apart that keep the gap, in
            // the least room they need (no gap after the last row).
            for stride in [rows, rows + 3] {
                let mut dst = vec![f32::NAN; (cols - 1) * stride + rows];
                let done = if stride == rows {
                    transpose_avx512(isa, &src, rows, cols, &mut dst)
                } else {
                    transpose_avx512_strided(isa, &src, rows, cols, &mut dst, stride)
                };
                if !done {
                    assert!(!isa.is_supported());
                    return;
                }
                for c in 0..cols {
                    for r in 0..stride.min(dst.len() - c * stride) {
                        let got = dst[c * stride + r];
                        match r < rows {
                            true => assert_eq!(got, src[r * cols + c], "{rows}x{cols} at {r},{c}"),
                            false => assert!(got.is_nan(), "{rows}x{cols} gap at {r},{c}"),
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn every_isa_matches_the_reference_gemm() {
        // (blocks, bm, n, k): narrow and wide, whole and partial vectors,
        // blocks whose rows are not whole panels.
        let shapes = [
            (1, 1, 1, 1),
            (4, 7, 5, 3),
            (4, 33, 1, 20),
            (3, 40, 2, 9),
            (2, 17, 4, 12),
            (1, 70, 3, 5),
            (3, 13, 8, 20),
            (4, 25, 3, 40),
            (1, 64, 16, 9),
            (2, 37, 21, 33),
            (4, 30, 33, 17),
            (1, 50, 64, 10),
            // Whole panels of a batch of 1, 2, 4 or 8 (a column tile's rows
            // stored as rows through a transposition in registers: 1-8 on
            // AVX-512, 1-4 on AVX2), and a last panel that is not whole.
            (2, 128, 1, 9),
            (1, 128, 2, 11),
            (1, 96, 4, 7),
            (2, 72, 8, 20),
            // Whole panels packed 16 x 16 blocks at a time on AVX-512
            // (panels of 64 rows at a batch of 1; of 16 at 16), the last
            // columns one at a time.
            (2, 128, 1, 40),
            (1, 64, 16, 33),
            // AVX-512's narrow tile with a partial vector of columns (on
            // AVX2, the wide tile through its padded buffer).
            (2, 40, 12, 10),
            // Past PACK_PARALLEL_FLOATS (4·130 rows of 160): packed on the
            // pool, a panel per task, the blocks' last panels padded.
            (4, 130, 2, 160),
            // A of at least HALVES_MIN_BYTES (4·520 rows of 520): on
            // AVX-512, batches of 9 to 16 by columns in halves (8 + 1,
            // 8 + 5, 8 + 8).
            (4, 520, 9, 520),
            (2, 1040, 13, 520),
            (4, 520, 16, 520),
            // The reduction in blocks of HALVES_K_BLOCK (1024 + 1024 + 52).
            (1, 520, 11, 2100),
        ];
        const { assert!(4 * 520 * 520 * 4 >= HALVES_MIN_BYTES && 2100 > HALVES_K_BLOCK) };
        assert!(PackedRows::runs_by_columns(Isa::Avx512, 16, 4 * 520 * 520));
        assert!(!PackedRows::runs_by_columns(Isa::Avx512, 16, 4 * 520 * 500));
        for isa in [Isa::Avx512, Isa::Avx2, Isa::Scalar] {
            if !isa.is_supported() {
                continue;
            }
            let reused = RefCell::new(PackedRows::default());
            for &(blocks, bm, n, k) in shapes.iter().rev() {
                let m = blocks * bm;
                check_gemm(isa, m, n, k, |a, b, c, acc| {
                    let mut p = PackedRows::default();
                    p.pack(isa, a, blocks, bm, k, n);
                    p.gemm(b, c, acc);
                });
                // One value reused from shape to shape (larger, then
                // smaller): nothing stale survives, padding included.
                check_gemm(isa, m, n, k, |a, b, c, acc| {
                    let mut p = reused.borrow_mut();
                    p.pack(isa, a, blocks, bm, k, n);
                    p.gemm(b, c, acc);
                });
                // Packed from A transposed: the same product.
                check_gemm(isa, m, n, k, |a, b, c, acc| {
                    let mut a_t = vec![0.0; m * k];
                    for (i, row) in a.chunks_exact(k).enumerate() {
                        for (p, &v) in row.iter().enumerate() {
                            a_t[p * m + i] = v;
                        }
                    }
                    let mut p = PackedRows::default();
                    p.pack_transposed(isa, &a_t, m, k, n);
                    p.gemm(b, c, acc);
                });
                // Panel ranges cover the rows of every block they name.
                check_gemm(isa, m, n, k, |a, b, c, acc| {
                    let mut p = PackedRows::default();
                    p.pack(isa, a, blocks, bm, k, n);
                    let half = p.panels() / 2;
                    for r in [0..half, half..p.panels()] {
                        // SAFETY: the two ranges write disjoint rows, one
                        // after the other.
                        unsafe { p.gemm_panels(r, b, SendPtr(c.as_mut_ptr()), acc) };
                    }
                });
            }
        }
    }
}

/// Interleaved timing of the packed GEMM, the unpacked one and the `gemm`
/// crate on the recurrent layers' small per-step shapes (`gates·h × mb ×
/// h`), one thread, on the detected ISA or `CNNBENCH_ISA`'s:
/// `cargo test -p cnnbench-kernels --release packed_rows_beside_rows_gemm -- --ignored --nocapture`.
/// (On the Zen 5, AVX2 kernels: the column tiles' rows stored through
/// the transposition in registers took 512x4x128 from 107 to 119 GFLOP/s,
/// 512x2x128 from 106 to 120, 512x1x128 from 62 to 70.)
#[cfg(test)]
#[test]
#[ignore]
fn packed_rows_beside_rows_gemm() {
    use super::rows_gemm;
    use crate::clock::Stopwatch;
    let isa = std::env::var("CNNBENCH_ISA")
        .ok()
        .and_then(|v| Isa::parse(&v))
        .filter(|i| i.is_supported())
        .unwrap_or_else(Isa::detect);
    // One thread, as a member of a team runs it.
    let one = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .unwrap();
    for (m, n, k) in [
        (512, 1, 128),
        (1024, 1, 256),
        (512, 2, 128),
        (512, 4, 128),
        (512, 8, 128),
        (256, 16, 64),
        (1024, 16, 256),
        (512, 32, 128),
        (2048, 32, 512),
    ] {
        let a = vec![0.5f32; m * k];
        let b = vec![0.25f32; k * n];
        let mut c = vec![0.0f32; m * n];
        let mut p = PackedRows::default();
        p.pack(isa, &a, 1, m, k, n);
        let reps = (1usize << 26) / (m * n * k) + 3;
        let s = crate::gemm::GemmShape {
            m,
            n,
            k,
            trans_a: false,
            trans_b: false,
        };
        // Medians over rounds of: packed, rows_gemm, the gemm crate.
        let mut us = [Vec::new(), Vec::new(), Vec::new()];
        for round in 0..8 {
            for v in [0, 1, 2] {
                let v = if round % 2 == 0 { v } else { 2 - v };
                let t0 = Stopwatch::start();
                for _ in 0..reps {
                    match v {
                        0 => p.gemm(&b, &mut c, true),
                        1 => one.install(|| rows_gemm(isa, m, n, k, &a, &b, &mut c, true)),
                        _ => one.install(|| crate::gemm::sgemm_acc(isa, &s, &a, &b, &mut c, true)),
                    }
                }
                us[v].push(t0.elapsed_s() * 1e6 / reps as f64);
            }
        }
        let [o, r, g] = us.map(|mut v| {
            v.sort_by(f64::total_cmp);
            v[4]
        });
        let gflops = 2.0 * (m * n * k) as f64 / o / 1e3;
        println!(
            "{m}x{n}x{k}: packed {o:.1} us ({gflops:.0} GFLOP/s), rows_gemm {r:.1} us, gemm crate {g:.1} us"
        );
    }
}
