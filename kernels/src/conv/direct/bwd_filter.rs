//! Backward-filter: outer products reduced over runs of output pixels.
//!
//! `diff_wei[g][r][s][c][k] = Σ_{n,oh,ow} src[n,ih,iw,c] · diff_dst[n,oh,ow,k]`.
//! For a fixed tap `(r, s)` the output columns whose input column lies
//! inside the image form one range `[lo, hi)`, the same for every output
//! row; each valid output row then contributes a run of `hi − lo` pixels
//! whose `src` and `diff_dst` addresses advance with fixed steps. A tile is
//! `MR` input channels x `NR` output channels of one tap, kept in registers
//! over all the runs of a block of rows, then added to memory.
//!
//! Work is split over `(group, oc block)` tiles first; when those are too few
//! (typically early layers: small weights, many pixels) the pixel rows are
//! split too, and each such item adds into one of a few per-thread partial
//! sums ([`Slots`]) that are reduced at the end. When the weights outweigh
//! the activations (late layers), items instead take ranges of oc blocks,
//! taps and ic tiles, chosen so that they stream the least src and
//! diff_dst between them.

use super::ukernel::{self, Bwdw, ColSum};
use super::util::{
    aligned_bytes, pushed_bytes, split, target_items, Ahead, AlignedBuf, Slots, SyncPtr,
};
use crate::conv::{ConvArgs, ConvPlan, ConvShape};
use crate::Isa;
use rayon::prelude::*;

/// Most output rows per block (the run tables live on the stack).
const RMAX: usize = 32;
// A block's rows each push one set of diff_dst and one of src.
const _: () = assert!(2 * RMAX <= super::util::AHEAD_SETS);

/// Most bytes a block prefetches for the next one (as `Ahead::bytes`
/// bounds them). More evicts the block's own working set (on the Zen 5
/// measured, a T1 hint ran as T0, so the lines seem to land in L1): with
/// 56-168 KiB a block, 1x1 layers at 56x56 measured 1.04-1.20x; with 336
/// KiB (512 channels in, 28x28), 0.91x.
const AHEAD_MAX_BYTES: usize = 192 << 10;
/// Aim for about this many pixels per block of rows: enough to amortise
/// loading and storing each tile, few enough that the block's src and
/// diff_dst stay in L1/L2 while every tile consumes it.
const BLOCK_PIXELS: usize = 128;

/// The ranges [`BwdFilterPlan::chunks`] splits the work into.
struct Chunks {
    kbs: Vec<(usize, usize)>,
    taps: Vec<(usize, usize)>,
    cts: Vec<(usize, usize)>,
    rows: Vec<(usize, usize)>,
}

struct Item {
    /// Output rows `(n, oh)` flattened.
    rows: (usize, usize),
    g: usize,
    /// Output-channel blocks (units of `NR`).
    kb: (usize, usize),
    taps: (usize, usize),
    /// Input-channel tiles (units of `MR`).
    ct: (usize, usize),
    /// Also sums diff_bias for `(g, kb)` over `rows`.
    bias: bool,
}

pub(super) struct BwdFilterPlan {
    p: ConvShape,
    isa: Isa,
    mr: usize,
    nr: usize,
    rows_per_block: usize,
    items: Vec<Item>,
    /// Partial sums (`wei_len + oc` each) when pixel rows are split.
    slots: Option<Slots>,
    /// Per-thread buffers: the block's diff_dst, packed `rows_per_block *
    /// ow * nr` per oc block of the item (up to `max_kbs`), then (when
    /// `lda > 0`) the block's src pixels for one tap.
    pack: Slots,
    /// Pixel stride of the packed src, or 0 to read src in place. In place,
    /// a run's pixels are `sw * ic` floats apart; when that is a multiple of
    /// 4 KiB they all fall into one L1 set and evict each other before the
    /// next channel tile re-reads their lines, so they are copied to a
    /// stride that spreads them over all sets (measured: +10% on 512
    /// channels at stride 2; at 1-2 KiB strides the copy costs more than
    /// it saves).
    lda: usize,
    /// Most oc blocks in one item (packed diff_dst blocks per slot).
    max_kbs: usize,
    /// Prefetch each block's diff_dst during the block before it: set when
    /// src and diff_dst together outgrow the cache counted on, so that they
    /// stream from DRAM. (When they fit, the prefetched lines only evict
    /// the block's working set from L1: 0.90-0.96x on 7x7 and 14x14 1x1
    /// layers, against 1.04-1.20x on 56x56 ones, in ABBA rounds.)
    prefetch: bool,
    /// Prefetch the src pixels too: a 1x1 kernel at stride 1, whose runs
    /// are contiguous. (At stride 2, 0.87x.)
    prefetch_src: bool,
}

