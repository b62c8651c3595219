//! The image a network reads: node 0 of every graph. It has no layer on
//! any backend; the executor fills its buffer.

use crate::backend::cpu::Cpu;
use crate::backend::cuda::backend::Cuda;
use crate::backend::cuda::GpuResult;
use crate::core::backend::Layer;
use crate::core::error::{Error, Result};
use crate::core::shape::Dims;
use crate::ops::spec::{NodeCx, OpSpec, Traffic};

/// The input image.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InputSpec;

impl OpSpec for InputSpec {
    fn kind(&self) -> &'static str {
        "input"
    }

    fn out(&self, _x: &[Dims]) -> std::result::Result<Dims, String> {
        Err("is node 0 only: `Builder::new` adds it, with the network's image dims".into())
    }

    /// Nothing: the executor fills the image outside the step's passes.
    fn traffic(&self, _x: &[Dims], _y: Dims, _input_grad: bool) -> Traffic {
        Traffic::default()
    }

    fn cpu(&self, _cx: &NodeCx) -> Result<Box<dyn Layer<Cpu>>> {
        Err(no_layer())
    }

    fn cuda<'g>(&self, _cx: &NodeCx, _b: &Cuda<'g>) -> GpuResult<Option<Box<dyn Layer<Cuda<'g>>>>> {
        Err(no_layer())
    }
}

fn no_layer() -> Error {
    Error {
        call: "make layer",
        status: "the input has no layer".into(),
        oom: false,
    }
}
