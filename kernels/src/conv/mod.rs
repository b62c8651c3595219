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
    fn supports(&self, p: &ConvShape, dir: Direction, isa: Isa) -> Result<(), String>;
    /// Everything the timed call needs (scratch, tables), made once.
    fn plan(&self, p: &ConvShape, dir: Direction, isa: Isa) -> Box<dyn ConvPlan>;
    /// Largest relative L2 error against the reference that still passes.
    fn tolerance(&self) -> f64 {
        1e-5
    }
}

/// One direction of one problem, ready to run repeatedly.
pub trait ConvPlan: Send {
    /// Bytes of scratch memory the plan holds.
    fn workspace_bytes(&self) -> usize;
    /// The kernel that does the work, e.g. `avx512_conv_fwd_f32_6x64`.
    fn kernel_name(&self) -> String;
    /// Run once. Panics when `args` is not the planned direction.
    fn execute(&mut self, args: ConvArgs<'_>);
}

/// The fast algorithms, in the order `--algo all` reports them.
pub fn algorithms() -> &'static [&'static dyn ConvAlgo] {
    &[&direct::Direct, &im2col_gemm::Im2colGemm]
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
