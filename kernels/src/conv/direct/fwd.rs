//! Forward: indirect GEMM over output pixels.
//!
//! The output is a `[pixels][oc]` matrix. A tile is `MR` consecutive pixels
//! (any mix of rows and images: each pixel gets its own input pointer per
//! tap, or, where all its taps are inside the input, one pointer moved by
//! an offset per tap) times `NR` output channels of one group; the
//! reduction runs over taps and the group's input channels. Where the
//! padding would take 4% or more of the pixel-taps (small images), tiles
//! instead take pixels that share their taps inside the input and run only
//! those ([`TapTiles`]). Each
//! call first repacks the weights (in parallel, reading them in order)
//! into contiguous `(ic/g) x NR` panels per oc block and tap, so a pass
//! reads one sequential block (cost: O(weights) per call, against
//! O(weights x pixels) FLOPs).

use super::ukernel::{self, BlockRun, Init, Reach, MRMAX, TMAX};
use super::util::{
    aligned_bytes, fill_tile, grid, grid_items_bound, pixel_of, pushed_bytes, split, target_items,
    AlignedBuf, Origin, PixelWalk, SyncPtr, TapTiles,
};
use crate::conv::{ConvArgs, ConvPlan, ConvShape};
use crate::Isa;
use rayon::prelude::*;
use std::ptr;

/// Pixels `px` times flattened `(group, oc block)` range `blk`; with
/// [`TapTiles`], `px` is a range of its tiles instead.
struct Item {
    px: (usize, usize),
    blk: (usize, usize),
}

/// The range `[lo, hi)` of kernel taps `0..k` that land inside `0..size`
/// for an output at `o` (stride `st`, padding `pad`, dilation `dil`).
fn valid_taps(
    o: usize,
    st: usize,
    pad: usize,
    dil: usize,
    k: usize,
    size: usize,
) -> (usize, usize) {
    let at = |t: usize| (o * st + t * dil) as isize - pad as isize;
    let lo = (0..k).find(|&t| at(t) >= 0).unwrap_or(k);
    let hi = (lo..k).find(|&t| at(t) >= size as isize).unwrap_or(k);
    (lo, hi)
}

/// The forward's tap masks: a tap `t = r·kw + s` is inside for output
/// `(oh, ow)` when both its row and its column land in the input.
fn tap_mask(p: &ConvShape) -> impl Fn(usize, usize) -> u64 + '_ {
    let rows: Vec<_> = (0..p.oh)
        .map(|o| valid_taps(o, p.sh, p.ph, p.dil_h(), p.kh, p.ih))
        .collect();
    let cols: Vec<_> = (0..p.ow)
        .map(|o| valid_taps(o, p.sw, p.pw, p.dil_w(), p.kw, p.iw))
        .collect();
    move |y, x| {
        let ((r0, r1), (s0, s1)) = (rows[y], cols[x]);
        (r0..r1)
            .flat_map(|r| (s0..s1).map(move |s| r * p.kw + s))
            .fold(0u64, |m, t| m | 1 << t)
    }
}

/// The forward's [`TapTiles`].
fn tap_tiles(p: &ConvShape, mr: usize) -> Option<TapTiles> {
    TapTiles::new((p.mb, p.oh, p.ow), p.taps(), mr, tap_mask(p))
}

/// Most input channels for which a kernel row's taps are merged into one
/// (see [`FwdPlan::wide`]).
const MERGE_MAX_IC: usize = 8;

/// Whether `p`'s kernel rows are merged into one tap each: one group, no
/// dilation along W, a kernel wider than one, few input channels, and
/// every window inside the padded width (a shape may ask for more output
/// columns than that, reading zeros past the input; the flat path points
/// those columns at the zero row, the merged one has no column to test).
fn merge_rows(p: &ConvShape) -> bool {
    p.g == 1
        && p.dw == 0
        && p.kw > 1
        && p.ic <= MERGE_MAX_IC
        && p.ow > 0
        && (p.ow - 1) * p.sw + p.kw <= p.iw + 2 * p.pw
}