impl BwdFilterPlan {
    /// The bytes [`BwdFilterPlan::new`] allocates (see
    /// [`ConvAlgo::workspace_bound`](crate::conv::ConvAlgo::workspace_bound)),
    /// its calls allocating none: the items, a partial diff_wei per thread
    /// when the rows are split, and a pack buffer per thread.
    pub(super) fn bytes_bound(p: &ConvShape, isa: Isa) -> u128 {
        let (_, nr) = ukernel::tile(isa);
        let u = |v: usize| v as u128;
        let threads = rayon::current_num_threads().max(1);
        let c = Self::chunks(p, isa);
        let items = u(c.rows.len() * p.g * c.kbs.len() * c.taps.len() * c.cts.len());
        let max_kbs = c.kbs.iter().map(|&(a, b)| b - a).max().unwrap_or(1);
        let slot =
            |n: usize, len: u128| pushed_bytes::<AlignedBuf>(u(n)) + u(n) * aligned_bytes(len);
        let partials = match c.rows.len() {
            1 => 0,
            parts => slot(threads.min(parts), u(p.wei_len() + p.oc)),
        };
        let pack = u(Self::rows_per_block(p) * p.ow) * u(nr * max_kbs + Self::lda(p));
        let splits = 16 * u(c.rows.len() + c.kbs.len() + c.taps.len() + c.cts.len());
        u(std::mem::size_of::<Item>()) * items + partials + slot(threads, pack) + splits
    }

    /// Output rows per pack of diff_dst.
    fn rows_per_block(p: &ConvShape) -> usize {
        (BLOCK_PIXELS / p.ow).clamp(1, RMAX)
    }

    /// The row stride of a packed src block, where rows one 4 KiB page apart
    /// would alias in L1 (0: not packed).
    fn lda(p: &ConvShape) -> usize {
        if (p.sw * p.ic).is_multiple_of(1024) {
            p.icg().next_multiple_of(16) + 16
        } else {
            0
        }
    }

    /// How the work splits: chunks of output-channel blocks, of taps and
    /// of input-channel tiles, and parts of the output rows (each part
    /// past the first adds into its own partial diff_wei).
    fn chunks(p: &ConvShape, isa: Isa) -> Chunks {
        let (mr, nr) = ukernel::tile(isa);
        let (icg, ocg, taps) = (p.icg(), p.ocg(), p.taps());
        let rows = p.mb * p.oh;
        let nkb = ocg.div_ceil(nr);
        let nct = icg.div_ceil(mr);
        let tiles = p.g * nkb;
        let target = target_items();
        let threads = rayon::current_num_threads().max(1);
        // Partial sums cost (zeroing + reducing) about 2 x slots x weights;
        // splitting tiles instead re-reads the activations once per item.
        let wei_bytes = p.wei_len() * 4;
        let act_bytes = (p.src_len() + p.dst_len()) * 4;
        let (mut kchunks, mut tchunks, mut cchunks, mut parts) = (nkb, 1, 1, 1);
        if tiles < target {
            if 2 * threads * wei_bytes <= act_bytes {
                parts = target.div_ceil(tiles).min(rows);
            } else {
                // Split oc blocks, taps and ic tiles so that the items
                // stream the least activation data: an item re-reads its
                // channels of src for each of its taps chunks, and packs
                // its oc blocks of diff_dst once per taps chunk.
                let (src_b, dst_b) = (p.src_len() as f64, p.dst_len() as f64);
                let mut best = (f64::INFINITY, kchunks, tchunks, cchunks);
                for kc in 1..=nkb {
                    for tc in 1..=taps {
                        let cc = target.div_ceil(p.g * kc * tc);
                        if cc > nct {
                            continue;
                        }
                        let traffic = tc as f64 * (kc as f64 * src_b + cc as f64 * dst_b);
                        if traffic < best.0 {
                            best = (traffic, kc, tc, cc);
                        }
                    }
                }
                if best.0.is_finite() {
                    (kchunks, tchunks, cchunks) = (best.1, best.2, best.3);
                } else {
                    kchunks = nkb;
                    tchunks = target.div_ceil(tiles).min(taps);
                    cchunks = target.div_ceil(tiles * tchunks).min(nct);
                }
                if p.g * kchunks * tchunks * cchunks * 2 < target {
                    parts = target.div_ceil(p.g * kchunks * tchunks * cchunks).min(rows);
                }
            }
        }
        Chunks {
            kbs: split(nkb, kchunks, 1),
            taps: split(taps, tchunks, 1),
            cts: split(nct, cchunks, 1),
            rows: split(rows, parts, 1),
        }
    }

