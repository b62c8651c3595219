//! The convolution op: its tensors, its CPU side ([`cpu`]), and the checks
//! shared by every backend.

pub mod autotune;
pub mod cpu;
pub mod cpu_layer;
pub mod cuda;
pub mod cudnn_algos;
pub mod cudnn_conv;
pub mod gpu_layer;
pub mod graph_conv;
pub mod kernels;
pub mod memo;
pub mod norm_conv;
#[cfg(test)]
mod tests;

use crate::backend::cpu::Cpu;
use crate::backend::cuda::backend::{Cuda, HostOrder};
use crate::backend::cuda::GpuResult;
use crate::core::backend::Layer;
use crate::core::error::Result;
use crate::core::init::fan_in_uniform;
use crate::core::shape::{window_out, Dims};
use crate::ops::spec::{one_input, weighted, NodeCx, OpSpec, Traffic};
use cnnbench_kernels::conv::{reference, ConvShape, Direction};
use cnnbench_kernels::rng::fill_uniform;

/// A convolution's hyper-parameters (dense: no dilation in the zoo).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConvSpec {
    pub oc: usize,
    pub kh: usize,
    pub kw: usize,
    pub sh: usize,
    pub sw: usize,
    pub ph: usize,
    pub pw: usize,
    pub groups: usize,
    pub bias: bool,
}

impl ConvSpec {
    /// A square `k x k` convolution with stride `s` and padding `p`.
    pub fn square(oc: usize, k: usize, s: usize, p: usize) -> ConvSpec {
        ConvSpec {
            oc,
            kh: k,
            kw: k,
            sh: s,
            sw: s,
            ph: p,
            pw: p,
            groups: 1,
            bias: false,
        }
    }
    pub fn with_bias(self) -> ConvSpec {
        ConvSpec { bias: true, ..self }
    }
    pub fn groups(self, g: usize) -> ConvSpec {
        ConvSpec { groups: g, ..self }
    }
}

impl ConvSpec {
    /// The convolution problem at batch `mb` reading `x` and writing `y`.
    pub fn shape(&self, x: Dims, y: Dims, mb: usize) -> ConvShape {
        ConvShape {
            mb,
            g: self.groups,
            ic: x.c,
            ih: x.h,
            iw: x.w,
            oc: self.oc,
            oh: y.h,
            ow: y.w,
            kh: self.kh,
            kw: self.kw,
            sh: self.sh,
            sw: self.sw,
            ph: self.ph,
            pw: self.pw,
            dh: 0,
            dw: 0,
        }
    }
}