pub(super) struct FwdPlan {
    p: ConvShape,
    isa: Isa,
    mr: usize,
    nr: usize,
    /// `ic/g` zeros: what a tap in the padding reads.
    zero: AlignedBuf,
    items: Vec<Item>,
    /// Tiles of pixels that read the same taps, where that saves work.
    classes: Option<TapTiles>,
    /// With few input channels (ResNet's stem: 3), the input copied with
    /// its padding along W written out as zeros, `[n][ih][iw + 2pw][ic]`:
    /// a kernel row's `kw` taps then read `kw·ic` consecutive floats, so
    /// the row is one tap of `kw·ic` channels (7 taps of 21 for a 7x7 stem,
    /// not 49 of 3), and the packed weights are already in that order.
    wide: Option<AlignedBuf>,
    /// Taps and input channels per pass over an item's pixels: one pass
    /// uses a `tb x kc x NR` block of weights small enough to stay in L2
    /// while every tile of the item reuses it.
    tb: usize,
    kc: usize,
    /// Oc blocks per pass over a tile of pixels: their weights share the
    /// L2 budget, and the tile's input pointers are set up once for all.
    bg: usize,
    /// The weights repacked once per call as `[g][oc block][tap][ic/g][nr]`:
    /// each pass's block is then contiguous (read in place with a row stride
    /// of `oc/g` floats, a block maps onto a fraction of L1's sets and its
    /// rows, a page apart, defeat the prefetchers).
    pack: AlignedBuf,
    /// Whether the last pass stores the output non-temporally: it is more
    /// than half the cache counted on, so that a plain store would first read
    /// each line from memory (ResNet-50's stem writes 51 MB at batch 16).
    streams: bool,
}

impl FwdPlan {
    /// Most bytes [`FwdPlan::new`] allocates (see
    /// [`ConvAlgo::workspace_bound`](crate::conv::ConvAlgo::workspace_bound)),
    /// its calls allocating none: the wide input or the tap tiles, the
    /// packed weights and the items.
    pub(super) fn bytes_bound(p: &ConvShape, isa: Isa) -> u128 {
        let (mr, nr) = ukernel::tile(isa);
        let u = |v: usize| v as u128;
        let pixels = u(p.mb) * u(p.oh) * u(p.ow);
        let blocks = u(p.g) * u(p.ocg().div_ceil(nr));
        let (ahead, units) = if merge_rows(p) {
            let wide = u(p.mb) * u(p.ih) * (u(p.iw) + 2 * u(p.pw)) * u(p.ic);
            (aligned_bytes(wide), pixels.div_ceil(u(mr)))
        } else {
            // The tap tiles, and the rows and columns of taps they are
            // made from.
            let plane = p.oh * p.ow;
            let tiles = TapTiles::bytes_bound_for((p.mb, p.oh, p.ow), p.taps(), mr, tap_mask(p));
            (
                tiles + 16 * u(p.oh + p.ow),
                pixels.div_ceil(u(mr)) + u(plane),
            )
        };
        let items = grid_items_bound(
            units.min(usize::MAX as u128) as usize,
            (p.src_len() * 4) as f64,
            (p.wei_len() * 4) as f64,
            target_items(),
        );
        let row_len = (p.kw * p.icg()).max(p.icg());
        ahead
            + pushed_bytes::<Item>(items)
            + aligned_bytes(blocks * u(p.taps()) * u(p.icg()) * u(nr))
            + aligned_bytes(u(row_len))
    }

    pub(super) fn new(p: &ConvShape, isa: Isa) -> Self {
        let (mr, nr) = ukernel::tile(isa);
        let pixels = p.mb * p.oh * p.ow;
        let blocks = p.g * p.ocg().div_ceil(nr);
        let wide =
            merge_rows(p).then(|| AlignedBuf::zeroed(p.mb * p.ih * (p.iw + 2 * p.pw) * p.ic));
        let classes = if wide.is_some() {
            None
        } else {
            tap_tiles(p, mr)
        };
        // Items split tiles: MR pixels each in the flat order, or the
        // class tiles.
        let (units, unit, len) = match &classes {
            Some(ct) => (ct.tiles.len(), 1, ct.tiles.len()),
            None => (pixels.div_ceil(mr), mr, pixels),
        };
        let (pc, bc) = grid(
            units,
            blocks,
            (p.src_len() * 4) as f64,
            (p.wei_len() * 4) as f64,
            target_items(),
        );
        let mut items = Vec::new();
        for px in split(len, pc, unit) {
            for blk in split(blocks, bc, 1) {
                items.push(Item { px, blk });
            }
        }
        let (row_taps, row_len) = match wide {
            Some(_) => (p.kh, p.kw * p.icg()),
            None => (p.taps(), p.icg()),
        };
        let (tb, kc) = ukernel::reduction_block(row_taps, row_len, nr);
        let bg = ukernel::blocks_per_pass(tb, kc, nr);
        let pack = AlignedBuf::zeroed(blocks * p.taps() * p.icg() * nr);
        FwdPlan {
            p: *p,
            isa,
            mr,
            nr,
            zero: AlignedBuf::zeroed(row_len),
            items,
            classes,
            wide,
            tb,
            kc,
            bg,
            pack,
            streams: isa != Isa::Scalar && crate::stream::bypasses_cache(p.dst_len()),
        }
    }

