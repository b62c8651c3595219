//! The CUDA side (not written yet).

use crate::backend::cuda::layer::Cuda;
use crate::backend::cuda::GpuResult;
use crate::core::backend::Layer;
use crate::core::error::Error;
use crate::ops::spec::NodeCx;

pub fn layer<'g>(cx: &NodeCx, b: &Cuda<'g>) -> GpuResult<Option<Box<dyn Layer<Cuda<'g>>>>> {
    let _ = (cx, b);
    Err(Error::invalid("make layer", "sigmoid_bce has no GPU layer yet".into()))
}