impl OpSpec for ConvSpec {
    fn kind(&self) -> &'static str {
        "conv"
    }

    fn out(&self, x: &[Dims]) -> std::result::Result<Dims, String> {
        let d = one_input(x)?;
        if self.groups == 0
            || !d.c.is_multiple_of(self.groups)
            || !self.oc.is_multiple_of(self.groups)
        {
            return Err(format!(
                "{} input and {} output channels are not divisible into {} groups",
                d.c, self.oc, self.groups
            ));
        }
        let (h, w) = window_out(
            d,
            (self.kh, self.kw),
            (self.sh, self.sw),
            (self.ph, self.pw),
            false,
        )?;
        Ok(Dims::new(h, w, self.oc))
    }

    fn param_sizes(&self, x: &[Dims]) -> Vec<usize> {
        let weight = self.kh * self.kw * (x[0].c / self.groups) * self.oc;
        if self.bias {
            vec![weight, self.oc]
        } else {
            vec![weight]
        }
    }

    fn macs(&self, x: &[Dims], y: Dims) -> u64 {
        self.shape(x[0], y, 1).macs()
    }

    fn init(&self, cx: &NodeCx) -> Vec<Vec<f32>> {
        let shape = self.shape(cx.x[0], cx.y, 1);
        let fan_in = shape.icg() * shape.taps();
        let s = cx.layer_seed();
        let mut p = vec![fan_in_uniform(shape.wei_len(), fan_in, s)];
        if self.bias {
            p.push(fan_in_uniform(self.oc, fan_in, s ^ 1));
        }
        p
    }

    /// Forward `x + w + y`; backward `dy + x (+ w + dx)` and the
    /// parameters' gradients ([`weighted`]).
    fn traffic(&self, x: &[Dims], y: Dims, input_grad: bool) -> Traffic {
        let p = self.param_sizes(x);
        weighted(x[0], y, p[0], p.iter().sum(), input_grad)
    }

    /// The plans the layer keeps, one per direction: its algorithms are
    /// autotuned on the first run, so here the largest bound of any that
    /// could win, on any ISA this CPU has.
    fn cpu_plan_bytes(&self, x: &[Dims], batch: usize) -> u128 {
        let Ok(y) = self.out(x) else {
            return 0;
        };
        let shape = self.shape(x[0], y, batch);
        [Direction::Fwd, Direction::BwdData, Direction::BwdFilter]
            .into_iter()
            .map(|dir| {
                let mut most = 0;
                for isa in cnnbench_kernels::Isa::supported() {
                    for a in cnnbench_kernels::conv::algorithms() {
                        if a.supports(&shape, dir, isa).is_ok() {
                            most = most.max(a.workspace_bound(&shape, dir, isa));
                        }
                    }
                }
                most
            })
            .sum()
    }

    fn cpu(&self, cx: &NodeCx) -> Result<Box<dyn Layer<Cpu>>> {
        let shape = self.shape(cx.x[0], cx.y, cx.batch);
        let mut p = self.init(cx).into_iter();
        let weight = p.next().unwrap_or_default();
        Ok(Box::new(cpu_layer::ConvLayer::new(
            shape,
            weight,
            p.next(),
            cx.input_grad,
        )))
    }

    fn cuda<'g>(&self, cx: &NodeCx, b: &Cuda<'g>) -> GpuResult<Option<Box<dyn Layer<Cuda<'g>>>>> {
        let shape = self.shape(cx.x[0], cx.y, cx.batch);
        let host = self.init(cx);
        let half = b.half_storage();
        let weight = b.param(&host[0], HostOrder::Filter(shape, b.layout), half)?;
        let bias = match host.get(1) {
            Some(h) => Some(b.param(h, HostOrder::Plain, half)?),
            None => None,
        };
        let l = gpu_layer::ConvGpuLayer::new(
            &b.gpu.stream,
            shape,
            b.dtype,
            b.layout,
            weight,
            bias,
            cx.input_grad,
        )?;
        Ok(Some(Box::new(l)))
    }
}

/// Every tensor of one convolution problem, in the CPU layouts (NHWC
/// activations, gHWIO weights), inputs filled with seeded random data.
pub struct ConvTensors {
    pub shape: ConvShape,
    pub src: Vec<f32>,
    pub wei: Vec<f32>,
    pub bias: Vec<f32>,
    pub dst: Vec<f32>,
    pub diff_dst: Vec<f32>,
    pub diff_src: Vec<f32>,
    pub diff_wei: Vec<f32>,
    pub diff_bias: Vec<f32>,
}

/// Value written to outputs before a checked run, so that elements an
/// algorithm never writes show up as errors.
pub const POISON: f32 = f32::NAN;

impl ConvTensors {
    /// Elements of all tensors together, or `None` on overflow.
    pub fn elements_needed(p: &ConvShape) -> Option<u128> {
        let act = |a: usize, b: usize, c: usize, d: usize| {
            (a as u128) * (b as u128) * (c as u128) * (d as u128)
        };
        let src = act(p.mb, p.ih, p.iw, p.ic);
        let dst = act(p.mb, p.oh, p.ow, p.oc);
        let wei = act(p.g, p.kh * p.kw, p.ic / p.g, p.oc / p.g);
        // src, diff_src, dst, diff_dst, wei, diff_wei, bias, diff_bias.
        Some(2 * src + 2 * dst + 2 * wei + 2 * p.oc as u128)
    }