    pub(super) fn new(p: &ConvShape, isa: Isa) -> Self {
        let (mr, nr) = ukernel::tile(isa);
        let taps = p.taps();
        let threads = rayon::current_num_threads().max(1);
        let act_bytes = (p.src_len() + p.dst_len()) * 4;
        let Chunks {
            kbs,
            taps: tsplit,
            cts,
            rows: rsplit,
        } = Self::chunks(p, isa);
        let parts = rsplit.len();
        let max_kbs = kbs.iter().map(|&(a, b)| b - a).max().unwrap_or(1);
        let mut items =
            Vec::with_capacity(rsplit.len() * p.g * kbs.len() * tsplit.len() * cts.len());
        for &rr in &rsplit {
            for g in 0..p.g {
                for &kb in &kbs {
                    for &tr in &tsplit {
                        for &ct in &cts {
                            let bias = tr.0 == 0 && ct.0 == 0;
                            items.push(Item {
                                rows: rr,
                                g,
                                kb,
                                taps: tr,
                                ct,
                                bias,
                            });
                        }
                    }
                }
            }
        }
        let slots = (parts > 1).then(|| Slots::new(threads.min(parts), p.wei_len() + p.oc));
        let (rows_per_block, lda) = (Self::rows_per_block(p), Self::lda(p));
        let pack = Slots::new(threads, rows_per_block * p.ow * (nr * max_kbs + lda));
        let prefetch = act_bytes as u64 > crate::bandwidth::cache_bytes();
        let prefetch_src = prefetch && taps == 1 && p.sw == 1;
        BwdFilterPlan {
            p: *p,
            isa,
            mr,
            nr,
            rows_per_block,
            lda,
            max_kbs,
            items,
            slots,
            pack,
            prefetch,
            prefetch_src,
        }
    }

    /// Output columns `[lo, hi)` whose input column for kernel column `s`
    /// is inside the image (empty when `lo >= hi`).
    fn col_range(&self, s: usize) -> (usize, usize) {
        let p = &self.p;
        let off = s * p.dil_w();
        let lo = p.pw.saturating_sub(off).div_ceil(p.sw);
        let hi = if p.iw + p.pw > off {
            ((p.iw - 1 + p.pw - off) / p.sw + 1).min(p.ow)
        } else {
            0
        };
        (lo.min(p.ow), hi)
    }

    /// The input column that output column `ow` reads through kernel
    /// column `s`; `ow` at least `col_range(s).0`, so it is inside.
    fn in_col(&self, s: usize, ow: usize) -> usize {
        let p = &self.p;
        ow * p.sw + s * p.dil_w() - p.pw
    }

