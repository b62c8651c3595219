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
    programs.iter().flat_map(Program::kernel_names).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::cuda::nvrtc::tests::nvrtc_here;
    use crate::backend::cuda::nvrtc::{
        compile_all, compile_cubin, compile_ptx, supported_archs, unique_kernels, Target,
        CAST_BF16_TO_F32, CAST_F16_TO_F32, CAST_F32_TO_BF16, CAST_F32_TO_F16, SGD_UPDATE,
    };
    use crate::core::dtype::Storage;

    /// The kernels a PTX module defines (its `.entry` names), sorted.
    fn ptx_entries(ptx: &str) -> Vec<&str> {
        let mut names: Vec<&str> = ptx
            .lines()
            .filter_map(|l| l.split_once(".entry ").map(|(_, rest)| rest))
            .map(|rest| rest.split(['(', ' ']).next().unwrap_or(rest).trim())
            .collect();
        names.sort_unstable();
        names
    }

    /// Block reductions written for a fixed block size must match the
    /// size every launch uses.
    #[test]
    fn block_sizes_in_the_sources_are_the_launch_size() {
        let threads = crate::backend::cuda::nvrtc::THREADS.to_string();
        let defines = [
            ("loss.cu", "XENT_THREADS"),
            ("bias_grad.cu", "BIAS_THREADS"),
            ("bn.cu", "BN_THREADS"),
        ];
        for (file, name) in defines {
            let p = cuda_programs()
                .into_iter()
                .find(|p| p.file == file)
                .unwrap_or_else(|| panic!("no program {file}"));
            let line = format!("#define {name} {threads}");
            assert!(p.source.contains(&line), "{file} lacks '{line}'");
        }
    }

    #[test]
    fn each_kernel_name_belongs_to_one_program() {
        let programs = cuda_programs();
        unique_kernels(&programs).unwrap();
        let twice = [programs[0], programs[0]];
        let e = unique_kernels(&twice).unwrap_err();
        assert!(e.contains("cast.cu and cast.cu both list kernel"), "{e}");
    }

    /// Every per-storage kernel is named by the one rule
    /// (`backend::cuda::kernel_name`), and the backend's own kernels are
    /// listed with the ops'.
    #[test]
    fn every_kernel_is_listed_by_the_one_rule() {
        let programs = cuda_programs();
        for k in programs.iter().flat_map(|p| p.per_storage) {
            let base = k.name(Storage::F32).strip_suffix("_f32").unwrap();
            let suffixes = [(Storage::F16, "_f16"), (Storage::Bf16, "_bf16")];
            for (st, suffix) in suffixes {
                assert_eq!(k.name(st), format!("{base}{suffix}"));
            }
        }
        let listed = kernel_names(&programs);
        let backend = [
            CAST_F32_TO_F16,
            CAST_F32_TO_BF16,
            CAST_F16_TO_F32,
            CAST_BF16_TO_F32,
            SGD_UPDATE,
        ];
        assert!(backend.iter().all(|k| listed.contains(k)), "{listed:?}");
    }

    #[test]
    fn ptx_entries_are_read_from_entry_lines() {
        let ptx = ".visible .entry b_f16(\n.param .u64 x\n)\n.visible .entry a_f32(\n";
        assert_eq!(ptx_entries(ptx), ["a_f32", "b_f16"]);
    }

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
            // `Kernels::compile` looks up each program's list in that
            // program's module, and nothing else: the list must be exactly
            // the kernels the module defines.
            for (p, (file, ptx)) in programs_all.iter().zip(&ptx) {
                assert_eq!(p.file, *file);
                let mut want: Vec<&str> = p.kernel_names().collect();
                want.sort_unstable();
                assert_eq!(ptx_entries(ptx), want, "{file} ({arch})");
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
            // Each program's kernels are symbols of its own CUBIN, the
            // module they are looked up in.
            for (p, (file, bin, _)) in programs_all.iter().zip(&programs) {
                assert_eq!(p.file, *file);
                for name in p.kernel_names() {
                    let sym = format!("\0{name}\0");
                    let found = bin.windows(sym.len()).any(|w| w == sym.as_bytes());
                    assert!(found, "{name} not in {file} ({sm})");
                }
            }
        }
        // Ampere and Hopper always get machine code.
        assert!(built.iter().any(|s| s == "sm_80") && built.iter().any(|s| s == "sm_90"));
        assert!(compile_cubin("compute_90", &programs_all).is_err());
    }
}
