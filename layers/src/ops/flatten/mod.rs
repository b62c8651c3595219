//! Flatten: in NHWC an image's `h x w x c` values are already one row, so
//! the executor makes the output share the input's memory, and the
//! gradient likewise; nothing runs.

pub mod cpu;

use crate::backend::cpu::Cpu;
use crate::backend::cuda::backend::Cuda;
use crate::backend::cuda::GpuResult;
use crate::core::backend::Layer;
use crate::core::error::Result;
use crate::core::shape::Dims;
use crate::ops::spec::{one_input, NodeCx, OpSpec, Traffic};
pub use cpu::FlattenLayer;

/// `h x w x c` to `1 x 1 x (h·w·c)`: its output aliases its input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlattenSpec;

impl OpSpec for FlattenSpec {
    fn kind(&self) -> &'static str {
        "flatten"
    }

    fn out(&self, x: &[Dims]) -> std::result::Result<Dims, String> {
        Ok(Dims::new(1, 1, one_input(x)?.len()))
    }

    fn aliases_input(&self) -> bool {
        true
    }

    fn passes_gradient(&self) -> bool {
        true
    }

    /// Nothing: the output is the input's memory.
    fn traffic(&self, _x: &[Dims], _y: Dims, _input_grad: bool) -> Traffic {
        Traffic::default()
    }

    fn cpu(&self, _cx: &NodeCx) -> Result<Box<dyn Layer<Cpu>>> {
        Ok(Box::new(FlattenLayer))
    }

    fn cuda<'g>(&self, _cx: &NodeCx, _b: &Cuda<'g>) -> GpuResult<Option<Box<dyn Layer<Cuda<'g>>>>> {
        Ok(None)
    }
}