    /// Computes one work item.
    ///
    /// # Safety
    /// `src`, `wei`, `bias` and the output behind `out` must fit `self.p`
    /// (checked by `assert_fits`), and no other item may write this item's
    /// pixels x channels of the output.
    /// `pack` holds the packed weights (see [`FwdPlan::pack`]).
    unsafe fn run(
        &self,
        it: &Item,
        src: &[f32],
        bias: Option<&[f32]>,
        out: SyncPtr,
        pack: *const f32,
    ) {
        let p = &self.p;
        let (mr, nr) = (self.mr, self.nr);
        let (icg, ocg, taps) = (p.icg(), p.ocg(), p.taps());
        let nkb = ocg.div_ceil(nr);
        let zero = self.zero.as_slice().as_ptr();
        let mut a = [ptr::null::<f32>(); TMAX * MRMAX];
        // Per tile row: (input row, input column) of tap (0, 0), which may
        // lie in the padding, and the flat src offset it would have.
        let mut org: [Origin; MRMAX] = [(0, 0, 0); MRMAX];
        // Output row starts (channel 0 of the group) of the tile's pixels.
        let mut rows = [ptr::null_mut::<f32>(); MRMAX];
        // The taps of the current tile's pass, in its `a` slots, and their
        // offsets from a row's origin.
        let mut tv = [0usize; TMAX];
        let mut offs = [0isize; TMAX];
        // A merged kernel row is one tap of `kw·icg` channels over the
        // wide input (see [`FwdPlan::wide`]).
        let merged = self.wide.is_some();
        let (row_taps, row_len) = if merged {
            (p.kh, p.kw * icg)
        } else {
            (taps, icg)
        };
        let (base, base_len, width) = match &self.wide {
            Some(w) => (w.as_slice().as_ptr(), w.as_slice().len(), p.iw + 2 * p.pw),
            None => (src.as_ptr(), src.len(), p.iw),
        };
        for (g, blks) in ukernel::block_runs(it.blk, nkb, self.bg) {
            for t0 in (0..row_taps).step_by(self.tb) {
                let nt = self.tb.min(row_taps - t0);
                for c0 in (0..row_len).step_by(self.kc) {
                    let kc = self.kc.min(row_len - c0);
                    // Output pixel q (flat) as row `i` of the tile: its tap
                    // (0, 0) (which may lie in the padding) and output row.
                    // (Merged: the wide input's column, never outside.)
                    let place = |q: usize, (img, oh, ow): (usize, usize, usize)| {
                        let h = (oh * p.sh) as isize - p.ph as isize;
                        let w = (ow * p.sw) as isize - if merged { 0 } else { p.pw as isize };
                        let off =
                            (((img * p.ih) as isize + h) * width as isize + w) * p.ic as isize;
                        (
                            (h, if merged { 0 } else { w }, off + (g * icg + c0) as isize),
                            out.get().add(q * p.oc + g * ocg),
                        )
                    };
                    let tile = Tile {
                        g,
                        blks: blks.clone(),
                        t0,
                        c0,
                        kc,
                        bias,
                        pack,
                        kw_step: if merged { p.kw } else { 1 },
                        stream: self.streams && t0 + nt == row_taps && c0 + kc == row_len,
                    };
                    if let Some(ct) = &self.classes {
                        for ti in it.px.0..it.px.1 {
                            let (px, mask) = ct.tile(ti);
                            let m = px.len();
                            fill_tile(&mut org, &mut rows, (mr, m), |i| {
                                let q = px[i] as usize;
                                place(q, pixel_of(q, (p.oh, p.ow)))
                            });
                            // Only the taps inside for every pixel: one
                            // pointer per row, one offset per tap.
                            let mut nv = 0;
                            for t in (t0..t0 + nt).filter(|t| mask >> t & 1 == 1) {
                                offs[nv] = self.tap_shift(t, width).0 .2;
                                tv[nv] = t;
                                nv += 1;
                            }
                            let reads = (&offs[..nv], kc, base_len);
                            ukernel::point_rows(&mut a, &org, (mr, m), base, reads);
                            self.tile(&tile, (&a, Some(&offs[..nv])), &tv[..nv], &rows[..m]);
                        }
                        continue;
                    }
                    // The pass's taps: their offsets, and how far they
                    // reach from a row's origin.
                    let mut shifts = [(0, 0); TMAX];
                    for (slot, t) in (t0..t0 + nt).enumerate() {
                        let ((dy, dx, doff), _) = self.tap_shift(t, width);
                        (offs[slot], shifts[slot], tv[slot]) = (doff, (dy, dx), t);
                    }
                    let reach = Reach::of(shifts[..nt].iter().copied());
                    let bounds = self.tap_shift(t0, width).1;
                    let mut walk = PixelWalk::from(it.px.0, (p.oh, p.ow));
                    let mut q0 = it.px.0;
                    while q0 < it.px.1 {
                        let m = mr.min(it.px.1 - q0);
                        fill_tile(&mut org, &mut rows, (mr, m), |i| place(q0 + i, walk.next()));
                        if reach.is_some_and(|r| r.inside(&org[..m], bounds)) {
                            let reads = (&offs[..nt], kc, base_len);
                            ukernel::point_rows(&mut a, &org, (mr, m), base, reads);
                            self.tile(&tile, (&a, Some(&offs[..nt])), &tv[..nt], &rows[..m]);
                        } else {
                            // Padding (and rows past the tile) read zeros.
                            for (slot, t) in (t0..t0 + nt).enumerate() {
                                self.tap_rows(&mut a, slot, &org, t, (base, width), zero);
                            }
                            self.tile(&tile, (&a, None), &tv[..nt], &rows[..m]);
                        }
                        q0 += m;
                    }
                }
            }
        }
    }

