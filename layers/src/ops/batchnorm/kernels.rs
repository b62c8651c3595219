//! Launch wrappers of `bn.cu` (batch normalisation in training mode on
//! cnnbench's own kernels, `--own-bn`), on the compiled [`Kernels`]: three
//! launches each way (partial sums, their totals per channel, one
//! elementwise pass; see the file's header).

use super::fused::BnFused;
use crate::backend::cuda::kernel_name::{per_storage, PerStorage};
use crate::backend::cuda::nvrtc::{
    blocks_for, invalid, to_i32, vector_width, Arg, Kernels, Program, THREADS,
};
use crate::backend::cuda::GpuResult;
use crate::core::dtype::Storage;
use cudarc::driver::sys::CUdeviceptr;
use cudarc::driver::CudaStream;

/// One instance per storage ([`per_storage!`]); `_vec` moves 16-byte
/// vectors, the others one element per slot.
pub(crate) const BN_STATS_NHWC: PerStorage = per_storage!("bn_stats_nhwc");
pub(crate) const BN_STATS_NHWC_VEC: PerStorage = per_storage!("bn_stats_nhwc_vec");
pub(crate) const BN_STATS_NCHW: PerStorage = per_storage!("bn_stats_nchw");
pub(crate) const BN_STATS_NCHW_VEC: PerStorage = per_storage!("bn_stats_nchw_vec");
pub(crate) const BN_GRADS_NHWC: PerStorage = per_storage!("bn_grads_nhwc");
pub(crate) const BN_GRADS_NHWC_VEC: PerStorage = per_storage!("bn_grads_nhwc_vec");
pub(crate) const BN_GRADS_NCHW: PerStorage = per_storage!("bn_grads_nchw");
pub(crate) const BN_GRADS_NCHW_VEC: PerStorage = per_storage!("bn_grads_nchw_vec");
pub(crate) const BN_FWD_NHWC: PerStorage = per_storage!("bn_fwd_nhwc");
pub(crate) const BN_FWD_NHWC_VEC: PerStorage = per_storage!("bn_fwd_nhwc_vec");
pub(crate) const BN_FWD_NCHW: PerStorage = per_storage!("bn_fwd_nchw");
pub(crate) const BN_FWD_NCHW_VEC: PerStorage = per_storage!("bn_fwd_nchw_vec");
pub(crate) const BN_BWD_NHWC: PerStorage = per_storage!("bn_bwd_nhwc");
pub(crate) const BN_BWD_NHWC_VEC: PerStorage = per_storage!("bn_bwd_nhwc_vec");
pub(crate) const BN_BWD_NCHW: PerStorage = per_storage!("bn_bwd_nchw");
pub(crate) const BN_BWD_NCHW_VEC: PerStorage = per_storage!("bn_bwd_nchw_vec");
pub(crate) const BN_FINALIZE_FWD: PerStorage = per_storage!("bn_finalize_fwd");
const BN_FINALIZE_BWD: &str = "bn_finalize_bwd";

/// `bn.cu` and its kernels.
pub const PROGRAM: Program = Program {
    file: "bn.cu",
    source: include_str!("bn.cu"),
    per_storage: &[
        BN_STATS_NHWC,
        BN_STATS_NHWC_VEC,
        BN_STATS_NCHW,
        BN_STATS_NCHW_VEC,
        BN_GRADS_NHWC,
        BN_GRADS_NHWC_VEC,
        BN_GRADS_NCHW,
        BN_GRADS_NCHW_VEC,
        BN_FWD_NHWC,
        BN_FWD_NHWC_VEC,
        BN_FWD_NCHW,
        BN_FWD_NCHW_VEC,
        BN_BWD_NHWC,
        BN_BWD_NHWC_VEC,
        BN_BWD_NCHW,
        BN_BWD_NCHW_VEC,
        BN_FINALIZE_FWD,
    ],
    single: &[BN_FINALIZE_BWD],
};

/// Rows of `c` floats in the layer's statistics buffer (bn.cu's `ST_*`:
/// mean, invstd, scale, shift, and the backward's three coefficients).
pub const STAT_ROWS: usize = 7;

