//! The residual add on cuDNN's op-tensor, or with `--own-kernels` on
//! cnnbench's vectorized kernel (`add.cu`). Its backward hands the output
//! gradient to both inputs unchanged, which the executor does by sharing
//! the buffer (`net::plan`: both input edges get the output gradient's
//! buffer id), so it has no backward work and no copy. The own kernel
//! also takes the ReLU that alone reads the sum, forward only (as the
//! CPU's add does): `relu(a + b)` in the add's one pass, the ReLU's
//! forward skipped, its backward run as before on the output.

use crate::backend::cuda::backend::{add_into, Cuda, DevPtr, GpuCtx};
use crate::backend::cuda::cudnn::TensorDesc;
use crate::backend::cuda::cudnn_ops::OpTensorDesc;
use crate::backend::cuda::nvrtc::vector_len;
use crate::backend::cuda::GpuResult;
use crate::core::backend::{Layer, ReluFusion};
use crate::core::dtype::Storage;

pub struct AddGpuLayer {
    t: TensorDesc,
    op: OpTensorDesc,
}

impl AddGpuLayer {
    pub fn new(t: TensorDesc) -> GpuResult<AddGpuLayer> {
        Ok(AddGpuLayer {
            t,
            op: OpTensorDesc::add()?,
        })
    }
}

impl<'g> Layer<Cuda<'g>> for AddGpuLayer {
    fn forward(&mut self, cx: &mut GpuCtx<'g>, x: &[DevPtr], y: DevPtr) -> GpuResult<()> {
        add_into(cx, &self.t, &self.op, x[0], x[1], y)
    }

    fn backward(
        &mut self,
        _cx: &mut GpuCtx<'g>,
        _x: &[DevPtr],
        _y: DevPtr,
        _dy: &[DevPtr],
        _dx: &mut [Option<DevPtr>],
    ) -> GpuResult<()> {
        Ok(())
    }

    fn kernels(&self) -> String {
        "cudnn op-tensor add".into()
    }
}

/// The residual add on `add.cu` (`--own-kernels`): `n` elements of
/// storage `st`.
pub struct OwnAddGpuLayer {
    n: usize,
    st: Storage,
    /// The ReLU after it runs in the same pass (forward).
    relu: bool,
}

impl OwnAddGpuLayer {
    pub fn new(n: usize, st: Storage) -> OwnAddGpuLayer {
        OwnAddGpuLayer { n, st, relu: false }
    }
}

impl<'g> Layer<Cuda<'g>> for OwnAddGpuLayer {
    fn forward(&mut self, cx: &mut GpuCtx<'g>, x: &[DevPtr], y: DevPtr) -> GpuResult<()> {
        // SAFETY: both inputs and y hold n elements of the run's storage.
        unsafe {
            cx.kernels
                .add_fwd(&cx.gpu.stream, self.st, x[0], x[1], y, self.n, self.relu)
        }
    }

    /// Never called: the executor hands the output gradient to both
    /// inputs as it is.
    fn backward(
        &mut self,
        _cx: &mut GpuCtx<'g>,
        _x: &[DevPtr],
        _y: DevPtr,
        _dy: &[DevPtr],
        _dx: &mut [Option<DevPtr>],
    ) -> GpuResult<()> {
        Ok(())
    }

    fn kernels(&self) -> String {
        let (name, per) = (self.st.name(), vector_len(self.st));
        let k = if self.relu { "add_relu_fwd" } else { "add_fwd" };
        format!("cnnbench {k}_{name} x{per} vectors")
    }

    fn fuse_relu(&mut self, _backward: bool) -> ReluFusion {
        self.relu = true;
        ReluFusion::Forward
    }
}