    /// Prefetches of what the item's block of output rows `next` reads
    /// (none unless the plan streams from DRAM, or past the item's rows):
    /// its diff_dst, which the block packs before any arithmetic, and with
    /// `prefetch_src` its src pixels. (With more taps, consecutive blocks
    /// share input rows and most src is already cached.) Spread over the
    /// micro-kernel calls of the block before it.
    fn prefetch_next(
        &self,
        it: &Item,
        src: &[f32],
        diff_dst: &[f32],
        next: (usize, usize),
    ) -> Option<Ahead> {
        if !self.prefetch || next.0 >= next.1 {
            return None;
        }
        let p = &self.p;
        let (icg, ocg) = (p.icg(), p.ocg());
        let mut ahead = Ahead::new();
        let k0 = it.kb.0 * self.nr;
        let kn = (it.kb.1 * self.nr).min(ocg) - k0;
        let c0 = it.ct.0 * self.mr;
        let cn = (it.ct.1 * self.mr).min(icg) - c0;
        let (lo, hi) = self.col_range(0);
        for row in next.0..next.1 {
            let (img, oh) = (row / p.oh, row % p.oh);
            let at = p.dst_idx(img, oh, 0, it.g * ocg + k0);
            ahead.push(diff_dst.as_ptr().wrapping_add(at), p.ow, p.oc, kn);
            if self.prefetch_src && lo < hi {
                if let Some(ih) = p.in_row(oh, 0) {
                    let iw = self.in_col(0, lo);
                    let at = p.src_idx(img, ih, iw, it.g * icg + c0);
                    ahead.push(src.as_ptr().wrapping_add(at), hi - lo, p.sw * p.ic, cn);
                }
            }
        }
        if ahead.bytes() > AHEAD_MAX_BYTES {
            return None;
        }
        let calls = (it.taps.1 - it.taps.0) * (it.kb.1 - it.kb.0) * (it.ct.1 - it.ct.0);
        ahead.spread(calls);
        Some(ahead)
    }

    /// Computes one work item into `dw` (`wei_len` weights then `oc` bias).
    ///
    /// # Safety
    /// `src`/`diff_dst` must fit `self.p`; `dw` must be valid for
    /// `wei_len` floats and `db` (if non-null) for `oc`; no other item may
    /// touch this item's tiles at the same time. `acc` says `dw`/`db`
    /// already hold sums to add to.
    /// `pack` is this item's private buffer of `rows_per_block * ow * nr`.
    #[allow(clippy::too_many_arguments)]
    unsafe fn run(
        &self,
        it: &Item,
        src: &[f32],
        diff_dst: &[f32],
        dw: *mut f32,
        db: *mut f32,
        acc: bool,
        pack: *mut f32,
    ) {
        let p = &self.p;
        let (mr, nr) = (self.mr, self.nr);
        let (icg, ocg) = (p.icg(), p.ocg());
        let g = it.g;
        // Packed diff_dst of oc block kb, and its columns.
        let bstride = self.rows_per_block * p.ow * nr;
        let bpack = |kb: usize| pack.add((kb - it.kb.0) * bstride);
        let cols = |kb: usize| (kb * nr, nr.min(ocg - kb * nr));
        let mut runs = [(0usize, 0usize); RMAX];
        let mut bruns = [0usize; RMAX];
        if it.bias && !db.is_null() && !acc {
            for kb in it.kb.0..it.kb.1 {
                let (k0, n) = cols(kb);
                std::ptr::write_bytes(db.add(g * ocg + k0), 0, n);
            }
        }
        for (bi, r0) in (it.rows.0..it.rows.1)
            .step_by(self.rows_per_block)
            .enumerate()
        {
            let r1 = (r0 + self.rows_per_block).min(it.rows.1);
            let first = bi == 0 && !acc;
            let mut ahead = self.prefetch_next(
                it,
                src,
                diff_dst,
                (r1, (r1 + self.rows_per_block).min(it.rows.1)),
            );
            // The block's diff_dst channels k0..k0+n, packed NR-wide and
            // contiguous: in place their rows are `oc` apart and a block
            // would map onto a fraction of L1's sets.
            for kb in it.kb.0..it.kb.1 {
                let (k0, n) = cols(kb);
                for (j, row) in (r0..r1).enumerate() {
                    let from =
                        diff_dst
                            .as_ptr()
                            .add(p.dst_idx(row / p.oh, row % p.oh, 0, g * ocg + k0));
                    for ow in 0..p.ow {
                        std::ptr::copy_nonoverlapping(
                            from.add(ow * p.oc),
                            bpack(kb).add((j * p.ow + ow) * nr),
                            n,
                        );
                    }
                }
                if it.bias && !db.is_null() {
                    for (j, br) in bruns.iter_mut().enumerate().take(r1 - r0) {
                        *br = j * p.ow * nr;
                    }
                    let k = ColSum {
                        b: bpack(kb),
                        runs: bruns.as_ptr(),
                        nruns: r1 - r0,
                        len: p.ow,
                        sb: nr,
                        out: db.add(g * ocg + k0),
                        n,
                    };
                    ukernel::colsum(self.isa, &k);
                }
            }
            for t in it.taps.0..it.taps.1 {
                let (r, s) = (t / p.kw, t % p.kw);
                let (lo, hi) = self.col_range(s);
                let mut nruns = 0;
                if lo < hi {
                    let iw_lo = self.in_col(s, lo);
                    for (j, row) in (r0..r1).enumerate() {
                        let (img, oh) = (row / p.oh, row % p.oh);
                        if let Some(ih) = p.in_row(oh, r) {
                            runs[nruns] =
                                (p.src_idx(img, ih, iw_lo, g * icg), (j * p.ow + lo) * nr);
                            nruns += 1;
                        }
                    }
                }
                let len = hi.saturating_sub(lo);
                // Where channel c0 of the runs' pixels starts, given c0.
                let (mut abase, mut cb, mut sa) = (src.as_ptr(), 0, p.sw * p.ic);
                if self.lda > 0 {
                    // Copy this item's channels of the runs' pixels.
                    cb = it.ct.0 * mr;
                    let nch = (it.ct.1 * mr).min(icg) - cb;
                    let apack = pack.add(self.max_kbs * bstride);
                    for (q, run) in runs.iter_mut().enumerate().take(nruns) {
                        let from = src.as_ptr().add(run.0 + cb);
                        for pp in 0..len {
                            std::ptr::copy_nonoverlapping(
                                from.add(pp * sa),
                                apack.add((q * len + pp) * self.lda),
                                nch,
                            );
                        }
                        run.0 = q * len * self.lda;
                    }
                    // Channel c0 of a packed pixel sits at c0 - cb.
                    abase = apack;
                    sa = self.lda;
                }
                for kb in it.kb.0..it.kb.1 {
                    let (k0, n) = cols(kb);
                    for ct in it.ct.0..it.ct.1 {
                        let c0 = ct * mr;
                        let k = Bwdw {
                            a: abase.add(c0 - cb),
                            b: bpack(kb),
                            runs: runs.as_ptr(),
                            nruns,
                            len,
                            sa,
                            sb: nr,
                            c: dw.add(p.wei_idx(g, r, s, c0, k0)),
                            ldc: ocg,
                            n,
                            acc: !first,
                        };
                        if let Some(a) = &mut ahead {
                            a.step();
                        }
                        ukernel::bwdw(self.isa, &k, mr.min(icg - c0));
                    }
                }
            }
        }
    }
}