    /// Allocates every tensor; inputs are uniform in [-1, 1), never zeros,
    /// outputs start poisoned.
    pub fn random(p: &ConvShape, seed: u64) -> ConvTensors {
        let mut t = ConvTensors {
            shape: *p,
            src: vec![0.0; p.src_len()],
            wei: vec![0.0; p.wei_len()],
            bias: vec![0.0; p.oc],
            dst: vec![POISON; p.dst_len()],
            diff_dst: vec![0.0; p.dst_len()],
            diff_src: vec![POISON; p.src_len()],
            diff_wei: vec![POISON; p.wei_len()],
            diff_bias: vec![POISON; p.oc],
        };
        fill_uniform(&mut t.src, seed, 1.0);
        fill_uniform(&mut t.wei, seed.wrapping_add(1), 1.0);
        fill_uniform(&mut t.bias, seed.wrapping_add(2), 1.0);
        fill_uniform(&mut t.diff_dst, seed.wrapping_add(3), 1.0);
        t
    }

    /// Poisons the outputs of `dir`.
    pub fn poison(&mut self, dir: Direction) {
        for (_, out) in self.outputs_mut(dir) {
            out.fill(POISON);
        }
    }

    /// The outputs of `dir`, by name (`diff_bias` only with bias).
    pub fn outputs(&self, dir: Direction, bias: bool) -> Vec<(&'static str, &[f32])> {
        match dir {
            Direction::Fwd => vec![("dst", &self.dst)],
            Direction::BwdData => vec![("diff_src", &self.diff_src)],
            Direction::BwdFilter if bias => {
                vec![("diff_wei", &self.diff_wei), ("diff_bias", &self.diff_bias)]
            }
            Direction::BwdFilter => vec![("diff_wei", &self.diff_wei)],
        }
    }

    fn outputs_mut(&mut self, dir: Direction) -> Vec<(&'static str, &mut [f32])> {
        match dir {
            Direction::Fwd => vec![("dst", &mut self.dst)],
            Direction::BwdData => vec![("diff_src", &mut self.diff_src)],
            Direction::BwdFilter => vec![
                ("diff_wei", &mut self.diff_wei),
                ("diff_bias", &mut self.diff_bias),
            ],
        }
    }
}

/// The reference outputs of `dir`, named as in [`ConvTensors::outputs`].
pub fn reference_outputs(
    t: &ConvTensors,
    dir: Direction,
    bias: bool,
) -> Vec<(&'static str, Vec<f32>)> {
    let p = &t.shape;
    match dir {
        Direction::Fwd => {
            let mut dst = vec![0.0; p.dst_len()];
            reference::fwd(p, &t.src, &t.wei, bias.then_some(&t.bias[..]), &mut dst);
            vec![("dst", dst)]
        }
        Direction::BwdData => {
            let mut ds = vec![0.0; p.src_len()];
            reference::bwd_data(p, &t.diff_dst, &t.wei, &mut ds);
            vec![("diff_src", ds)]
        }
        Direction::BwdFilter => {
            let mut dw = vec![0.0; p.wei_len()];
            let mut db = vec![0.0; p.oc];
            reference::bwd_filter(p, &t.src, &t.diff_dst, &mut dw, bias.then_some(&mut db[..]));
            if bias {
                vec![("diff_wei", dw), ("diff_bias", db)]
            } else {
                vec![("diff_wei", dw)]
            }
        }
    }
}

/// The worst relative L2 error over the outputs of `dir`; infinite when an
/// output holds NaN (for instance, an element left poisoned).
pub fn worst_rel_err(
    t: &ConvTensors,
    dir: Direction,
    bias: bool,
    want: &[(&'static str, Vec<f32>)],
) -> f64 {
    let got = t.outputs(dir, bias);
    want.iter()
        .map(|(name, w)| {
            let g = got
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, g)| *g)
                .expect("same output names");
            reference::rel_l2_error(g, w)
        })
        .fold(0.0, |a: f64, e| {
            if e.is_nan() || a.is_nan() {
                f64::NAN
            } else {
                a.max(e)
            }
        })
}
