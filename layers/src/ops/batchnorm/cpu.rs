//! The CPU side.

use crate::backend::cpu::{Cpu, Ctx, Param};
use crate::core::backend::Layer;
use crate::core::backend::ReluFusion;
use crate::core::error::Result;
use cnnbench_kernels::norm::batchnorm::{self as kernel, reference, BatchStats, Epilogue};

pub struct BatchNormLayer {
    c: usize,
    eps: f32,
    momentum: f32,
    gamma: Param,
    beta: Param,
    pub running_mean: Vec<f32>,
    pub running_var: Vec<f32>,
    stats: BatchStats,
    /// The ReLU after it runs inside its passes (see [`ReluFusion`]).
    relu: ReluFusion,
    /// The residual add after it and that add's ReLU run inside it
    /// ([`Layer::fuse_add_relu`]): in the pass writing its output forward,
    /// in its reduction pass backward (see [`kernel::bwd_add_relu`]).
    add_relu: bool,
}

impl BatchNormLayer {
    /// γ = 1, β = 0, running mean 0 and variance 1 (PyTorch's start).
    /// A layer over `gamma.len()` channels starting from `gamma` and `beta`.
    pub fn new(eps: f32, momentum: f32, gamma: Vec<f32>, beta: Vec<f32>) -> BatchNormLayer {
        let c = gamma.len();
        BatchNormLayer {
            c,
            eps,
            momentum,
            gamma: Param::new(gamma),
            beta: Param::new(beta),
            running_mean: vec![0.0; c],
            running_var: vec![1.0; c],
            stats: BatchStats::new(c),
            relu: ReluFusion::None,
            add_relu: false,
        }
    }
}

impl Layer<Cpu> for BatchNormLayer {
    fn forward(&mut self, ctx: &mut Ctx, inputs: &[&[f32]], out: &mut [f32]) -> Result<()> {
        let x = inputs[0];
        let (g, b) = (&self.gamma.value, &self.beta.value);
        let st = &mut self.stats;
        if ctx.reference {
            assert_eq!(self.relu, ReluFusion::None, "reference layers run unfused");
            assert!(!self.add_relu, "reference layers run unfused");
            let (m, v, is) = (&mut st.mean, &mut st.var, &mut st.invstd);
            reference::fwd_train(self.c, x, g, b, self.eps, out, m, v, is);
        } else {
            let epi = match (self.add_relu, self.relu) {
                (true, _) => Epilogue::AddRelu(inputs[1]),
                (false, ReluFusion::None) => Epilogue::None,
                (false, _) => Epilogue::Relu,
            };
            kernel::fwd_train(ctx.isa, self.c, x, g, b, self.eps, epi, out, st);
        }
        let rows = (x.len() / self.c) as f32;
        let unbias = rows / (rows - 1.0).max(1.0);
        for i in 0..self.c {
            let mo = self.momentum;
            self.running_mean[i] = (1.0 - mo) * self.running_mean[i] + mo * st.mean[i];
            self.running_var[i] = (1.0 - mo) * self.running_var[i] + mo * st.var[i] * unbias;
        }
        Ok(())
    }

    fn backward(
        &mut self,
        ctx: &mut Ctx,
        inputs: &[&[f32]],
        out: &[f32],
        dys: &[&[f32]],
        dxs: &mut [Option<&mut [f32]>],
    ) -> Result<()> {
        let x = inputs[0];
        let (first, rest) = dxs.split_at_mut(1);
        let mut scratch;
        let dx = match first[0].as_deref_mut() {
            Some(dx) => dx,
            None => {
                scratch = vec![0.0; x.len()];
                &mut scratch[..]
            }
        };
        let (dg, db) = (&mut self.gamma.grad, &mut self.beta.grad);
        let (g, st) = (&self.gamma.value, &self.stats);
        if self.add_relu {
            // The add's output gradient relu'(y)·dy goes to z and is this
            // layer's own output gradient; dy comes in its two parts
            // (`takes_gradient_parts`) or summed.
            let dz = rest[0]
                .as_deref_mut()
                .expect("a fused add's gradient buffer");
            kernel::bwd_add_relu(ctx.isa, self.c, x, out, dys, g, st, dz, dx, dg, db);
        } else if ctx.reference {
            reference::bwd(self.c, x, dys[0], g, &st.mean, &st.invstd, dx, dg, db);
        } else {
            let relu = self.relu == ReluFusion::ForwardBackward;
            kernel::bwd(ctx.isa, self.c, x, dys[0], g, st, relu, dx, dg, db);
        }
        Ok(())
    }

    /// Forward always; backward too where the executor lets it (the ReLU's
    /// output gradient is one tensor, or summed into one for it).
    fn fuse_relu(&mut self, backward: bool) -> ReluFusion {
        self.relu = if backward {
            ReluFusion::ForwardBackward
        } else {
            ReluFusion::Forward
        };
        self.relu
    }

    /// With the add: the block output's two gradient parts, read in the
    /// reduction pass (as the GPU's own batch norm reads them with
    /// `--own-bn=parts`).
    fn takes_gradient_parts(&mut self, parts: usize) -> bool {
        self.add_relu && parts == 2
    }

    /// Forward and backward, where the executor offers it (see
    /// `add_relu`: every CPU run with ReLU fusion).
    fn fuse_add_relu(&mut self) -> bool {
        self.add_relu = true;
        true
    }

    fn params(&mut self) -> Vec<&mut Param> {
        vec![&mut self.gamma, &mut self.beta]
    }

    fn params_ref(&self) -> Vec<&Param> {
        vec![&self.gamma, &self.beta]
    }

    fn scratch_bytes(&self) -> usize {
        // The saved statistics (mean, var, invstd, scale, shift).
        5 * self.c * 4
    }

    fn kernels(&self) -> String {
        if self.add_relu {
            return "add+relu fused (forward, backward)".into();
        }
        match self.relu {
            ReluFusion::None => String::new(),
            ReluFusion::Forward => "relu fused (forward)".into(),
            ReluFusion::ForwardBackward => "relu fused (forward, backward)".into(),
        }
    }
}
