//! Backward-data: the forward micro-kernel run "in reverse" over input pixels.
//!
//! `diff_src[n,ih,iw,c] = Σ_{r,s,k} diff_dst[n,oh,ow,k] · wei[r][s][c][k]`
//! where `oh·sh + r·dil_h − ph = ih` (same along w). Input pixels are split
//! into stride phase classes `(ih mod sh, iw mod sw)`: within a class the
//! contributing taps are fixed and, for each tap, `oh = y + off_r` advances
//! with unit step as the class row `y` does. So each class is an indirect
//! GEMM over its pixels with only its own taps (a stride-2 3x3 class has 1,
//! 2 or 4 taps, never the 9 with zeros), reduction over `oc/g`. Weights are
//! transposed once per call (16 x 16 vector transposes on AVX-512) into
//! NR-wide `[k][c]` panels, so each pass reads one contiguous L2-sized
//! block. A class with no taps (stride larger than the kernel) is written
//! as zeros. Where taps that find no diff_dst pixel (the border) would take
//! 4% or more of a class's pixel-taps, its tiles take pixels that share
//! their taps with data and run only those ([`TapTiles`]).

use super::ukernel::{self, BlockRun, Init, Reach, MRMAX, TMAX};
use super::util::{
    aligned_bytes, fill_tile, grid, pixel_of, pushed_bytes, split, target_items, AlignedBuf,
    Origin, PixelWalk, SyncPtr, TapTiles,
};
use crate::conv::{ConvArgs, ConvPlan, ConvShape};
use crate::Isa;
use rayon::prelude::*;
use std::ptr;

/// Input pixels `ih = a + sh·y`, `iw = b + sw·x`.
struct Class {
    a: usize,
    b: usize,
    ny: usize,
    nx: usize,
    /// `(tap, off_r, off_s)`: tap `t` reads `diff_dst[y + off_r][x + off_s]`.
    taps: Vec<(usize, isize, isize)>,
    /// The class's pixels regrouped by which of its taps find a diff_dst
    /// pixel (bit `j`: `taps[j]`), where that saves work.
    tiles: Option<TapTiles>,
}

struct Item {
    class: usize,
    /// Pixel range within the class, `(n, y, x)` flattened, or a range of
    /// its [`TapTiles`].
    px: (usize, usize),
    /// Flattened `(group, input-channel block)` range.
    blk: (usize, usize),
}

pub(super) struct BwdDataPlan {
    p: ConvShape,
    isa: Isa,
    mr: usize,
    nr: usize,
    classes: Vec<Class>,
    items: Vec<Item>,
    /// `oc/g` zeros: what a tap with no diff_dst pixel reads.
    zero: AlignedBuf,
    /// The weights transposed once per call to `[g][ic block][tap][oc/g][nr]`,
    /// so that each pass's `[tap][k][c]` block is contiguous and stays in L2
    /// while the item's tiles use it.
    pack: AlignedBuf,
    /// Taps and `oc/g` rows per pass.
    tb: usize,
    kc: usize,
    /// Input-channel blocks per pass over a tile of pixels (see
    /// [`ukernel::blocks_per_pass`]).
    bg: usize,
    /// Whether the last pass (and a class without taps, which writes
    /// zeros) stores diff_src non-temporally: it is more than half the
    /// cache counted on, so that a plain store would first read each line from
    /// memory (ResNet-50's stride-2 layers write 26-51 MB at batch 16, of
    /// which a 1x1's three tapless classes are three quarters).
    streams: bool,
}

/// Taps `r` of one dimension that reach input index `a (mod stride)`, with
/// the output offset `(a + pad − r·dil) / stride` (exact division).
fn phase_taps(a: usize, k: usize, stride: usize, pad: usize, dil: usize) -> Vec<(usize, isize)> {
    (0..k)
        .filter_map(|r| {
            let v = (a + pad) as isize - (r * dil) as isize;
            (v.rem_euclid(stride as isize) == 0).then(|| (r, v.div_euclid(stride as isize)))
        })
        .collect()
}

