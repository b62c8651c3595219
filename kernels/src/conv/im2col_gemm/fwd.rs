//! Forward: `dst = im2col(src) · W + bias`, one GEMM per pixel chunk and group.

use super::engine::{ConvGemm, Engine, Weights};
use super::gather::{AxisMap, Gather};
use crate::conv::ConvShape;
use crate::Isa;

/// The forward gather of `p`: output pixels read `src` through the kernel
/// taps. Also the im2col matrix of backward-filter.
pub fn fwd_gather(p: &ConvShape) -> Gather {
    Gather {
        mb: p.mb,
        y: AxisMap::fwd(p.oh, p.ih, p.kh, p.sh, p.ph, p.dil_h()),
        x: AxisMap::fwd(p.ow, p.iw, p.kw, p.sw, p.pw, p.dil_w()),
        src_c: p.ic,
        cg: p.icg(),
    }
}

pub struct FwdPlan {
    engine: Engine,
}

/// The forward as one conv of the engine.
fn conv(p: &ConvShape) -> ConvGemm {
    // gHWIO weights are already the [kh·kw·icg x ocg] matrix per group.
    ConvGemm {
        gather: fwd_gather(p),
        groups: p.g,
        dg: p.ocg(),
        dst_c: p.oc,
        dst_h: p.oh,
        dst_w: p.ow,
        wei: Weights::Dense { off: 0 },
        packed: true,
    }
}

impl FwdPlan {
    /// The bytes [`FwdPlan::new`] allocates.
    pub fn bytes_bound(p: &ConvShape, isa: Isa) -> u128 {
        Engine::bytes_bound(&[conv(p)], isa)
    }

    pub fn new(p: &ConvShape, isa: Isa) -> Self {
        FwdPlan {
            engine: Engine::new(vec![conv(p)], isa),
        }
    }

    pub fn workspace_bytes(&self) -> usize {
        self.engine.workspace_bytes()
    }

    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    pub fn run(&mut self, src: &[f32], wei: &[f32], bias: Option<&[f32]>, dst: &mut [f32]) {
        self.engine.run(src, wei, bias, dst);
    }
}
