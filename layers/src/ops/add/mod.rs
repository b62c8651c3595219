//! The residual add. Its backward is free: the executor hands the output
//! gradient to both inputs as it is (no copy), see `net::plan`.

pub mod cpu;
pub mod cuda;
pub mod kernels;

use crate::backend::cpu::Cpu;
use crate::backend::cuda::backend::Cuda;
use crate::backend::cuda::GpuResult;
use crate::core::backend::Layer;
use crate::core::error::Result;
use crate::core::shape::Dims;
use crate::ops::spec::{total, Elements, NodeCx, OpSpec, Traffic};
pub use cpu::AddLayer;

/// The elementwise sum of two inputs (the residual add).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AddSpec;

impl OpSpec for AddSpec {
    fn kind(&self) -> &'static str {
        "add"
    }

    fn out(&self, x: &[Dims]) -> std::result::Result<Dims, String> {
        match x {
            [a, b] if a == b => Ok(*a),
            [a, b] => Err(format!("adds {a} and {b}")),
            _ => Err(format!("takes two inputs, not {}", x.len())),
        }
    }

    fn passes_gradient(&self) -> bool {
        true
    }

    /// Forward: both inputs read, `y` written. Backward: nothing (the
    /// inputs share the output gradient's buffer; where that gradient is a
    /// sum, the graph counts it).
    fn traffic(&self, x: &[Dims], y: Dims, _input_grad: bool) -> Traffic {
        Traffic {
            forward: Elements::per_image(total(x) + y.len()),
            backward: Elements::default(),
        }
    }

    fn cpu(&self, _cx: &NodeCx) -> Result<Box<dyn Layer<Cpu>>> {
        Ok(Box::new(AddLayer::default()))
    }

    fn cuda<'g>(&self, cx: &NodeCx, b: &Cuda<'g>) -> GpuResult<Option<Box<dyn Layer<Cuda<'g>>>>> {
        if b.paths.own_kernels {
            let n = cx.batch * cx.y.len();
            return Ok(Some(Box::new(cuda::OwnAddGpuLayer::new(
                n,
                b.dtype.storage(),
            ))));
        }
        let t = b.tensor_desc(cx.batch, cx.y)?;
        Ok(Some(Box::new(cuda::AddGpuLayer::new(t)?)))
    }
}
