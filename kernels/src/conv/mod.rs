//! CPU convolution in all three directions, fp32, NHWC (see [`shape`] for
//! the memory layouts).
//!
//! Each algorithm implements [`ConvAlgo`]: it says whether it supports a
//! problem and makes a [`ConvPlan`] once, outside any timed loop. A plan owns
//! its scratch memory, so [`ConvPlan::execute`] allocates nothing.

pub mod direct;
pub mod im2col_gemm;
pub mod reference;
pub mod shape;
pub mod winograd;

pub use shape::{ConvShape, Direction};

use crate::Isa;

/// The tensors of one direction. Slices are in the layouts of [`shape`].
pub enum ConvArgs<'a> {
    Fwd {
        src: &'a [f32],
        wei: &'a [f32],
        bias: Option<&'a [f32]>,
        dst: &'a mut [f32],
    },
    BwdData {
        diff_dst: &'a [f32],
        wei: &'a [f32],
        diff_src: &'a mut [f32],
    },
    BwdFilter {
        src: &'a [f32],
        diff_dst: &'a [f32],
        diff_wei: &'a mut [f32],
        diff_bias: Option<&'a mut [f32]>,
    },
}

impl ConvArgs<'_> {
    pub fn direction(&self) -> Direction {
        match self {
            ConvArgs::Fwd { .. } => Direction::Fwd,
            ConvArgs::BwdData { .. } => Direction::BwdData,
            ConvArgs::BwdFilter { .. } => Direction::BwdFilter,
        }
    }

    /// Panics when a slice is too short for `p`: a programming error, since
    /// callers size tensors from the same shape.
    pub fn assert_fits(&self, p: &ConvShape) {
        let ok = match self {
            ConvArgs::Fwd {
                src,
                wei,
                bias,
                dst,
            } => {
                src.len() >= p.src_len()
                    && wei.len() >= p.wei_len()
                    && bias.is_none_or(|b| b.len() >= p.oc)
                    && dst.len() >= p.dst_len()
            }
            ConvArgs::BwdData {
                diff_dst,
                wei,
                diff_src,
            } => {
                diff_dst.len() >= p.dst_len()
                    && wei.len() >= p.wei_len()
                    && diff_src.len() >= p.src_len()
            }
            ConvArgs::BwdFilter {
                src,
                diff_dst,
                diff_wei,
                diff_bias,
            } => {
                src.len() >= p.src_len()
                    && diff_dst.len() >= p.dst_len()
                    && diff_wei.len() >= p.wei_len()
                    && diff_bias.as_ref().is_none_or(|b| b.len() >= p.oc)
            }
        };
        assert!(ok, "conv tensors too small for {p:?}");
    }
}

/// A convolution algorithm.
pub trait ConvAlgo: Sync {
    /// Stable name used by `--algo` and in results.
    fn name(&self) -> &'static str;
    /// `Ok` when the algorithm can run `dir` of `p` with `isa`, else why not.
    /// Called before the run's thread pool is built: it must not ask rayon
    /// anything (that would build the global pool at its default size).
    fn supports(&self, p: &ConvShape, dir: Direction, isa: Isa) -> Result<(), String>;
    /// Everything the timed call needs (scratch, tables), made once.
    fn plan(&self, p: &ConvShape, dir: Direction, isa: Isa) -> Box<dyn ConvPlan>;
    /// Most bytes [`ConvAlgo::plan`] allocates for `dir` of `p` on the
    /// current rayon pool, at its peak: known before planning, so that a
    /// problem whose tensors fit but whose plan would not is refused in one
    /// line instead of aborting on a failed allocation. Its calls allocate
    /// at most [`CALL_BYTES_PER_THREAD`] per thread, shared by all plans.
    /// Tests hold every plan and two of its calls to both under a counting
    /// allocator.
    fn workspace_bound(&self, p: &ConvShape, dir: Direction, isa: Isa) -> u128;
    /// Largest relative L2 error against the reference that still passes.
    fn tolerance(&self, p: &ConvShape, dir: Direction) -> f64 {
        f32_tolerance(p, dir)
    }
}

/// What the calls of all plans allocate on each thread, beside their
/// plans: the `gemm` crate's packing buffers (thread-local and kept, so
/// shared by every plan; at most 2 MiB over 2 threads on ResNet-50's
/// layers, measured) and rayon's job bookkeeping (1.5 KB), with room to
/// spare.
pub const CALL_BYTES_PER_THREAD: u128 = 4 << 20;

/// A plan's small fixed parts, in every bound: its own struct, its slots'
/// locks, lists of a few entries (under 1 KB measured).
pub(crate) const PLAN_SMALL_BYTES: u128 = 64 << 10;

/// One direction of one problem, ready to run repeatedly.
pub trait ConvPlan: Send {
    /// Bytes of scratch memory the plan holds.
    fn workspace_bytes(&self) -> usize;
    /// The kernel that does the work, e.g. `avx512_conv_fwd_f32_6x64`.
    fn kernel_name(&self) -> String;
    /// Run once. Panics when `args` is not the planned direction.
    fn execute(&mut self, args: ConvArgs<'_>);
}

/// Terms summed into each output element of `dir`.
pub fn reduction_len(p: &ConvShape, dir: Direction) -> usize {
    match dir {
        Direction::Fwd => p.icg() * p.taps(),
        Direction::BwdData => p.ocg() * p.taps(),
        Direction::BwdFilter => p.mb * p.oh * p.ow,
    }
}

/// The fp32 threshold: 1e-5 relative L2 error, widened to ε·√n for
/// reductions so long (n above ~7,000 terms, as in the backward-filter of a
/// big layer) that even a correctly ordered f32 sum drifts that far from the
/// f64 reference.
pub fn f32_tolerance(p: &ConvShape, dir: Direction) -> f64 {
    f32_tolerance_for_len(reduction_len(p, dir))
}

/// [`f32_tolerance`] for any sum of `n` products (a GEMM's K, say).
pub fn f32_tolerance_for_len(n: usize) -> f64 {
    let drift = f32::EPSILON as f64 * (n as f64).sqrt();
    drift.max(1e-5)
}

/// The fast algorithms, in the order `--algo all` reports them.
pub fn algorithms() -> &'static [&'static dyn ConvAlgo] {
    &[
        &direct::Direct,
        &im2col_gemm::Im2colGemm,
        &winograd::Winograd::BY_SIZE,
        &winograd::Winograd::PANELS,
    ]
}