impl ConvPlan for BwdFilterPlan {
    fn workspace_bytes(&self) -> usize {
        self.slots.as_ref().map_or(0, Slots::bytes)
            + self.pack.bytes()
            + self.items.len() * std::mem::size_of::<Item>()
    }

    fn kernel_name(&self) -> String {
        format!(
            "{}_conv_bwd_filter_f32_{}x{}",
            self.isa.name(),
            self.mr,
            self.nr
        )
    }

    fn execute(&mut self, args: ConvArgs<'_>) {
        args.assert_fits(&self.p);
        let ConvArgs::BwdFilter {
            src,
            diff_dst,
            diff_wei,
            diff_bias,
        } = args
        else {
            panic!("backward-filter plan run with {} tensors", args.direction());
        };
        let wei_len = self.p.wei_len();
        let oc = self.p.oc;
        let this = &*self;
        match &this.slots {
            None => {
                let dw = SyncPtr::new(diff_wei);
                let db = match diff_bias {
                    Some(b) => SyncPtr::new(b),
                    None => SyncPtr::null(),
                };
                // SAFETY: sizes checked above; items own disjoint tiles of
                // diff_wei (and disjoint channels of diff_bias).
                this.items.par_iter().for_each(|it| {
                    this.pack.with(|pack| unsafe {
                        this.run(it, src, diff_dst, dw.get(), db.get(), false, pack)
                    })
                });
            }
            Some(slots) => {
                let len = slots.len();
                (0..slots.count()).into_par_iter().for_each(|i| {
                    // SAFETY: each slot is zeroed by one task, before any item runs.
                    unsafe { std::ptr::write_bytes(slots.ptr(i), 0, len) }
                });
                let want_bias = diff_bias.is_some();
                // Always claim `pack` before a slot, so that threads waiting
                // for one never hold the other in the opposite order.
                this.items.par_iter().for_each(|it| {
                    this.pack.with(|pack| {
                        slots.with(|buf| {
                            let db = if want_bias {
                                unsafe { buf.add(wei_len) }
                            } else {
                                std::ptr::null_mut()
                            };
                            // SAFETY: sizes checked above; `with` gives this
                            // item sole use of `buf` (`wei_len + oc` floats)
                            // and of `pack`.
                            unsafe { this.run(it, src, diff_dst, buf, db, true, pack) }
                        })
                    })
                });
                reduce(slots, 0, &mut diff_wei[..wei_len]);
                if let Some(b) = diff_bias {
                    reduce(slots, wei_len, &mut b[..oc]);
                }
            }
        }
    }
}

