//! The CPU side of the convolution op: one planned direction of one
//! algorithm, run on [`ConvTensors`].

use super::ConvTensors;
use cnnbench_kernels::conv::{ConvAlgo, ConvArgs, ConvPlan, Direction};
use cnnbench_kernels::Isa;

/// One direction of a convolution on the CPU, planned once.
pub struct CpuConv {
    plan: Box<dyn ConvPlan>,
    dir: Direction,
    bias: bool,
}

impl CpuConv {
    /// Plans `dir` of `t.shape` with `algo`; the caller has checked
    /// `algo.supports(...)`.
    pub fn new(
        algo: &dyn ConvAlgo,
        t: &ConvTensors,
        dir: Direction,
        isa: Isa,
        bias: bool,
    ) -> CpuConv {
        CpuConv {
            plan: algo.plan(&t.shape, dir, isa),
            dir,
            bias,
        }
    }

    pub fn kernel_name(&self) -> String {
        self.plan.kernel_name()
    }

    pub fn workspace_bytes(&self) -> usize {
        self.plan.workspace_bytes()
    }

    /// Runs the direction once, reading the inputs and writing the outputs of `t`.
    pub fn run(&mut self, t: &mut ConvTensors) {
        let args = match self.dir {
            Direction::Fwd => ConvArgs::Fwd {
                src: &t.src,
                wei: &t.wei,
                bias: self.bias.then_some(&t.bias[..]),
                dst: &mut t.dst,
            },
            Direction::BwdData => ConvArgs::BwdData {
                diff_dst: &t.diff_dst,
                wei: &t.wei,
                diff_src: &mut t.diff_src,
            },
            Direction::BwdFilter => ConvArgs::BwdFilter {
                src: &t.src,
                diff_dst: &t.diff_dst,
                diff_wei: &mut t.diff_wei,
                diff_bias: self.bias.then_some(&mut t.diff_bias[..]),
            },
        };
        self.plan.execute(args);
    }
}
