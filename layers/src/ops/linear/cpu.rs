//! The CPU side.

use crate::backend::cpu::{Cpu, Ctx, Param};
use crate::core::backend::Layer;
use crate::core::error::Result;
use cnnbench_kernels::gemm::{self, GemmShape};

pub struct LinearLayer {
    n: usize,
    inf: usize,
    outf: usize,
    weight: Param,
    bias: Param,
}

impl LinearLayer {
    /// `n` rows of `inf` features to `outf`, starting from `weight`
    /// (`[inf][outf]`) and `bias`.
    pub fn new(n: usize, inf: usize, outf: usize, weight: Vec<f32>, bias: Vec<f32>) -> LinearLayer {
        LinearLayer {
            n,
            inf,
            outf,
            weight: Param::new(weight),
            bias: Param::new(bias),
        }
    }

    fn gemm(ctx: &Ctx, s: GemmShape, a: &[f32], b: &[f32], c: &mut [f32]) {
        if ctx.reference {
            gemm::reference(&s, a, b, c);
        } else {
            gemm::sgemm(ctx.isa, &s, a, b, c);
        }
    }
}

fn shape(m: usize, n: usize, k: usize, trans_a: bool, trans_b: bool) -> GemmShape {
    GemmShape {
        m,
        n,
        k,
        trans_a,
        trans_b,
    }
}

impl Layer<Cpu> for LinearLayer {
    fn forward(&mut self, ctx: &mut Ctx, inputs: &[&[f32]], out: &mut [f32]) -> Result<()> {
        let s = shape(self.n, self.outf, self.inf, false, false);
        Self::gemm(ctx, s, inputs[0], &self.weight.value, out);
        for row in out.chunks_mut(self.outf) {
            for (y, b) in row.iter_mut().zip(&self.bias.value) {
                *y += b;
            }
        }
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
        let dy = dys[0];
        if let Some(dx) = dxs[0].as_deref_mut() {
            // dx[N×in] = dy[N×out]·Wᵀ, W stored in×out.
            let s = shape(self.n, self.inf, self.outf, false, true);
            Self::gemm(ctx, s, dy, &self.weight.value, dx);
        }
        // dW[in×out] = xᵀ·dy, x stored N×in.
        let s = shape(self.inf, self.outf, self.n, true, false);
        Self::gemm(ctx, s, inputs[0], dy, &mut self.weight.grad);
        let db = &mut self.bias.grad;
        db.fill(0.0);
        for row in dy.chunks(self.outf) {
            for (d, g) in db.iter_mut().zip(row) {
                *d += g;
            }
        }
        Ok(())
    }

    fn params(&mut self) -> Vec<&mut Param> {
        vec![&mut self.weight, &mut self.bias]
    }

    fn params_ref(&self) -> Vec<&Param> {
        vec![&self.weight, &self.bias]
    }
}
