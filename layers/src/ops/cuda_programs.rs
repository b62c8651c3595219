//! Every CUDA C program cnnbench compiles with NVRTC: the backend's own
//! (casts, SGD) and each op's (loss, dropout, pool), gathered here once.
//! An op with kernels of its own names its `PROGRAM` on its registry line
//! ([`super::OP_PROGRAMS`]).

use crate::backend::cuda::nvrtc::{Kernels, Program, BACKEND_PROGRAMS};
use crate::backend::cuda::GpuResult;
use cudarc::driver::CudaContext;
use std::sync::Arc;

/// The programs, in compile order.
pub fn cuda_programs() -> Vec<Program> {
    let mut all = BACKEND_PROGRAMS.to_vec();
    all.extend_from_slice(super::OP_PROGRAMS);
    all
}

/// Compiles every program for a device of compute capability `cc` and
/// loads its kernels into `ctx` (see [`Kernels::compile`]).
pub fn compile_kernels(ctx: &Arc<CudaContext>, cc: (i32, i32)) -> GpuResult<Kernels> {
    Kernels::compile(ctx, cc, &cuda_programs())
}

/// Every kernel the programs define.
pub fn kernel_names(programs: &[Program]) -> Vec<&'static str> {
    programs.iter().flat_map(|p| p.kernels).copied().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::cuda::nvrtc::tests::nvrtc_here;
    use crate::backend::cuda::nvrtc::{
        compile_all, compile_cubin, compile_ptx, supported_archs, Target,
    };

    #[test]
    fn every_kernel_compiles_to_ptx() {
        if !nvrtc_here() {
            return;
        }
        let programs_all = cuda_programs();
        for arch in ["compute_90", "compute_80", "compute_75"] {
            let programs = compile_all(arch, &programs_all).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(programs.len(), programs_all.len());
            for (file, _, log) in &programs {
                assert!(log.is_empty(), "{file} ({arch}) has warnings:\n{log}");
            }
            let ptx = compile_ptx(arch, &programs_all).unwrap();
            for name in kernel_names(&programs_all) {
                let entry = format!(".entry {name}(");
                let found = ptx.iter().filter(|(_, ptx)| ptx.contains(&entry));
                assert_eq!(found.count(), 1, "{name} ({arch})");
            }
            // The half conversions are single instructions, not calls; bf16
            // rounding is one from compute_80.
            let all: String = ptx.iter().map(|(_, ptx)| ptx.as_str()).collect();
            assert!(all.contains("cvt.f32.f16") && all.contains("cvt.rn.f16.f32"));
            assert_eq!(all.contains("cvt.rn.bf16.f32"), arch != "compute_75");
            assert!(!all.contains(".local"), "{arch}: local memory");
        }
        assert!(compile_ptx("sm_90", &programs_all).is_err());
    }

    #[test]
    fn every_kernel_compiles_to_cubin_for_each_supported_gpu() {
        if !nvrtc_here() {
            return;
        }
        let programs_all = cuda_programs();
        let supported = supported_archs().unwrap();
        assert!(supported.contains(&90), "{supported:?}");
        let mut built = Vec::new();
        for cc in [(8, 0), (9, 0), (12, 0)] {
            let target = Target::for_device(cc, &supported);
            let Target::Cubin(sm) = &target else {
                continue;
            };
            built.push(sm.clone());
            let programs = compile_all(sm, &programs_all).unwrap_or_else(|e| panic!("{e}"));
            for (file, bin, log) in &programs {
                assert!(bin.starts_with(b"\x7fELF"), "{file} ({sm})");
                assert!(log.is_empty(), "{file} ({sm}) has warnings:\n{log}");
            }
            let bins: Vec<&[u8]> = programs.iter().map(|(_, b, _)| b.as_slice()).collect();
            for name in kernel_names(&programs_all) {
                let sym = format!("\0{name}\0");
                let found = bins
                    .iter()
                    .filter(|b| b.windows(sym.len()).any(|w| w == sym.as_bytes()));
                assert_eq!(found.count(), 1, "{name} ({sm})");
            }
        }
        // Ampere and Hopper always get machine code.
        assert!(built.iter().any(|s| s == "sm_80") && built.iter().any(|s| s == "sm_90"));
        assert!(compile_cubin("compute_90", &programs_all).is_err());
    }
}
