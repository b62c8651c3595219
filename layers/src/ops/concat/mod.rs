//! Channel concatenation (Inception modules): NHWC, so every pixel's
//! channels are copied from each input in turn.

pub mod cpu;
pub mod cuda;

use crate::backend::cpu::Cpu;
use crate::backend::cuda::backend::Cuda;
use crate::backend::cuda::GpuResult;
use crate::core::backend::Layer;
use crate::core::error::Result;
use crate::core::shape::Dims;
use crate::ops::spec::{input_grads, total, Elements, NodeCx, OpSpec, Traffic};
pub use cpu::ConcatLayer;

/// Channel concatenation of all inputs, in order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConcatSpec;

impl OpSpec for ConcatSpec {
    fn kind(&self) -> &'static str {
        "concat"
    }

    fn out(&self, x: &[Dims]) -> std::result::Result<Dims, String> {
        let Some(d0) = x.first() else {
            return Err("needs at least one input".into());
        };
        let mut c = 0;
        for d in x {
            if (d.h, d.w) != (d0.h, d0.w) {
                return Err(format!("concatenates {d} and {d0}: their images differ"));
            }
            c += d.c;
        }
        Ok(Dims::new(d0.h, d0.w, c))
    }

    /// Forward: the inputs read, `y` written; backward: `dy` read, each
    /// input's gradient written.
    fn traffic(&self, x: &[Dims], y: Dims, input_grad: bool) -> Traffic {
        Traffic {
            forward: Elements::per_image(total(x) + y.len()),
            backward: Elements::per_image(y.len() + input_grads(x, input_grad)),
        }
    }

    fn cpu(&self, cx: &NodeCx) -> Result<Box<dyn Layer<Cpu>>> {
        let x = cx.x[0];
        let widths = cx.x.iter().map(|d| d.c).collect();
        Ok(Box::new(ConcatLayer::new(cx.batch * x.h * x.w, widths)))
    }

    fn cuda<'g>(&self, cx: &NodeCx, b: &Cuda<'g>) -> GpuResult<Option<Box<dyn Layer<Cuda<'g>>>>> {
        let x = cx.x[0];
        let widths: Vec<usize> = cx.x.iter().map(|d| d.c).collect();
        let blocks = cuda::blocks(
            b.layout,
            [cx.batch, x.h, x.w],
            &widths,
            b.dtype.size_bytes(),
        );
        Ok(Some(Box::new(cuda::ConcatGpuLayer::new(blocks))))
    }
}