/// The stride phase classes of `p`'s input pixels, with their taps and
/// without tiles.
fn classes(p: &ConvShape) -> impl Iterator<Item = Class> + '_ {
    (0..p.sh.min(p.ih)).flat_map(move |a| {
        (0..p.sw.min(p.iw)).map(move |b| {
            let rows = phase_taps(a, p.kh, p.sh, p.ph, p.dil_h());
            let cols = phase_taps(b, p.kw, p.sw, p.pw, p.dil_w());
            let mut taps: Vec<(usize, isize, isize)> = rows
                .iter()
                .flat_map(|&(r, dr)| cols.iter().map(move |&(s, ds)| (r * p.kw + s, dr, ds)))
                .collect();
            // In the order of the diff_dst pixels they read: kernel order
            // would walk memory backwards (tap (0, 0) reads the pixel below
            // and right).
            taps.sort_by_key(|&(_, dr, ds)| (dr, ds));
            Class {
                a,
                b,
                ny: (p.ih - a).div_ceil(p.sh),
                nx: (p.iw - b).div_ceil(p.sw),
                taps,
                tiles: None,
            }
        })
    })
}

impl Class {
    /// Pixel `(y, x)` of the class: bit `j` set when `taps[j]` finds a
    /// diff_dst pixel.
    fn mask<'a>(&'a self, p: &'a ConvShape) -> impl Fn(usize, usize) -> u64 + 'a {
        move |y, x| {
            let inside = |v: isize, n: usize| (0..n as isize).contains(&v);
            self.taps
                .iter()
                .enumerate()
                .filter(|(_, &(_, dr, ds))| {
                    inside(y as isize + dr, p.oh) && inside(x as isize + ds, p.ow)
                })
                .fold(0u64, |m, (j, _)| m | 1 << j)
        }
    }
}

impl BwdDataPlan {
    /// Most bytes [`BwdDataPlan::new`] allocates (see
    /// [`ConvAlgo::workspace_bound`](crate::conv::ConvAlgo::workspace_bound)),
    /// its calls allocating none: the classes (every input pixel in one,
    /// each with tap tiles where they pay), the transposed weights
    /// and the items (each class's share of the pixel chunks rounded up).
    pub(super) fn bytes_bound(p: &ConvShape, isa: Isa) -> u128 {
        let (mr, nr) = ukernel::tile(isa);
        let u = |v: usize| v as u128;
        let classes = u(p.sh.min(p.ih)) * u(p.sw.min(p.iw));
        let per_class = std::mem::size_of::<Class>() as u128 + 3 * 24 * u(p.taps());
        let tiles: u128 = self::classes(p)
            .map(|c| TapTiles::bytes_bound_for((p.mb, c.ny, c.nx), c.taps.len(), mr, c.mask(p)))
            .sum();
        let pixels = p.mb * p.ih * p.iw;
        let blocks = p.g * p.icg().div_ceil(nr);
        let (pc, bc) = grid(
            pixels.div_ceil(mr),
            blocks,
            (p.dst_len() * 4) as f64,
            (p.wei_len() * 4) as f64,
            target_items(),
        );
        let items = (u(pc) + classes) * u(bc);
        pushed_bytes::<Class>(classes)
            + classes * per_class
            + tiles
            + pushed_bytes::<Item>(items)
            + aligned_bytes(u(p.ocg()))
            + aligned_bytes(u(blocks) * u(p.taps()) * u(p.ocg()) * u(nr))
    }