/// Blocks a reduction aims at: a few per SM on the largest GPUs (132 SMs
/// on an H100/H200), so that every SM streams while the partials stay few.
const TARGET_BLOCKS: usize = 1024;
/// Rows (NHWC) or vectors (NCHW) each thread of a reduction visits at the
/// least, before the grid grows by more groups.
const MIN_VISITS: usize = 8;
/// Channels per finalize block (bn.cu's `BN_FIN_CH`; a test holds it).
const FIN_CH: usize = 32;
/// Channel vectors per NHWC reduction tile, at most (its columns).
const MAX_TILE: usize = 32;

/// One batch norm's tensor: `n` images of `c` channels of `hw` pixels,
/// NHWC or NCHW, in storage `st`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BnShape {
    pub st: Storage,
    pub nhwc: bool,
    pub n: usize,
    pub c: usize,
    pub hw: usize,
}

/// How one reduction launch splits: `per` is the NHWC tile's channel
/// vectors (`ct`) or the NCHW plane's vectors (`ivs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Split {
    width: usize,
    per: usize,
    groups: usize,
    blocks: usize,
}

impl BnShape {
    pub fn elems(&self) -> usize {
        self.n * self.c * self.hw
    }

    /// Elements per slot: a 16-byte vector where the channels (NHWC) or
    /// the planes (NCHW) divide into vectors and every buffer is 16-byte
    /// aligned, else one.
    fn width(&self, ptrs: &[CUdeviceptr]) -> usize {
        vector_width(self.st, if self.nhwc { self.c } else { self.hw }, ptrs)
    }

    fn split(&self, width: usize) -> Split {
        let c = self.c;
        if self.nhwc {
            let cvs = c / width;
            let ct = cvs.min(MAX_TILE);
            let tiles = cvs.div_ceil(ct);
            let lanes = THREADS as usize / ct;
            let rows = self.n * self.hw;
            let groups = (TARGET_BLOCKS / tiles)
                .min(rows.div_ceil(lanes * MIN_VISITS))
                .max(1);
            Split {
                width,
                per: ct,
                groups,
                blocks: tiles * groups,
            }
        } else {
            let ivs = self.hw / width;
            let groups = TARGET_BLOCKS
                .div_ceil(c)
                .min((self.n * ivs).div_ceil(THREADS as usize * MIN_VISITS))
                .max(1);
            Split {
                width,
                per: ivs,
                groups,
                blocks: c * groups,
            }
        }
    }

    /// Floats of the partial sums' buffer: enough for either width the
    /// shape allows (the buffers' alignment picks one per launch).
    pub fn part_floats(&self) -> usize {
        [1, self.width(&[])]
            .map(|w| 2 * self.split(w).groups * self.c)
            .into_iter()
            .max()
            .unwrap_or(0)
    }

    /// The (vector or element) kernel of a pass.
    fn kernel(&self, width: usize, k: [PerStorage; 4]) -> &'static str {
        let i = usize::from(!self.nhwc) * 2 + usize::from(width > 1);
        k[i].name(self.st)
    }
}

/// The forward's buffers: `x` (and `z`, the residual with the add) in,
/// `y` out; the parameters and statistics are f32 (`c` each); `part`
/// holds [`BnShape::part_floats`] floats and `st` [`STAT_ROWS`]` * c`.
pub struct BnFwdArgs {
    pub x: CUdeviceptr,
    pub z: Option<CUdeviceptr>,
    pub y: CUdeviceptr,
    pub gamma: CUdeviceptr,
    pub beta: CUdeviceptr,
    pub run_mean: CUdeviceptr,
    pub run_var: CUdeviceptr,
    pub part: CUdeviceptr,
    pub st: CUdeviceptr,
    pub eps: f32,
    pub momentum: f32,
    pub relu: bool,
}

/// The backward's: `dy` the output gradient (the ReLU's, fused), `dy2` its
/// second part where the add's layer reads both parts itself (with the add
/// only: the sums pass adds them and writes their masked sum to `dz`),
/// `y` the output (read with the add), `dz` the add's gradient (written
/// with the add), `dx` written when asked for; `st` as the forward left
/// it.
pub struct BnBwdArgs {
    pub x: CUdeviceptr,
    pub dy: CUdeviceptr,
    pub dy2: Option<CUdeviceptr>,
    pub y: CUdeviceptr,
    pub dz: Option<CUdeviceptr>,
    pub dx: Option<CUdeviceptr>,
    pub gamma: CUdeviceptr,
    pub dgamma: CUdeviceptr,
    pub dbeta: CUdeviceptr,
    pub part: CUdeviceptr,
    pub st: CUdeviceptr,
    pub mode: BnFused,
}