    /// Tap `t`'s shift from a row's origin (merged: kernel row `t`'s) as
    /// (rows, columns, elements of the input read, whose rows are `width`
    /// pixels), and the (rows, columns) a shifted origin must fall in to
    /// read real data.
    #[inline(always)]
    fn tap_shift(&self, t: usize, width: usize) -> ((isize, isize, isize), (usize, usize)) {
        let p = &self.p;
        let (dh, dw, bounds) = if self.wide.is_some() {
            (t * p.dil_h(), 0, (p.ih, 1))
        } else {
            ((t / p.kw) * p.dil_h(), (t % p.kw) * p.dil_w(), (p.ih, p.iw))
        };
        let (dh, dw) = (dh as isize, dw as isize);
        let doff = (dh * width as isize + dw) * p.ic as isize;
        ((dh, dw, doff), bounds)
    }

    /// Fills `a`'s slot `slot` with the tile's row pointers for tap `t`
    /// (merged: kernel row `t`): row `i` starts at `org[i]` moved by the
    /// tap; a pixel outside the input (padding, or a row past the tile)
    /// reads `zero`. `base` and `width`: the input read (`src`, or the
    /// wide copy) and its row length in pixels.
    ///
    /// # Safety
    /// As [`ukernel::point_tap_rows`], with `base` the input of `width`.
    #[inline(always)]
    unsafe fn tap_rows(
        &self,
        a: &mut [*const f32],
        slot: usize,
        org: &[Origin],
        t: usize,
        (base, width): (*const f32, usize),
        zero: *const f32,
    ) {
        let (shift, bounds) = self.tap_shift(t, width);
        ukernel::point_tap_rows(a, slot, org, self.mr, shift, bounds, base, zero);
    }

