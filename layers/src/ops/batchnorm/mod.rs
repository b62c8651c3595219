//! Batch normalisation in training mode: batch statistics normalise the
//! output, and the running averages are updated as PyTorch does (unbiased
//! variance, `momentum` weight on the new batch).

pub mod cpu;
pub mod cuda;
pub mod fused;
pub mod kernels;
pub mod own;

use crate::backend::cpu::Cpu;
use crate::backend::cuda::backend::Cuda;
use crate::backend::cuda::backend::HostOrder;
use crate::backend::cuda::GpuResult;
use crate::core::backend::Layer;
use crate::core::error::Result;
use crate::core::shape::Dims;
use crate::core::Layout;
use crate::ops::spec::{Elements, NodeCx, OpSpec, Traffic};
pub use cpu::BatchNormLayer;

/// Batch normalisation in training mode: batch statistics, running
/// averages updated.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BatchNormSpec {
    pub eps: f32,
    pub momentum: f32,
}

impl OpSpec for BatchNormSpec {
    fn kind(&self) -> &'static str {
        "bn"
    }

    fn param_sizes(&self, x: &[Dims]) -> Vec<usize> {
        vec![x[0].c, x[0].c]
    }

    fn init(&self, cx: &NodeCx) -> Vec<Vec<f32>> {
        let c = cx.x[0].c;
        vec![vec![1.0; c], vec![0.0; c]]
    }

    /// Two passes each way: the statistics need the whole batch before
    /// any output, so a tensor larger than the caches is read twice.
    /// Forward: `x` for the statistics, `x` again and `y` written for the
    /// normalisation (gamma and beta read). Backward: `x` and `dy` for the
    /// gradient sums, again for `dx`, and `dx` written (gamma read, the
    /// gradients of gamma and beta written). Running and saved statistics
    /// (a few values per channel) are not counted.
    fn traffic(&self, x: &[Dims], y: Dims, input_grad: bool) -> Traffic {
        let (xn, c) = (x[0].len(), x[0].c);
        let dx = if input_grad { xn } else { 0 };
        Traffic {
            forward: Elements::per_image(2 * xn + y.len()).plus_fixed(2 * c),
            backward: Elements::per_image(2 * (xn + y.len()) + dx).plus_fixed(3 * c),
        }
    }

    fn cpu(&self, cx: &NodeCx) -> Result<Box<dyn Layer<Cpu>>> {
        let [gamma, beta] = two(self.init(cx));
        Ok(Box::new(BatchNormLayer::new(
            self.eps,
            self.momentum,
            gamma,
            beta,
        )))
    }

    fn cuda<'g>(&self, cx: &NodeCx, b: &Cuda<'g>) -> GpuResult<Option<Box<dyn Layer<Cuda<'g>>>>> {
        let x = cx.x[0];
        let [gamma, beta] = two(self.init(cx));
        if b.paths.own_bn {
            let shape = kernels::BnShape {
                st: b.dtype.storage(),
                nhwc: b.layout == Layout::Nhwc,
                n: cx.batch,
                c: x.c,
                hw: x.h * x.w,
            };
            let l = own::OwnBatchNormGpuLayer::new(
                b.gpu,
                shape,
                self.eps,
                self.momentum,
                b.param(&gamma, HostOrder::Plain, None)?,
                b.param(&beta, HostOrder::Plain, None)?,
                // `--fuse-bn`: in every dtype and layout.
                b.paths.fuse_bn,
                b.paths.own_bn_parts,
            )?;
            return Ok(Some(Box::new(l)));
        }
        let l = cuda::BatchNormGpuLayer::new(
            b.gpu,
            [cx.batch, x.c, x.h, x.w],
            b.dtype,
            b.layout,
            self.eps,
            self.momentum,
            b.param(&gamma, HostOrder::Plain, None)?,
            b.param(&beta, HostOrder::Plain, None)?,
            cx.input_grad,
            // `--fuse-bn`: the layer may take what follows it.
            b.paths.fuse_bn,
        )?;
        Ok(Some(Box::new(l)))
    }
}

/// The weight and bias of [`OpSpec::init`].
fn two(mut p: Vec<Vec<f32>>) -> [Vec<f32>; 2] {
    let beta = p.pop().unwrap_or_default();
    let gamma = p.pop().unwrap_or_default();
    [gamma, beta]
}