fn mode_arg(m: BnFused) -> i32 {
    match m {
        BnFused::None => 0,
        BnFused::Relu => 1,
        BnFused::AddRelu => 2,
    }
}

/// Most arguments of a `bn.cu` kernel.
const MAX_ARGS: usize = 13;

/// One launch of a pass: kernel, blocks of [`THREADS`], arguments (the
/// first `len` of `args`). Planned apart from the launch, without
/// allocating, so that the emulated tests run exactly these.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Launch {
    pub name: &'static str,
    pub grid: u32,
    args: [Arg; MAX_ARGS],
    len: usize,
}

impl Launch {
    fn new(name: &'static str, grid: u32, list: &[Arg]) -> Launch {
        let mut args = [Arg::I32(0); MAX_ARGS];
        args[..list.len()].copy_from_slice(list);
        Launch {
            name,
            grid,
            args,
            len: list.len(),
        }
    }

    pub fn args(&self) -> &[Arg] {
        &self.args[..self.len]
    }
}

/// The forward's three launches: partial sums, statistics, output.
pub(crate) fn fwd_launches(s: &BnShape, a: &BnFwdArgs) -> GpuResult<[Launch; 3]> {
    let ptrs = [a.x, a.y, a.z.unwrap_or(0)];
    let sp = s.split(s.width(&ptrs));
    let stats = s.kernel(
        sp.width,
        [
            BN_STATS_NHWC,
            BN_STATS_NHWC_VEC,
            BN_STATS_NCHW,
            BN_STATS_NCHW_VEC,
        ],
    );
    let [rows, c, per, groups] = shape_ints(stats, s, &sp)?.map(Arg::I32);
    // (const T* x, float* part, u32 rows|n, u32 c, u32 ct|ivs, u32 groups).
    let stats = Launch::new(
        stats,
        grid(stats, sp.blocks)?,
        &[Arg::Ptr(a.x), Arg::Ptr(a.part), rows, c, per, groups],
    );
    let fin = BN_FINALIZE_FWD.name(s.st);
    let inner = if s.nhwc { 1 } else { s.hw };
    // (const T* x, const float* part, u32 groups, u32 c, u64 inner, float
    // count, float eps, float momentum, const float* gamma, beta, float*
    // running mean, var, st).
    let fin = Launch::new(
        fin,
        grid(fin, s.c.div_ceil(FIN_CH))?,
        &[
            Arg::Ptr(a.x),
            Arg::Ptr(a.part),
            groups,
            c,
            Arg::U64(inner as u64),
            Arg::F32((s.n * s.hw) as f32),
            Arg::F32(a.eps),
            Arg::F32(a.momentum),
            Arg::Ptr(a.gamma),
            Arg::Ptr(a.beta),
            Arg::Ptr(a.run_mean),
            Arg::Ptr(a.run_var),
            Arg::Ptr(a.st),
        ],
    );
    let apply = s.kernel(
        sp.width,
        [BN_FWD_NHWC, BN_FWD_NHWC_VEC, BN_FWD_NCHW, BN_FWD_NCHW_VEC],
    );
    let nv = s.elems() / sp.width;
    // (const T* x, const T* z or null, T* y, const float* st, u32 nv, u32
    // c, u32 per, int relu).
    let apply = Launch::new(
        apply,
        blocks_for(nv as u64),
        &[
            Arg::Ptr(a.x),
            Arg::Ptr(a.z.unwrap_or(0)),
            Arg::Ptr(a.y),
            Arg::Ptr(a.st),
            Arg::I32(to_i32(apply, "vectors", nv)?),
            c,
            Arg::I32(to_i32(apply, "vectors per run", apply_per(s, sp.width))?),
            Arg::I32(i32::from(a.relu)),
        ],
    );
    Ok([stats, fin, apply])
}