    pub(super) fn new(p: &ConvShape, isa: Isa) -> Self {
        let (mr, nr) = ukernel::tile(isa);
        let classes: Vec<Class> = classes(p)
            .map(|mut c| {
                c.tiles = TapTiles::new((p.mb, c.ny, c.nx), c.taps.len(), mr, c.mask(p));
                c
            })
            .collect();
        let pixels = p.mb * p.ih * p.iw;
        let blocks = p.g * p.icg().div_ceil(nr);
        let target = target_items();
        let (pc, bc) = grid(
            pixels.div_ceil(mr),
            blocks,
            (p.dst_len() * 4) as f64,
            (p.wei_len() * 4) as f64,
            target,
        );
        let mut items = Vec::new();
        for (ci, cl) in classes.iter().enumerate() {
            let count = p.mb * cl.ny * cl.nx;
            // Each class gets its share of the pixel chunks.
            let parts = (pc * count).div_ceil(pixels).max(1);
            let (len, unit) = match &cl.tiles {
                Some(tt) => (tt.tiles.len(), 1),
                None => (count, mr),
            };
            for px in split(len, parts, unit) {
                for blk in split(blocks, bc, 1) {
                    items.push(Item { class: ci, px, blk });
                }
            }
        }
        let (tb, kc) = ukernel::reduction_block(p.taps(), p.ocg(), nr);
        BwdDataPlan {
            bg: ukernel::blocks_per_pass(tb, kc, nr),
            p: *p,
            isa,
            mr,
            nr,
            classes,
            items,
            zero: AlignedBuf::zeroed(p.ocg()),
            pack: AlignedBuf::zeroed(blocks * p.taps() * p.ocg() * nr),
            tb,
            kc,
            streams: isa != Isa::Scalar && crate::stream::bypasses_cache(p.src_len()),
        }
    }