    /// Runs one tile of pixels (output rows `rows`, their input pointers
    /// in `a`: one slot per tap of `taps`, or one per row with an offset
    /// per tap) over every oc block of the pass.
    ///
    /// # Safety
    /// As [`FwdPlan::run`]; `a` holds `taps.len()` slots of `MR` pointers,
    /// or `MR` pointers and `taps.len()` offsets.
    #[inline(always)]
    unsafe fn tile(
        &self,
        t: &Tile,
        (a, tap_off): (&[*const f32], Option<&[isize]>),
        taps: &[usize],
        rows: &[*mut f32],
    ) {
        let p = &self.p;
        let nr = self.nr;
        let (icg, ocg, ntaps) = (p.icg(), p.ocg(), p.taps());
        let nkb = ocg.div_ceil(nr);
        let run = BlockRun {
            a,
            tap_off,
            taps,
            kc: t.kc,
            ldb: nr,
            rows,
            stream: t.stream,
        };
        run.run(
            self.isa,
            t.blks.clone(),
            |blk| {
                let k0 = blk % nkb * nr;
                let init = match t.bias {
                    _ if t.t0 > 0 || t.c0 > 0 => Init::Acc,
                    Some(bv) => Init::Bias(bv.as_ptr().add(t.g * ocg + k0)),
                    None => Init::Zero,
                };
                (k0, nr.min(ocg - k0), init)
            },
            |blk, tap| {
                t.pack
                    .add(((blk * ntaps + tap * t.kw_step) * icg + t.c0) * nr)
            },
        );
    }
}

/// What every tile of one pass shares: its group, oc blocks, first tap
/// and input channel, the pass's channels, the bias and the packed
/// weights.
struct Tile<'a> {
    g: usize,
    blks: std::ops::Range<usize>,
    t0: usize,
    c0: usize,
    kc: usize,
    bias: Option<&'a [f32]>,
    pack: *const f32,
    /// Kernel taps per slot tap: `kw` for merged rows, else 1.
    kw_step: usize,
    /// The pass writes the final outputs of an output too large for the
    /// caches: store them non-temporally (see [`FwdPlan::streams`]).
    stream: bool,
}

impl ConvPlan for FwdPlan {
    fn workspace_bytes(&self) -> usize {
        self.zero.bytes()
            + self.pack.bytes()
            + self.items.len() * std::mem::size_of::<Item>()
            + self.classes.as_ref().map_or(0, TapTiles::bytes)
            + self.wide.as_ref().map_or(0, AlignedBuf::bytes)
    }

    fn kernel_name(&self) -> String {
        format!("{}_conv_fwd_f32_{}x{}", self.isa.name(), self.mr, self.nr)
    }