/// The backward's launches: gradient sums (and `dz`), the parameters'
/// gradients and `dx`'s coefficients, and `dx` when asked for.
pub(crate) fn bwd_launches(s: &BnShape, a: &BnBwdArgs) -> GpuResult<[Option<Launch>; 3]> {
    let add = a.mode == BnFused::AddRelu;
    let dz = match (add, a.dz) {
        (true, Some(p)) => p,
        (true, None) => {
            return Err(invalid(
                "bn_bwd",
                "a fused add without its gradient buffer".into(),
            ))
        }
        (false, _) => 0,
    };
    let dy2 = match (add, a.dy2) {
        (_, None) => 0,
        (true, Some(p)) => p,
        (false, Some(_)) => {
            return Err(invalid(
                "bn_bwd",
                "a second output-gradient part without the fused add".into(),
            ))
        }
    };
    let y = if add { a.y } else { 0 };
    // The sums kernel's pointers are __restrict__: dz, which it writes,
    // must be none of what it reads.
    if add && [a.x, a.dy, dy2, y].contains(&dz) {
        return Err(invalid(
            "bn_bwd",
            "the add's gradient buffer is one of the backward's inputs".into(),
        ));
    }
    let ptrs = [a.x, a.dy, dy2, y, dz, a.dx.unwrap_or(0)];
    let sp = s.split(s.width(&ptrs));
    let grads = s.kernel(
        sp.width,
        [
            BN_GRADS_NHWC,
            BN_GRADS_NHWC_VEC,
            BN_GRADS_NCHW,
            BN_GRADS_NCHW_VEC,
        ],
    );
    let [rows, c, per, groups] = shape_ints(grads, s, &sp)?.map(Arg::I32);
    // (const T* x, dy, dy2, y, T* dz, const float* st, float* part, u32
    // rows|n, u32 c, u32 ct|ivs, u32 groups, int mode); dy2, y and dz are
    // read and written with the add only.
    let grads = Launch::new(
        grads,
        grid(grads, sp.blocks)?,
        &[
            Arg::Ptr(a.x),
            Arg::Ptr(a.dy),
            Arg::Ptr(dy2),
            Arg::Ptr(y),
            Arg::Ptr(dz),
            Arg::Ptr(a.st),
            Arg::Ptr(a.part),
            rows,
            c,
            per,
            groups,
            Arg::I32(mode_arg(a.mode)),
        ],
    );
    // (const float* part, u32 groups, u32 c, float count, const float*
    // gamma, float* st, float* dgamma, float* dbeta).
    let fin = Launch::new(
        BN_FINALIZE_BWD,
        grid(BN_FINALIZE_BWD, s.c.div_ceil(FIN_CH))?,
        &[
            Arg::Ptr(a.part),
            groups,
            c,
            Arg::F32((s.n * s.hw) as f32),
            Arg::Ptr(a.gamma),
            Arg::Ptr(a.st),
            Arg::Ptr(a.dgamma),
            Arg::Ptr(a.dbeta),
        ],
    );
    let apply = match a.dx {
        None => None,
        Some(dx) => {
            let apply = s.kernel(
                sp.width,
                [BN_BWD_NHWC, BN_BWD_NHWC_VEC, BN_BWD_NCHW, BN_BWD_NCHW_VEC],
            );
            // With the add, dz is the masked gradient already.
            let (g, relu_mask) = if add {
                (dz, false)
            } else {
                (a.dy, a.mode == BnFused::Relu)
            };
            let nv = s.elems() / sp.width;
            // (const T* x, const T* g, T* dx, const float* st, u32 nv, u32
            // c, u32 per, int relu_mask).
            Some(Launch::new(
                apply,
                blocks_for(nv as u64),
                &[
                    Arg::Ptr(a.x),
                    Arg::Ptr(g),
                    Arg::Ptr(dx),
                    Arg::Ptr(a.st),
                    Arg::I32(to_i32(apply, "vectors", nv)?),
                    c,
                    Arg::I32(to_i32(apply, "vectors per run", apply_per(s, sp.width))?),
                    Arg::I32(i32::from(relu_mask)),
                ],
            ))
        }
    };
    Ok([Some(grads), Some(fin), apply])
}

impl Kernels {
    /// The batch norm's forward pass in training mode (statistics, running
    /// averages, `y`).
    ///
    /// # Safety
    ///
    /// Every buffer must hold what [`BnFwdArgs`] says for shape `s` and
    /// live until the work completes on `stream`; `y` may not overlap `x`
    /// or `z`.
    pub unsafe fn bn_fwd(&self, stream: &CudaStream, s: &BnShape, a: &BnFwdArgs) -> GpuResult<()> {
        for l in fwd_launches(s, a)? {
            // SAFETY: the arguments are the kernels' (see fwd_launches),
            // the buffers the caller's.
            unsafe { self.launch(stream, l.name, l.grid, l.args())? };
        }
        Ok(())
    }