    /// Computes one work item.
    ///
    /// # Safety
    /// `diff_dst`, `wei` and the output behind `out` must fit `self.p`, no
    /// other item may write this item's pixels x channels, and `pack` holds
    /// the transposed weights (see [`BwdDataPlan::pack`]).
    unsafe fn run(&self, it: &Item, diff_dst: &[f32], out: SyncPtr, pack: *const f32) {
        let p = &self.p;
        let (mr, nr) = (self.mr, self.nr);
        let (icg, ocg) = (p.icg(), p.ocg());
        let ncb = icg.div_ceil(nr);
        let cl = &self.classes[it.class];
        let zero = self.zero.as_slice().as_ptr();
        let dd = diff_dst.as_ptr();
        let mut a = [ptr::null::<f32>(); TMAX * MRMAX];
        // Per tile row: class (row, column) and the flat diff_dst offset of
        // output pixel (y, x), which taps shift by (off_r, off_s).
        let mut org: [Origin; MRMAX] = [(0, 0, 0); MRMAX];
        let nt_all = cl.taps.len();
        // Output row starts (channel 0 of the group) of the tile's pixels.
        let mut rows = [ptr::null_mut::<f32>(); MRMAX];
        for (g, blks) in ukernel::block_runs(it.blk, ncb, self.bg) {
            // At least one pass, so that a class without taps writes zeros.
            let mut t0 = 0;
            loop {
                let nt = self.tb.min(nt_all - t0);
                for k0 in (0..ocg).step_by(self.kc) {
                    let kc = self.kc.min(ocg - k0);
                    let init = if t0 > 0 || k0 > 0 {
                        Init::Acc
                    } else {
                        Init::Zero
                    };
                    // Class pixel (image, y, x) as a row of the tile: its
                    // diff_dst offset and output row.
                    let place = |(img, y, x): (usize, usize, usize)| {
                        let off = (((img * p.oh + y) * p.ow + x) * p.oc + g * ocg + k0) as isize;
                        (
                            (y as isize, x as isize, off),
                            out.get().add(p.src_idx(
                                img,
                                cl.a + p.sh * y,
                                cl.b + p.sw * x,
                                g * icg,
                            )),
                        )
                    };
                    let pass = Pass {
                        blks: blks.clone(),
                        k0,
                        kc,
                        init,
                        pack,
                        // The last pass; a class without taps writes its
                        // zeros in the first (later ones are skipped).
                        stream: self.streams
                            && (nt_all == 0 || (t0 + nt >= nt_all && k0 + kc >= ocg)),
                    };
                    let mut tv = [0usize; TMAX];
                    let mut offs = [0isize; TMAX];
                    if let Some(tt) = &cl.tiles {
                        for ti in it.px.0..it.px.1 {
                            let (px, mask) = tt.tile(ti);
                            let m = px.len();
                            fill_tile(&mut org, &mut rows, (mr, m), |i| {
                                place(pixel_of(px[i] as usize, (cl.ny, cl.nx)))
                            });
                            // Only the taps that find diff_dst for every
                            // pixel: one pointer per row, one offset per tap.
                            let mut nv = 0;
                            for j in (t0..t0 + nt).filter(|j| mask >> j & 1 == 1) {
                                offs[nv] = self.tap_off(cl.taps[j]);
                                tv[nv] = cl.taps[j].0;
                                nv += 1;
                            }
                            let reads = (&offs[..nv], kc, diff_dst.len());
                            ukernel::point_rows(&mut a, &org, (mr, m), dd, reads);
                            self.tile(&pass, (&a, Some(&offs[..nv])), &tv[..nv], &rows[..m]);
                        }
                    } else {
                        // The pass's taps: their offsets, and how far they
                        // reach from a row's origin.
                        for (slot, j) in (t0..t0 + nt).enumerate() {
                            (offs[slot], tv[slot]) = (self.tap_off(cl.taps[j]), cl.taps[j].0);
                        }
                        let reach =
                            Reach::of(cl.taps[t0..t0 + nt].iter().map(|&(_, dr, ds)| (dr, ds)));
                        let mut walk = PixelWalk::from(it.px.0, (cl.ny, cl.nx));
                        let mut q0 = it.px.0;
                        while q0 < it.px.1 {
                            let m = mr.min(it.px.1 - q0);
                            fill_tile(&mut org, &mut rows, (mr, m), |_| place(walk.next()));
                            if reach.is_some_and(|r| r.inside(&org[..m], (p.oh, p.ow))) {
                                let reads = (&offs[..nt], kc, diff_dst.len());
                                ukernel::point_rows(&mut a, &org, (mr, m), dd, reads);
                                self.tile(&pass, (&a, Some(&offs[..nt])), &tv[..nt], &rows[..m]);
                            } else {
                                // No diff_dst pixel there (or a row past
                                // the tile): the zero row.
                                for (slot, j) in (t0..t0 + nt).enumerate() {
                                    self.tap_rows(&mut a, slot, &org, cl.taps[j], dd, zero);
                                }
                                self.tile(&pass, (&a, None), &tv[..nt], &rows[..m]);
                            }
                            q0 += m;
                        }
                    }
                }
                t0 += nt;
                if t0 >= nt_all {
                    break;
                }
            }
        }
    }

    /// The diff_dst elements class tap `(_, dr, ds)` moves a row by.
    #[inline(always)]
    fn tap_off(&self, (_, dr, ds): (usize, isize, isize)) -> isize {
        (dr * self.p.ow as isize + ds) * self.p.oc as isize
    }

    /// Fills `a`'s slot `slot` with the tile's row pointers for class tap
    /// `(_, dr, ds)`; a pixel with no diff_dst there (or a row past the
    /// tile) reads `zero`.
    ///
    /// # Safety
    /// As [`ukernel::point_tap_rows`], with `dd` the problem's diff_dst.
    #[inline(always)]
    unsafe fn tap_rows(
        &self,
        a: &mut [*const f32],
        slot: usize,
        org: &[Origin],
        tap: (usize, isize, isize),
        dd: *const f32,
        zero: *const f32,
    ) {
        let p = &self.p;
        let (_, dr, ds) = tap;
        ukernel::point_tap_rows(
            a,
            slot,
            org,
            self.mr,
            (dr, ds, self.tap_off(tap)),
            (p.oh, p.ow),
            dd,
            zero,
        );
    }

