//! The GEMM op (fully connected layers, `cnnbench gemm`): its tensors,
//! CPU side (the kernels crate's GEMM, packed or tiled) and CUDA side ([`cuda`],
//! cuBLAS GemmEx). Its problem syntax is the binary's (`problem::gemm`).

pub mod cuda;

pub use cnnbench_kernels::gemm::GemmShape;
use cnnbench_kernels::rng::fill_uniform;

/// Host copies of A, B and C (f32), inputs seeded uniform in [-1, 1).
pub struct GemmTensors {
    pub shape: GemmShape,
    pub a: Vec<f32>,
    pub b: Vec<f32>,
    pub c: Vec<f32>,
}

impl GemmTensors {
    pub fn random(s: &GemmShape, seed: u64) -> GemmTensors {
        let mut t = GemmTensors {
            shape: *s,
            a: vec![0.0; s.m * s.k],
            b: vec![0.0; s.k * s.n],
            c: vec![f32::NAN; s.m * s.n],
        };
        fill_uniform(&mut t.a, seed, 1.0);
        fill_uniform(&mut t.b, seed.wrapping_add(1), 1.0);
        t
    }

    /// Bytes of A, B and C in f32.
    pub fn bytes_needed(s: &GemmShape) -> u128 {
        4 * (s.m as u128 * s.k as u128 + s.k as u128 * s.n as u128 + s.m as u128 * s.n as u128)
    }

    /// Runs the CPU GEMM once into `c`, on `isa` (see
    /// [`cnnbench_kernels::gemm`]).
    pub fn run_cpu(&mut self, isa: cnnbench_kernels::Isa) {
        cnnbench_kernels::gemm::sgemm(isa, &self.shape, &self.a, &self.b, &mut self.c);
    }

    pub fn reference(&self) -> Vec<f32> {
        let mut c = vec![0.0; self.c.len()];
        cnnbench_kernels::gemm::reference(&self.shape, &self.a, &self.b, &mut c);
        c
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_gemm_is_checked_against_the_reference() {
        let s = GemmShape {
            m: 33,
            n: 65,
            k: 17,
            trans_a: true,
            trans_b: false,
        };
        let mut t = GemmTensors::random(&s, 3);
        t.run_cpu(cnnbench_kernels::Isa::detect());
        let e = cnnbench_kernels::conv::reference::rel_l2_error(&t.c, &t.reference());
        assert!(e < 1e-6, "{e}");
    }
}