    /// The batch norm's backward pass: the parameters' gradients
    /// (written), `dz` with the add, and `dx` when asked for.
    ///
    /// # Safety
    ///
    /// As [`Kernels::bn_fwd`], for [`BnBwdArgs`]; `st` must hold what this
    /// layer's forward pass left; `dz` must be given with the add.
    pub unsafe fn bn_bwd(&self, stream: &CudaStream, s: &BnShape, a: &BnBwdArgs) -> GpuResult<()> {
        for l in bwd_launches(s, a)?.into_iter().flatten() {
            // SAFETY: as in bn_fwd (see bwd_launches).
            unsafe { self.launch(stream, l.name, l.grid, l.args())? };
        }
        Ok(())
    }
}

/// A reduction's (rows or n, c, ct or ivs, groups).
fn shape_ints(k: &'static str, s: &BnShape, sp: &Split) -> GpuResult<[i32; 4]> {
    let outer = if s.nhwc { s.n * s.hw } else { s.n };
    // The kernels index elements of a channel in 32 bits.
    to_i32(k, "elements", s.elems())?;
    Ok([
        to_i32(k, "rows", outer)?,
        to_i32(k, "channels", s.c)?,
        to_i32(k, "vectors per tile", sp.per)?,
        to_i32(k, "groups", sp.groups)?,
    ])
}

/// The elementwise passes' run: channel vectors per row (NHWC) or vectors
/// per plane (NCHW).
fn apply_per(s: &BnShape, width: usize) -> usize {
    if s.nhwc {
        s.c / width
    } else {
        s.hw / width
    }
}