    /// Runs one tile of pixels (output rows `rows`, their diff_dst
    /// pointers in `a`: one slot per kernel tap of `taps`, or one per row
    /// with an offset per tap) over every input-channel block of the pass.
    ///
    /// # Safety
    /// As [`BwdDataPlan::run`]; `a` holds `taps.len()` slots of `MR`
    /// pointers, or `MR` pointers and `taps.len()` offsets.
    #[inline(always)]
    unsafe fn tile(
        &self,
        t: &Pass,
        (a, tap_off): (&[*const f32], Option<&[isize]>),
        taps: &[usize],
        rows: &[*mut f32],
    ) {
        let p = &self.p;
        let nr = self.nr;
        let (icg, ocg) = (p.icg(), p.ocg());
        let ncb = icg.div_ceil(nr);
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
                let c0 = blk % ncb * nr;
                (c0, nr.min(icg - c0), t.init)
            },
            |blk, tap| t.pack.add(((blk * p.taps() + tap) * ocg + t.k0) * nr),
        );
    }
}

/// What every tile of one pass shares: its input-channel blocks, first
/// output channel and count, how tiles start, and the packed weights.
struct Pass {
    blks: std::ops::Range<usize>,
    k0: usize,
    kc: usize,
    init: Init,
    pack: *const f32,
    /// The pass writes diff_src's final values non-temporally.
    stream: bool,
}

impl ConvPlan for BwdDataPlan {
    fn workspace_bytes(&self) -> usize {
        self.zero.bytes()
            + self.pack.bytes()
            + self.items.len() * std::mem::size_of::<Item>()
            + self
                .classes
                .iter()
                .map(|c| {
                    c.taps.len() * 24
                        + std::mem::size_of::<Class>()
                        + c.tiles.as_ref().map_or(0, TapTiles::bytes)
                })
                .sum::<usize>()
    }

    fn kernel_name(&self) -> String {
        format!(
            "{}_conv_bwd_data_f32_{}x{}",
            self.isa.name(),
            self.mr,
            self.nr
        )
    }

    fn execute(&mut self, args: ConvArgs<'_>) {
        args.assert_fits(&self.p);
        let ConvArgs::BwdData {
            diff_dst,
            wei,
            diff_src,
        } = args
        else {
            panic!("backward-data plan run with {} tensors", args.direction());
        };
        let out = SyncPtr::new(diff_src);
        let p = self.p;
        let nr = self.nr;
        let (icg, ocg, taps) = (p.icg(), p.ocg(), p.taps());
        let ncb = icg.div_ceil(nr);
        // wei[g][t][c0 + j][k] -> pack[g][cb][t][k][j], one task per block.
        let packp = SyncPtr::new(self.pack.as_mut_slice());
        let isa = self.isa;
        (0..p.g * ncb * taps).into_par_iter().for_each(|i| {
            let (blk, t) = (i / taps, i % taps);
            let (g, c0) = (blk / ncb, blk % ncb * nr);
            let from = &wei[p.wei_idx(g, t / p.kw, t % p.kw, c0, 0)..];
            // SAFETY: tasks write disjoint `ocg x nr` panels of the pack; the
            // source holds `min(nr, icg - c0)` rows of `ocg` from there.
            unsafe {
                ukernel::transpose(
                    isa,
                    from.as_ptr(),
                    ocg,
                    packp.get().add(i * ocg * nr),
                    nr,
                    nr.min(icg - c0),
                    ocg,
                )
            };
        });
        let this = &*self;
        this.items.par_iter().for_each(|it| {
            // SAFETY: sizes checked above; the phase classes partition the
            // input pixels and items split each class's pixels and channel
            // blocks disjointly.
            unsafe { this.run(it, diff_dst, out, packp.get()) };
            if this.streams {
                // Before rayon hands the item's completion to another
                // thread.
                crate::stream::fence();
            }
        });
    }
}