/// Look an algorithm up by name; `ref` is the naive reference.
pub fn find_algorithm(name: &str) -> Option<&'static dyn ConvAlgo> {
    if name == Reference.name() {
        return Some(&Reference);
    }
    algorithms().iter().copied().find(|a| a.name() == name)
}

/// The naive reference as an algorithm, so it can be timed by name.
pub struct Reference;

struct ReferencePlan(ConvShape);

impl ConvAlgo for Reference {
    fn name(&self) -> &'static str {
        "ref"
    }
    fn supports(&self, _: &ConvShape, _: Direction, _: Isa) -> Result<(), String> {
        Ok(())
    }
    fn plan(&self, p: &ConvShape, _: Direction, _: Isa) -> Box<dyn ConvPlan> {
        Box::new(ReferencePlan(*p))
    }
    fn workspace_bound(&self, _: &ConvShape, _: Direction, _: Isa) -> u128 {
        0
    }
}

impl ConvPlan for ReferencePlan {
    fn workspace_bytes(&self) -> usize {
        0
    }
    fn kernel_name(&self) -> String {
        "ref_conv_f64acc".into()
    }
    fn execute(&mut self, args: ConvArgs<'_>) {
        let p = &self.0;
        args.assert_fits(p);
        match args {
            ConvArgs::Fwd {
                src,
                wei,
                bias,
                dst,
            } => reference::fwd(p, src, wei, bias, dst),
            ConvArgs::BwdData {
                diff_dst,
                wei,
                diff_src,
            } => reference::bwd_data(p, diff_dst, wei, diff_src),
            ConvArgs::BwdFilter {
                src,
                diff_dst,
                diff_wei,
                diff_bias,
            } => reference::bwd_filter(p, src, diff_dst, diff_wei, diff_bias),
        }
    }
}

/// Seeded inputs of one shape for the tests, and a plan's forward (with
/// bias) or backward-data on them against the reference: the streamed
/// store tests of `direct` and `im2col_gemm` share it.
#[cfg(test)]
pub(crate) struct TestInputs {
    pub src: Vec<f32>,
    pub wei: Vec<f32>,
    pub bias: Vec<f32>,
    pub diff_dst: Vec<f32>,
}

#[cfg(test)]
impl TestInputs {
    pub fn new(p: &ConvShape) -> Self {
        let filled = |len: usize, seed: u64| {
            let mut v = vec![0.0; len];
            crate::rng::fill_uniform(&mut v, seed, 1.0);
            v
        };
        TestInputs {
            src: filled(p.src_len(), 1),
            wei: filled(p.wei_len(), 2),
            bias: filled(p.oc, 3),
            diff_dst: filled(p.dst_len(), 4),
        }
    }

    /// The output length of `dir` (forward or backward-data).
    pub fn out_len(p: &ConvShape, dir: Direction) -> usize {
        match dir {
            Direction::Fwd => p.dst_len(),
            _ => p.src_len(),
        }
    }

    /// The reference's forward (with bias) or backward-data.
    pub fn want(&self, p: &ConvShape, dir: Direction) -> Vec<f32> {
        let mut want = vec![0.0; Self::out_len(p, dir)];
        match dir {
            Direction::Fwd => reference::fwd(p, &self.src, &self.wei, Some(&self.bias), &mut want),
            _ => reference::bwd_data(p, &self.diff_dst, &self.wei, &mut want),
        }
        want
    }

    /// Runs `plan`'s forward (with bias) or backward-data into `out`.
    pub fn execute(&self, plan: &mut dyn ConvPlan, dir: Direction, out: &mut [f32]) {
        plan.execute(match dir {
            Direction::Fwd => ConvArgs::Fwd {
                src: &self.src,
                wei: &self.wei,
                bias: Some(&self.bias),
                dst: out,
            },
            _ => ConvArgs::BwdData {
                diff_dst: &self.diff_dst,
                wei: &self.wei,
                diff_src: out,
            },
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fp32_threshold_widens_only_for_long_reductions() {
        let layer = ConvShape {
            mb: 16,
            g: 1,
            ic: 64,
            ih: 56,
            iw: 56,
            oc: 64,
            oh: 56,
            ow: 56,
            kh: 3,
            kw: 3,
            sh: 1,
            sw: 1,
            ph: 1,
            pw: 1,
            dh: 0,
            dw: 0,
        };
        assert_eq!(reduction_len(&layer, Direction::Fwd), 576);
        assert_eq!(f32_tolerance(&layer, Direction::Fwd), 1e-5);
        assert_eq!(f32_tolerance(&layer, Direction::BwdData), 1e-5);
        // 16·56·56 = 50176 pixels: ε·√n ≈ 2.7e-5.
        let wide = f32_tolerance(&layer, Direction::BwdFilter);
        assert!((2.6e-5..2.7e-5).contains(&wide), "{wide}");
    }
}