    fn execute(&mut self, args: ConvArgs<'_>) {
        args.assert_fits(&self.p);
        let ConvArgs::Fwd {
            src,
            wei,
            bias,
            dst,
        } = args
        else {
            panic!("forward plan run with {} tensors", args.direction());
        };
        let out = SyncPtr::new(dst);
        let p = self.p;
        let nr = self.nr;
        let (icg, ocg, taps) = (p.icg(), p.ocg(), p.taps());
        let nkb = ocg.div_ceil(nr);
        // Repack: each task reads a run of a (group, tap)'s `ic/g` rows of
        // weights in order and deals them out to the oc blocks. Runs of at
        // most REPACK_ROWS rows, so that a 1x1 layer's repack (one
        // (group, tap), up to 8 MiB in ResNet-50) is not one thread's job.
        const REPACK_ROWS: usize = 64;
        let runs = icg.div_ceil(REPACK_ROWS);
        let dstp = SyncPtr::new(self.pack.as_mut_slice());
        (0..p.g * taps * runs).into_par_iter().for_each(|task| {
            let (gt, run) = (task / runs, task % runs);
            let (g, t) = (gt / taps, gt % taps);
            for c in run * REPACK_ROWS..icg.min((run + 1) * REPACK_ROWS) {
                let from = &wei[p.wei_idx(g, t / p.kw, t % p.kw, c, 0)..][..ocg];
                for kb in 0..nkb {
                    let k0 = kb * nr;
                    let n = nr.min(ocg - k0);
                    // SAFETY: tasks write disjoint rows of the pack.
                    unsafe {
                        ptr::copy_nonoverlapping(
                            from.as_ptr().add(k0),
                            dstp.get().add((((g * nkb + kb) * taps + t) * icg + c) * nr),
                            n,
                        )
                    };
                }
            }
        });
        if let Some(w) = &mut self.wide {
            // Each input row into the middle of its wide row; the padding
            // columns stay the zeros they were made with.
            let row = p.iw * p.ic;
            let wide_row = (p.iw + 2 * p.pw) * p.ic;
            w.as_mut_slice()
                .par_chunks_mut(wide_row)
                .zip(src.par_chunks(row))
                .for_each(|(to, from)| to[p.pw * p.ic..][..row].copy_from_slice(from));
        }
        let this = &*self;
        this.items.par_iter().for_each(|it| {
            // SAFETY: tensor sizes were checked above; items cover disjoint
            // (pixel range x channel block) parts of dst, and only read the
            // pack.
            unsafe { this.run(it, src, bias, out, dstp.get()) };
            if this.streams {
                // Before rayon hands the item's completion to another
                // thread.
                crate::stream::fence();
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(ih: usize, k: usize, stride: usize, pad: usize, dil: usize) -> ConvShape {
        let o = (ih + 2 * pad - (k - 1) * (dil + 1) - 1) / stride + 1;
        ConvShape {
            mb: 3,
            g: 1,
            ic: 4,
            ih,
            iw: ih + 1,
            oc: 8,
            oh: o,
            ow: (ih + 1 + 2 * pad - (k - 1) * (dil + 1) - 1) / stride + 1,
            kh: k,
            kw: k,
            sh: stride,
            sw: stride,
            ph: pad,
            pw: pad,
            dh: dil,
            dw: dil,
        }
    }

    /// Tap tiles cover every output pixel once, hold at most MR pixels
    /// each, and run exactly the taps that land inside the input for every
    /// one of their pixels; unpadded problems, and padded ones that would
    /// save little, keep the flat order.
    #[test]
    fn tap_tiles_cover_every_pixel_with_its_own_taps() {
        for p in [
            shape(7, 3, 1, 1, 0),
            shape(9, 3, 2, 1, 0),
            shape(11, 5, 1, 2, 1),
            shape(8, 7, 2, 3, 0),
        ] {
            let ct = tap_tiles(&p, 6).unwrap_or_else(|| panic!("{p:?}: tap tiles"));
            let pixels = p.mb * p.oh * p.ow;
            let mut seen = vec![0; pixels];
            for &(start, m, mask) in &ct.tiles {
                assert!((1..=6).contains(&m));
                for &q in &ct.order[start as usize..][..m as usize] {
                    let q = q as usize;
                    seen[q] += 1;
                    let (oh, ow) = (q / p.ow % p.oh, q % p.ow);
                    for t in 0..p.taps() {
                        let ih = (oh * p.sh + t / p.kw * p.dil_h()) as isize - p.ph as isize;
                        let iw = (ow * p.sw + t % p.kw * p.dil_w()) as isize - p.pw as isize;
                        let inside =
                            (0..p.ih as isize).contains(&ih) && (0..p.iw as isize).contains(&iw);
                        assert_eq!(mask >> t & 1 == 1, inside, "{p:?} pixel {q} tap {t}");
                    }
                }
            }
            assert!(seen.iter().all(|&n| n == 1), "{p:?}");
        }
        assert!(tap_tiles(&shape(7, 3, 1, 0, 0), 6).is_none());
        // 56x56 with a 3x3 kernel: 2.4% of pixel-taps in the padding.
        assert!(tap_tiles(&shape(56, 3, 1, 1, 0), 6).is_none());
    }

    /// Kernel rows merge into one tap for few channels in one group without
    /// dilation along W (the stem), and for nothing else; the reference
    /// tests (`tests/conv_vs_reference.rs`: the 7x7 stride-2 stem of 3
    /// channels, random small problems) run both forms.
    #[test]
    fn kernel_rows_merge_for_the_stem_only() {
        let stem = shape(23, 7, 2, 3, 0);
        assert!(merge_rows(&ConvShape { ic: 3, ..stem }));
        assert!(merge_rows(&ConvShape {
            ic: 3,
            dh: 1,
            ..stem
        }));
        assert!(!merge_rows(&ConvShape { ic: 16, ..stem }));
        assert!(!merge_rows(&ConvShape {
            ic: 3,
            dw: 1,
            ..stem
        }));
        assert!(!merge_rows(&ConvShape {
            ic: 4,
            g: 2,
            ..stem
        }));
        assert!(!merge_rows(&ConvShape {
            ic: 3,
            kw: 1,
            ..stem
        }));
        // One output column more than the padded width holds.
        assert!(!merge_rows(&ConvShape {
            ic: 3,
            ow: stem.ow + 1,
            ..stem
        }));
    }
}
