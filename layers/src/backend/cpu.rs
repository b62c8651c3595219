//! The CPU backend: tensors are NHWC `f32` vectors in host memory, every
//! call is synchronous, and the host clock times it.

use crate::core::backend::{Backend, BatchDims, Elem};
use crate::core::error::{Error, Result};
use cnnbench_kernels::clock::Stopwatch;
use cnnbench_kernels::conv::{ConvShape, Direction};
use cnnbench_kernels::eltwise;
use cnnbench_kernels::Isa;
use std::collections::HashMap;

/// What every layer may consult while it runs.
pub struct Ctx {
    pub isa: Isa,
    /// Run the naive references instead of the fast kernels (`check`).
    pub reference: bool,
    /// Changes every training step (dropout draws a new mask).
    pub step_seed: u64,
    /// The fastest convolution algorithm per problem and direction, found
    /// by timing the candidates on the first run of each shape.
    pub conv_choice: HashMap<(ConvShape, Direction), &'static str>,
}

/// A parameter tensor with its gradient (and SGD's momentum buffer).
pub struct Param {
    pub value: Vec<f32>,
    pub grad: Vec<f32>,
    pub velocity: Vec<f32>,
}

impl Param {
    pub fn new(value: Vec<f32>) -> Param {
        let n = value.len();
        Param {
            value,
            grad: vec![f32::NAN; n],
            velocity: vec![0.0; n],
        }
    }
}

/// Milliseconds `f` took on the host's monotonic clock: the CPU backend's
/// clock, which its timing events and the convolution autotuner read.
pub fn time_ms(f: impl FnOnce()) -> f64 {
    let t0 = Stopwatch::start();
    f();
    t0.elapsed_ms()
}

/// The CPU backend: the ISA its kernels run at.
#[derive(Clone, Copy, Debug)]
pub struct Cpu {
    pub isa: Isa,
}

/// `len` zeroed floats, or an error where the allocator refuses them.
pub fn zeroed(len: usize) -> Result<Vec<f32>> {
    let mut v = Vec::new();
    v.try_reserve_exact(len)
        .map_err(|_| Error::host_oom(len.saturating_mul(4)))?;
    v.resize(len, 0.0);
    Ok(v)
}

impl Backend for Cpu {
    type Buf = Vec<f32>;
    type In<'a> = &'a [f32];
    type Out<'a> = &'a mut [f32];
    type Param = Param;
    type Ctx = Ctx;
    type Event = Option<Stopwatch>;
    type SumPlan = ();
    type Stage = Vec<f32>;

    fn input<'a>(buf: &'a Vec<f32>) -> &'a [f32]
    where
        Self: 'a,
    {
        buf
    }

    fn output<'a>(buf: &'a mut Vec<f32>) -> &'a mut [f32]
    where
        Self: 'a,
    {
        buf
    }

    fn alloc(&self, len: usize, _elem: Elem) -> Result<Vec<f32>> {
        zeroed(len)
    }

    fn buf_bytes(buf: &Vec<f32>) -> usize {
        buf.len() * 4
    }

    fn download(&self, buf: &Vec<f32>, _dims: BatchDims, _elem: Elem) -> Result<Vec<f32>> {
        Ok(buf.clone())
    }

    fn upload(&self, buf: &mut Vec<f32>, host: &[f32], _: BatchDims, _: Elem) -> Result<()> {
        buf.copy_from_slice(host);
        Ok(())
    }

    fn alloc_stage(&self, dims: BatchDims, _: Elem) -> Result<Vec<f32>> {
        zeroed(dims.len())
    }

    fn stage_bytes(stage: &Vec<f32>) -> usize {
        stage.len() * 4
    }

    fn stage(&self, stage: &mut Vec<f32>, host: &[f32]) -> Result<()> {
        stage.copy_from_slice(host);
        Ok(())
    }

    /// The staged values become the buffer by a swap: no second copy.
    fn unstage(&self, stage: &mut Vec<f32>, buf: &mut Vec<f32>) -> Result<()> {
        std::mem::swap(stage, buf);
        Ok(())
    }

    fn plan_sum(&self, _dims: BatchDims) -> Result<()> {
        Ok(())
    }

    fn sum(&self, cx: &mut Ctx, _: &(), parts: &[&[f32]], dst: &mut [f32]) -> Result<()> {
        eltwise::sum(cx.isa, parts, dst);
        Ok(())
    }

    fn sgd(&self, cx: &mut Ctx, p: &mut Param, lr: f32, momentum: f32) -> Result<()> {
        eltwise::sgd_update(cx.isa, &mut p.value, &p.grad, &mut p.velocity, lr, momentum);
        Ok(())
    }

    fn param_grad(&self, p: &Param) -> Result<Vec<f32>> {
        Ok(p.grad.clone())
    }

    fn param_bytes(p: &Param) -> usize {
        p.value.len() * 12
    }

    fn set_step_seed(cx: &mut Ctx, seed: u64) {
        cx.step_seed = seed;
    }

    fn ctx_bytes(_cx: &Ctx) -> usize {
        0
    }

    fn event(&self) -> Result<Option<Stopwatch>> {
        Ok(None)
    }

    fn record(&self, e: &mut Option<Stopwatch>) -> Result<()> {
        *e = Some(Stopwatch::start());
        Ok(())
    }

    fn wait(&self, _e: &Option<Stopwatch>) -> Result<()> {
        Ok(())
    }

    fn elapsed_ms(&self, a: &Option<Stopwatch>, b: &Option<Stopwatch>) -> Result<f64> {
        Ok(match (a, b) {
            (Some(a), Some(b)) => a.until(b).as_secs_f64() * 1e3,
            _ => 0.0,
        })
    }
}