fn grid(k: &'static str, blocks: usize) -> GpuResult<u32> {
    u32::try_from(blocks)
        .ok()
        .filter(|&b| b <= i32::MAX as u32)
        .ok_or_else(|| invalid(k, format!("{blocks} blocks")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(nhwc: bool, n: usize, c: usize, hw: usize) -> BnShape {
        BnShape {
            st: Storage::F16,
            nhwc,
            n,
            c,
            hw,
        }
    }

    /// A fake device pointer per buffer (`id` pages apart, `misalign`
    /// bytes off to force the element kernels) and the C++ expression of
    /// the buffer it stands for.
    struct Ptrs(Vec<(CUdeviceptr, String)>);

    impl Ptrs {
        fn at(&mut self, name: &str, misalign: u64) -> CUdeviceptr {
            let p = (self.0.len() as u64 + 1) * 4096 + misalign;
            self.0.push((p, format!("{name}.data()")));
            p
        }

        /// A launch as a C++ call, pointers by name.
        fn call(&self, l: &Launch) -> String {
            let args: Vec<String> = l
                .args()
                .iter()
                .map(|a| match a {
                    Arg::Ptr(0) => "nullptr".to_string(),
                    Arg::Ptr(p) => {
                        let (_, e) = self
                            .0
                            .iter()
                            .find(|(q, _)| q == p)
                            .expect("a named pointer");
                        e.clone()
                    }
                    a => crate::backend::cuda::emu::render(&[*a]),
                })
                .collect();
            format!(
                "emu_launch({}, [&] {{ {}({}); }});\n",
                l.grid,
                l.name,
                args.join(", ")
            )
        }
    }

    /// `bn.cu` run on the host (`backend::cuda::emu`) with the launches the
    /// wrappers plan, against the CPU's f64 reference, in every storage,
    /// both layouts, the vector and element kernels, and each fusion: the
    /// output, the saved statistics, the running averages, the add's
    /// gradient, `dx` and the parameters' gradients. The inputs sit far
    /// from zero (mean 3) to hold the shifted variance to account.
    #[test]
    fn emulated_batch_norm_matches_the_reference() {
        use crate::backend::cuda::emu;
        use crate::core::DType;
        if !emu::available() {
            return;
        }
        // (nhwc, n, c, hw, misalign, modes): vectors in NHWC and NCHW with
        // every fusion, channels and planes that take the element kernels,
        // and an aligned shape forced onto them by a misaligned buffer. (Each
        // case is a few hundred emulated launches' threads: kept few.)
        let all = &[BnFused::None, BnFused::Relu, BnFused::AddRelu][..];
        let shapes = [
            (true, 2, 16, 9, 0, all),
            (true, 3, 6, 5, 0, &[BnFused::Relu, BnFused::AddRelu][..]),
            (false, 2, 3, 16, 0, all),
            (false, 2, 5, 7, 0, &[BnFused::AddRelu][..]),
            (true, 2, 16, 9, 2, &[BnFused::None][..]),
            // Several groups of partial sums, and NHWC tiles (32 channel
            // vectors) with a partial last one.
            (true, 2, 264, 40, 0, &[BnFused::Relu][..]),
            // Threads that visit several rows, two at a time and an odd
            // one last, with the add's dz stored between.
            (true, 2, 16, 300, 0, &[BnFused::AddRelu][..]),
            (false, 3, 2, 8192, 0, &[BnFused::AddRelu][..]),
        ];
        // The storages' programs build and run side by side.
        let storages = [
            (Storage::F32, DType::F32, 1e-5),
            (Storage::F16, DType::F16, 2e-3),
            (Storage::Bf16, DType::Bf16, 1.5e-2),
        ];
        std::thread::scope(|scope| {
            for (st, dtype, tol) in storages {
                scope.spawn(move || check_storage(st, dtype, tol, &shapes));
            }
        });
    }

    type Shape<'a> = (bool, usize, usize, usize, u64, &'a [BnFused]);

    /// The body of [`emulated_batch_norm_matches_the_reference`] for one
    /// storage.
    fn check_storage(st: Storage, dtype: crate::core::DType, tol: f64, shapes: &[Shape]) {
        use crate::backend::cuda::emu::{self, EmuRun};
        use crate::core::layout::{nchw_to_nhwc, nhwc_to_nchw};
        use cnnbench_kernels::conv::reference::rel_l2_error;
        use cnnbench_kernels::norm::batchnorm::reference;
        use cnnbench_kernels::rng::fill_uniform;
        let (eps, momentum) = (1e-5f32, 0.1f32);
        {
            let ty = emu::storage_type(dtype.name());
            let (mut main, mut inputs, mut outputs, mut want) =
                (String::new(), Vec::new(), Vec::new(), Vec::new());
            for (k, &(nhwc, n, c, hw, mis, modes)) in shapes.iter().enumerate() {
                let s = BnShape { st, nhwc, n, c, hw };
                let len = s.elems();
                let gen = |seed: u64, scale: f32, at: f32| {
                    let mut v = vec![0.0f32; len];
                    fill_uniform(&mut v, seed, scale);
                    v.iter_mut().for_each(|x| *x += at);
                    dtype.round_in_place(&mut v);
                    v
                };
                let (x, z, dy, dy2) = (
                    gen(k as u64, 2.0, 3.0),
                    gen(50 + k as u64, 1.0, 0.0),
                    gen(90 + k as u64, 1.0, 0.0),
                    gen(130 + k as u64, 1.0, 0.0),
                );
                // With the add, every other shape's output gradient comes
                // in two parts, which the sums pass adds itself.
                let two_parts = k % 2 == 1;
                let mut gamma = vec![0.0f32; c];
                let mut beta = vec![0.0f32; c];
                fill_uniform(&mut gamma, 7, 0.5);
                gamma.iter_mut().for_each(|g| *g += 1.0);
                fill_uniform(&mut beta, 8, 0.5);
                // The reference runs on [rows][c].
                let to_rows = |v: &[f32]| {
                    if nhwc {
                        v.to_vec()
                    } else {
                        nchw_to_nhwc(v, n, hw, 1, c)
                    }
                };
                let from_rows = |v: &[f32]| {
                    if nhwc {
                        v.to_vec()
                    } else {
                        nhwc_to_nchw(v, n, hw, 1, c)
                    }
                };
                let (xr, zr, dyr, dy2r) = (to_rows(&x), to_rows(&z), to_rows(&dy), to_rows(&dy2));
                let (mut pre, mut mean, mut var, mut invstd) =
                    (vec![0.0; len], vec![0.0; c], vec![0.0; c], vec![0.0; c]);
                reference::fwd_train(
                    c,
                    &xr,
                    &gamma,
                    &beta,
                    eps,
                    &mut pre,
                    &mut mean,
                    &mut var,
                    &mut invstd,
                );
                let m = (n * hw) as f32;
                let run_mean: Vec<f32> = mean.iter().map(|v| momentum * v).collect();
                let run_var: Vec<f32> = var
                    .iter()
                    .map(|v| (1.0 - momentum) + momentum * v * m / (m - 1.0))
                    .collect();
                for (i, v) in [("x", &x), ("z", &z), ("dy", &dy), ("dy2", &dy2)] {
                    inputs.push((format!("{i}{k}.bin"), v.clone()));
                }
                inputs.push((format!("gamma{k}.bin"), gamma.clone()));
                inputs.push((format!("beta{k}.bin"), beta.clone()));
                for &mode in modes {
                    let add = mode == BnFused::AddRelu;
                    let parts = add && two_parts;
                    let mut y = pre.clone();
                    if add {
                        y.iter_mut().zip(&zr).for_each(|(y, z)| *y += z);
                    }
                    if mode != BnFused::None {
                        y.iter_mut().for_each(|v| *v = v.max(0.0));
                    }
                    dtype.round_in_place(&mut y);
                    // The output gradient through the fused ReLU's mask.
                    let g: Vec<f32> = dyr
                        .iter()
                        .zip(&dy2r)
                        .map(|(&d, &d2)| if parts { d + d2 } else { d })
                        .zip(&pre)
                        .zip(&y)
                        .map(|((d, &p), &o)| match mode {
                            BnFused::None => d,
                            BnFused::Relu if p > 0.0 => d,
                            BnFused::AddRelu if o > 0.0 => d,
                            _ => 0.0,
                        })
                        .collect();
                    let (mut dx, mut dg, mut db) = (vec![0.0; len], vec![0.0; c], vec![0.0; c]);
                    reference::bwd(
                        c, &xr, &g, &gamma, &mean, &invstd, &mut dx, &mut dg, &mut db,
                    );
                    dtype.round_in_place(&mut dx);
                    let mut p = Ptrs(Vec::new());
                    let fa = BnFwdArgs {
                        x: p.at("x", mis),
                        z: add.then(|| p.at("z", 0)),
                        y: p.at("y", 0),
                        gamma: p.at("gamma", 0),
                        beta: p.at("beta", 0),
                        run_mean: p.at("rm", 0),
                        run_var: p.at("rv", 0),
                        part: p.at("part", 0),
                        st: p.at("st", 0),
                        eps,
                        momentum,
                        relu: mode != BnFused::None,
                    };
                    let ba = BnBwdArgs {
                        x: fa.x,
                        dy: p.at("dy", 0),
                        dy2: parts.then(|| p.at("dy2", 0)),
                        y: fa.y,
                        dz: add.then(|| p.at("dz", 0)),
                        dx: Some(p.at("dx", 0)),
                        gamma: fa.gamma,
                        dgamma: p.at("dgamma", 0),
                        dbeta: p.at("dbeta", 0),
                        part: fa.part,
                        st: fa.st,
                        mode,
                    };
                    let fwd = fwd_launches(&s, &fa).expect("forward launches");
                    let bwd = bwd_launches(&s, &ba).expect("backward launches");
                    let vec_kernels = fwd[0].name.contains("_vec");
                    assert_eq!(vec_kernels, mis == 0 && s.width(&[]) > 1, "{s:?}");
                    let tag = format!("{k}{}", mode_arg(mode));
                    main += &format!(
                        "{{ auto x = emu_load<{ty}>(\"x{k}.bin\", {len});
                         auto z = emu_load<{ty}>(\"z{k}.bin\", {len});
                         auto dy = emu_load<{ty}>(\"dy{k}.bin\", {len});
                         auto dy2 = emu_load<{ty}>(\"dy2{k}.bin\", {len});
                         auto gamma = emu_load<F32>(\"gamma{k}.bin\", {c});
                         auto beta = emu_load<F32>(\"beta{k}.bin\", {c});
                         if ((uintptr_t)x.data() % 16 || (uintptr_t)dy.data() % 16) return 3;
                         std::vector<float> rm({c}, 0.0f), rv({c}, 1.0f), part({part}),
                             st({rows} * {c}), dgamma({c}), dbeta({c});
                         std::vector<{ty}::T> y({len}), dz({len}), dx({len});\n",
                        part = s.part_floats(),
                        rows = STAT_ROWS,
                    );
                    for l in fwd.iter().chain(bwd.iter().flatten()) {
                        main += &p.call(l);
                    }
                    main += &format!(
                        "emu_save<{ty}>(\"y{tag}.bin\", y); emu_save<{ty}>(\"dz{tag}.bin\", dz);
                         emu_save<{ty}>(\"dx{tag}.bin\", dx); emu_save<F32>(\"st{tag}.bin\", st);
                         emu_save<F32>(\"rm{tag}.bin\", rm); emu_save<F32>(\"rv{tag}.bin\", rv);
                         emu_save<F32>(\"dg{tag}.bin\", dgamma); emu_save<F32>(\"db{tag}.bin\", dbeta); }}\n"
                    );
                    for (name, l) in [("y", len), ("dz", len), ("dx", len), ("st", STAT_ROWS * c)]
                        .into_iter()
                        .chain([("rm", c), ("rv", c), ("dg", c), ("db", c)])
                    {
                        outputs.push((format!("{name}{tag}.bin"), l));
                    }
                    // The two parts' masked sum, stored in the dtype.
                    let mut dz = if add { from_rows(&g) } else { vec![0.0; len] };
                    dtype.round_in_place(&mut dz);
                    want.push((
                        format!(
                            "{} {s:?} {mode:?} misalign {mis} two parts {parts}",
                            dtype.name()
                        ),
                        [from_rows(&y), dz, from_rows(&dx)],
                        [
                            mean.clone(),
                            invstd.clone(),
                            run_mean.clone(),
                            run_var.clone(),
                            dg,
                            db,
                        ],
                    ));
                }
            }
            let got = EmuRun {
                program: &PROGRAM,
                main,
                inputs,
                outputs,
            }
            .run();
            for (got, (what, tensors, stats)) in got.chunks(8).zip(&want) {
                let c = stats[0].len();
                let close = |name: &str, g: &[f32], w: &[f32], tol: f64| {
                    let e = rel_l2_error(g, w);
                    assert!(
                        e <= tol,
                        "{what}: {name} off by {e:.1e} (tolerance {tol:.0e})"
                    );
                };
                close("y", &got[0], &tensors[0], tol);
                assert_eq!(got[1], tensors[1], "{what}: dz");
                close("dx", &got[2], &tensors[2], tol);
                close("mean", &got[3][..c], &stats[0], 1e-5);
                close("invstd", &got[3][c..2 * c], &stats[1], 1e-4);
                close("running mean", &got[4], &stats[2], 1e-5);
                close("running var", &got[5], &stats[3], 1e-4);
                close("dgamma", &got[6], &stats[4], 1e-4);
                close("dbeta", &got[7], &stats[5], 1e-4);
            }
        }
    }

    #[test]
    fn finalize_width_is_the_sources() {
        let line = format!("#define BN_FIN_CH {FIN_CH}");
        assert!(PROGRAM.source.contains(&line), "bn.cu lacks '{line}'");
    }

    /// The splits cover every channel once, aim at [`TARGET_BLOCKS`], and
    /// shrink for small tensors; the partials' buffer fits either width.
    #[test]
    fn splits_cover_the_channels_and_size_the_partials() {
        // ResNet-50's first batch norm at 256: 8 vectors of 8 channels, one
        // tile of 32 lanes, 1024 groups.
        let s = shape(true, 256, 64, 112 * 112);
        let sp = s.split(8);
        assert_eq!((sp.per, sp.groups, sp.blocks), (8, 1024, 1024));
        // 2048 channels: 256 vectors in 8 tiles of 32.
        let s = shape(true, 256, 2048, 49);
        let sp = s.split(8);
        assert_eq!((sp.per, sp.blocks / sp.groups), (32, 8));
        assert_eq!(sp.groups, 128);
        // A tiny tensor: one group.
        let s = shape(true, 2, 6, 9);
        assert_eq!(s.split(1).groups, 1);
        assert_eq!(s.width(&[0, 16]), 1);
        // NCHW: a block per channel and group.
        let s = shape(false, 256, 64, 56 * 56);
        let sp = s.split(8);
        assert_eq!((sp.per, sp.groups, sp.blocks), (392, 16, 1024));
        assert_eq!(s.width(&[16, 32]), 8);
        assert_eq!(s.width(&[16, 8]), 1);
        for s in [
            shape(true, 256, 64, 3136),
            shape(false, 256, 512, 49),
            shape(true, 3, 7, 5),
        ] {
            for w in [1, crate::backend::cuda::nvrtc::vector_len(s.st)] {
                if w > 1 && s.width(&[]) == 1 {
                    continue;
                }
                assert!(2 * s.split(w).groups * s.c <= s.part_floats(), "{s:?} {w}");
            }
        }
    }
}