/// `out[i] = Σ_slots slot[off + i]`, in parallel over chunks.
fn reduce(slots: &Slots, off: usize, out: &mut [f32]) {
    const CHUNK: usize = 4096;
    out.par_chunks_mut(CHUNK)
        .enumerate()
        .for_each(|(ci, chunk)| {
            let base = off + ci * CHUNK;
            for s in 0..slots.count() {
                // SAFETY: every item has finished; the slot holds
                // `off + out.len()` floats, and nothing writes it now.
                let part =
                    unsafe { std::slice::from_raw_parts(slots.ptr(s).add(base), chunk.len()) };
                if s == 0 {
                    chunk.copy_from_slice(part);
                } else {
                    for (d, x) in chunk.iter_mut().zip(part) {
                        *d += x;
                    }
                }
            }
        });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conv::reference;
    use crate::rng::fill_uniform;

    /// `ih` x 136 pixels: rows of more than `BLOCK_PIXELS`, so every row is
    /// a block and an item of several rows prefetches for its next ones.
    fn shape(ic: usize, oc: usize, ih: usize, k: usize, stride: usize) -> ConvShape {
        let pad = k / 2;
        let o = |i: usize| (i + 2 * pad - k) / stride + 1;
        ConvShape {
            mb: 2,
            g: 1,
            ic,
            ih,
            iw: 136 * stride,
            oc,
            oh: o(ih),
            ow: o(136 * stride),
            kh: k,
            kw: k,
            sh: stride,
            sw: stride,
            ph: pad,
            pw: pad,
            dh: 0,
            dw: 0,
        }
    }

    /// Prefetching the next block (forced on: these tensors are far smaller
    /// than any cache) walks its own addresses and leaves the result the
    /// reference's, with and without src, at strides 1 and 2 and with taps.
    #[test]
    fn prefetching_ahead_keeps_the_result() {
        for (p, src_too) in [
            (shape(24, 40, 40, 1, 1), true),
            (shape(16, 70, 64, 1, 2), false),
            (shape(8, 20, 40, 3, 1), false),
        ] {
            let mut src = vec![0f32; p.src_len()];
            let mut dy = vec![0f32; p.dst_len()];
            fill_uniform(&mut src, 1, 1.0);
            fill_uniform(&mut dy, 2, 1.0);
            let mut want = vec![0f32; p.wei_len()];
            let mut want_b = vec![0f32; p.oc];
            reference::bwd_filter(&p, &src, &dy, &mut want, Some(&mut want_b));
            for isa in Isa::ALL.into_iter().filter(|i| i.is_supported()) {
                // One thread: 16 items of the 2 * oh rows, several each.
                let pool = rayon::ThreadPoolBuilder::new()
                    .num_threads(1)
                    .build()
                    .unwrap();
                let mut plan = pool.install(|| BwdFilterPlan::new(&p, isa));
                (plan.prefetch, plan.prefetch_src) = (true, src_too);
                let mut got = vec![f32::NAN; p.wei_len()];
                let mut got_b = vec![f32::NAN; p.oc];
                pool.install(|| {
                    plan.execute(ConvArgs::BwdFilter {
                        src: &src,
                        diff_dst: &dy,
                        diff_wei: &mut got,
                        diff_bias: Some(&mut got_b),
                    })
                });
                let e = reference::rel_l2_error(&got, &want);
                let eb = reference::rel_l2_error(&got_b, &want_b);
                assert!(e < 1e-5 && eb < 1e-5, "{p:?} {isa}: {e} {eb}");
            }
        }
    }
}
