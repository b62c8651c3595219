//! The convolution layer's CPU side: weights (gHWIO) and bias, one plan per
//! direction, and the algorithm per direction picked on the layer's first
//! run by the one autotuning rule ([`super::autotune`]).

use crate::backend::cpu::{Cpu, Ctx, Param};
use crate::core::backend::Layer;
use crate::core::error::Result;
use cnnbench_kernels::conv::{self, ConvAlgo, ConvArgs, ConvPlan, ConvShape, Direction};

pub struct ConvLayer {
    weight: Param,
    bias: Option<Param>,
    /// Whether the input needs a gradient (not for the image).
    input_grad: bool,
    plans: Plans,
}

/// The plan of each direction, made on first use.
struct Plans {
    shape: ConvShape,
    made: Vec<(Direction, &'static str, Box<dyn ConvPlan>)>,
}

impl Plans {
    /// Runs `call` with the plan for `dir`, choosing and making it first
    /// when this is the direction's first run.
    fn run(&mut self, ctx: &mut Ctx, dir: Direction, call: &mut dyn FnMut(&mut dyn ConvPlan)) {
        if let Some((_, _, p)) = self.made.iter_mut().find(|(d, _, _)| *d == dir) {
            call(p.as_mut());
            return;
        }
        let algo: &'static dyn ConvAlgo = if ctx.reference {
            &conv::Reference
        } else if let Some(name) = ctx.conv_choice.get(&(self.shape, dir)) {
            conv::find_algorithm(name).expect("a known algorithm")
        } else {
            let best = self.fastest(ctx, dir, call);
            ctx.conv_choice.insert((self.shape, dir), best.name());
            best
        };
        let mut plan = algo.plan(&self.shape, dir, ctx.isa);
        call(plan.as_mut());
        self.made.push((dir, algo.name(), plan));
    }

    /// The fastest supported algorithm by the one autotuning rule
    /// ([`super::autotune`]), tried on the real tensors (untimed: this
    /// happens during warm-up).
    fn fastest(
        &self,
        ctx: &Ctx,
        dir: Direction,
        call: &mut dyn FnMut(&mut dyn ConvPlan),
    ) -> &'static dyn ConvAlgo {
        let candidates: Vec<&'static dyn ConvAlgo> = conv::algorithms()
            .iter()
            .copied()
            .filter(|a| a.supports(&self.shape, dir, ctx.isa).is_ok())
            .collect();
        let mut plans: Vec<Box<dyn ConvPlan>> = candidates
            .iter()
            .map(|a| a.plan(&self.shape, dir, ctx.isa))
            .collect();
        let won =
            super::autotune::fastest(candidates.len(), &mut |k| call(plans[k].as_mut()), &|| {
                false
            });
        candidates[won]
    }
}

impl ConvLayer {
    /// A layer starting from `weight` (gHWIO) and `bias`.
    pub fn new(
        shape: ConvShape,
        weight: Vec<f32>,
        bias: Option<Vec<f32>>,
        input_grad: bool,
    ) -> ConvLayer {
        ConvLayer {
            weight: Param::new(weight),
            bias: bias.map(Param::new),
            input_grad,
            plans: Plans {
                shape,
                made: Vec::new(),
            },
        }
    }
}

impl Layer<Cpu> for ConvLayer {
    fn forward(&mut self, ctx: &mut Ctx, inputs: &[&[f32]], out: &mut [f32]) -> Result<()> {
        let (src, wei) = (inputs[0], &self.weight.value);
        let bias = self.bias.as_ref().map(|b| &b.value[..]);
        self.plans.run(ctx, Direction::Fwd, &mut |p| {
            p.execute(ConvArgs::Fwd {
                src,
                wei,
                bias,
                dst: &mut *out,
            })
        });
        Ok(())
    }

    fn backward(
        &mut self,
        ctx: &mut Ctx,
        inputs: &[&[f32]],
        _out: &[f32],
        dys: &[&[f32]],
        dxs: &mut [Option<&mut [f32]>],
    ) -> Result<()> {
        let (src, dy) = (inputs[0], dys[0]);
        if let (true, Some(dx)) = (self.input_grad, dxs[0].as_deref_mut()) {
            let wei = &self.weight.value;
            self.plans.run(ctx, Direction::BwdData, &mut |p| {
                p.execute(ConvArgs::BwdData {
                    diff_dst: dy,
                    wei,
                    diff_src: &mut *dx,
                })
            });
        }
        let dw = &mut self.weight.grad;
        let mut db = self.bias.as_mut().map(|b| &mut b.grad[..]);
        self.plans.run(ctx, Direction::BwdFilter, &mut |p| {
            p.execute(ConvArgs::BwdFilter {
                src,
                diff_dst: dy,
                diff_wei: &mut *dw,
                diff_bias: db.as_deref_mut(),
            })
        });
        Ok(())
    }

    fn params(&mut self) -> Vec<&mut Param> {
        let mut v = vec![&mut self.weight];
        v.extend(self.bias.as_mut());
        v
    }

    fn params_ref(&self) -> Vec<&Param> {
        let mut v = vec![&self.weight];
        v.extend(self.bias.as_ref());
        v
    }

    fn scratch_bytes(&self) -> usize {
        self.plans
            .made
            .iter()
            .map(|(_, _, p)| p.workspace_bytes())
            .sum()
    }

    fn kernels(&self) -> String {
        let mut v: Vec<_> = self.plans.made.iter().map(|(d, a, _)| (*d, *a)).collect();
        v.sort();
        v.iter()
            .map(|(d, a)| format!("{d}:{a}"))
            .collect::<Vec<_>>()
            .join(" ")
    }
}
