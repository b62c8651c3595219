//! NVRTC: compiles the few CUDA kernels cuDNN and cuBLAS lack for
//! whole-model training, and launches them. This module only compiles and
//! launches: the backend's own kernels (dtype casts, the SGD update) are
//! [`BACKEND_PROGRAMS`] with their wrappers below; each op's (softmax
//! cross-entropy, dropout with the CPU's mask, ceil-mode pooling) sits in
//! the op's folder with its launch wrappers (`ops/<op>/kernels.rs`).
//!
//! The sources are built into the binary; [`Kernels::compile`] compiles
//! the programs it is given once, at start-up, for the device's
//! architecture (machine code where NVRTC knows it, else PTX: see
//! [`Target`]), so the binary still builds without a CUDA toolkit and runs
//! without NVRTC until a GPU is asked for. Each kernel comes in the
//! storages it is needed in, with a typed launch wrapper; the caller owns
//! the device memory and passes raw device pointers.
//!
//! The kernels match the CPU kernels in `cnnbench_kernels` bit for bit
//! where those are f32 and the order of operations allows (casts, SGD,
//! dropout, pooling): the programs are compiled with `--fmad=false`, since
//! Rust never contracts a multiply and an add into one FMA.

use super::error::{driver, GpuError, GpuResult};
use super::kernel_name::PerStorage;
use super::loader::nvrtc_sys;
use super::probe::nvrtc_missing;
use crate::core::dtype::Storage;
use cudarc::driver::sys::{CUdeviceptr, CUresult};
use cudarc::driver::{CudaContext, CudaFunction, CudaStream, LaunchConfig, PushKernelArg};
use cudarc::nvrtc::Ptx;
use std::collections::HashMap;
use std::ffi::CString;
use std::sync::Arc;

/// Prepended to every source: storage types and their conversions, the
/// per-storage instantiation macro, and the dropout hash.
pub const PRELUDE: &str = include_str!("prelude.cuh");

/// One CUDA C source (without the prelude) and the kernels it defines:
/// `per_storage` and `single` together list exactly the `extern "C"`
/// kernels of `source` (tested against NVRTC's output in
/// `ops::cuda_programs`), and only these are looked up in the program's
/// module.
/// The backend's own are [`BACKEND_PROGRAMS`]; each op with kernels of its
/// own keeps its program in its folder, and `ops::cuda_programs` gathers
/// them all.
#[derive(Clone, Copy, Debug)]
pub struct Program {
    pub file: &'static str,
    pub source: &'static str,
    /// The kernels instantiated once per storage (three each; see
    /// [`super::kernel_name`]).
    pub per_storage: &'static [PerStorage],
    /// The kernels defined once, by their names.
    pub single: &'static [&'static str],
}

impl Program {
    /// Every kernel the program defines.
    pub fn kernel_names(&self) -> impl Iterator<Item = &'static str> {
        let per_storage = self.per_storage.iter().flat_map(|k| k.names());
        per_storage.chain(self.single.iter().copied())
    }
}

pub(crate) const CAST_F32_TO_F16: &str = "cast_f32_to_f16";
pub(crate) const CAST_F32_TO_BF16: &str = "cast_f32_to_bf16";
pub(crate) const CAST_F16_TO_F32: &str = "cast_f16_to_f32";
pub(crate) const CAST_BF16_TO_F32: &str = "cast_bf16_to_f32";
pub(crate) const SGD_UPDATE: &str = "sgd_update_f32";

/// The backend's own kernels: the half/fp32 casts and the SGD update.
pub const BACKEND_PROGRAMS: &[Program] = &[
    Program {
        file: "cast.cu",
        source: include_str!("cast.cu"),
        per_storage: &[],
        single: &[
            CAST_F32_TO_F16,
            CAST_F32_TO_BF16,
            CAST_F16_TO_F32,
            CAST_BF16_TO_F32,
        ],
    },
    Program {
        file: "sgd.cu",
        source: include_str!("sgd.cu"),
        per_storage: &[],
        single: &[SGD_UPDATE],
    },
];

/// Threads per block of every launch; the block reductions are written
/// for exactly this many (`XENT_THREADS` in loss.cu, `BIAS_THREADS` in
/// bias_grad.cu: a test holds each to it).
pub(crate) const THREADS: u32 = 256;

/// The most blocks an elementwise launch uses. Their loops are grid-stride,
/// so this caps the launch, not the size; 65535 blocks of 256 threads are
/// many times what any GPU keeps resident.
const MAX_BLOCKS: u64 = 65535;

/// The virtual architecture to compile PTX for on a device of compute
/// capability `cc` (used when NVRTC cannot make its machine code). PTX is JIT-compiled forward by the driver, so 9.0 and
/// anything newer (Blackwell included) get `compute_90`; an unknown 8.x
/// gets `compute_80`. The bf16 rounding uses `cvt.rn.bf16.f32` from
/// `compute_80`, and an integer fallback below it. NVRTC 13 compiles for
/// `compute_75` and newer only: on Volta (7.0, 7.2), which this returns
/// `compute_70`/`compute_72` for, it takes NVRTC 12, else compilation
/// fails with NVRTC's log naming the architecture. Older GPUs are not
/// supported (their modules fail to load, and `cuModuleLoadData` says so).
pub fn arch_for(cc: (i32, i32)) -> &'static str {
    match cc {
        (major, _) if major >= 9 => "compute_90",
        (8, 6) => "compute_86",
        (8, 7) => "compute_87",
        (8, 9) => "compute_89",
        (8, _) => "compute_80",
        (7, 5) => "compute_75",
        (7, 2) => "compute_72",
        _ => "compute_70",
    }
}

/// What the kernels are compiled to for one device.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// Machine code for the device's exact architecture (`sm_90`), when
    /// this NVRTC knows it. Preferred: PTX from NVRTC 13.2 is PTX ISA 9.2,
    /// which a driver older than CUDA 13.2 refuses, while a CUBIN from any
    /// 13.x NVRTC loads on every 13.x driver (minor-version compatibility);
    /// and the driver has nothing to JIT at start-up.
    Cubin(String),
    /// PTX for [`arch_for`] (`compute_90`), JIT-compiled by the driver: for
    /// a GPU newer than this NVRTC.
    Ptx(&'static str),
}

impl Target {
    /// The target for a device of compute capability `cc`, given NVRTC's
    /// supported architectures ([`supported_archs`], e.g. `[75, 80, 90]`).
    pub fn for_device(cc: (i32, i32), supported: &[i32]) -> Target {
        let sm = cc.0 * 10 + cc.1;
        if (0..100).contains(&cc.1) && supported.contains(&sm) {
            Target::Cubin(format!("sm_{sm}"))
        } else {
            Target::Ptx(arch_for(cc))
        }
    }

    /// The `--gpu-architecture` value, e.g. `sm_90` or `compute_90`.
    pub fn arch(&self) -> &str {
        match self {
            Target::Cubin(sm) => sm,
            Target::Ptx(arch) => arch,
        }
    }
}

/// The real architectures this NVRTC compiles for, as `major·10 + minor`
/// (NVRTC 13.2: 75 to 121).
pub fn supported_archs() -> Result<Vec<i32>, String> {
    if let Some(missing) = nvrtc_missing() {
        return Err(missing);
    }
    let mut n = 0;
    // SAFETY: out-pointers sized by NVRTC's own count.
    unsafe {
        nvrtc_sys::nvrtcGetNumSupportedArchs(&mut n)
            .result()
            .map_err(|e| format!("nvrtcGetNumSupportedArchs: {e:?}"))?;
        let mut archs = vec![0; usize::try_from(n).unwrap_or(0)];
        if !archs.is_empty() {
            nvrtc_sys::nvrtcGetSupportedArchs(archs.as_mut_ptr())
                .result()
                .map_err(|e| format!("nvrtcGetSupportedArchs: {e:?}"))?;
        }
        Ok(archs)
    }
}

/// The options every program is compiled with: the architecture, and no
/// FMA contraction (see the module docs).
fn options(arch: &str) -> Vec<String> {
    vec![format!("--gpu-architecture={arch}"), "--fmad=false".into()]
}

/// Compiles one program for `arch`; returns its PTX text (a `compute_`
/// arch) or CUBIN (an `sm_` arch) and NVRTC's log (empty, or warnings), or
/// an error naming the file, with the log.
fn compile_one(file: &str, source: &str, arch: &str) -> Result<(Vec<u8>, String), String> {
    let text = format!("{PRELUDE}\n#line 1 \"{file}\"\n{source}");
    let src = CString::new(text).map_err(|_| format!("{file}: the source contains a NUL byte"))?;
    let name = CString::new(file).map_err(|_| format!("{file}: the name contains a NUL byte"))?;
    let prog = nvrtc_sys::create_program(&src, &name).map_err(|e| format!("{file}: {e:?}"))?;
    let cubin = arch.starts_with("sm_");
    // SAFETY: `prog` was just created from `src` and `name`, which outlive
    // it, and is destroyed once, below, whatever happened in between; the
    // CUBIN buffer is sized by NVRTC's own count.
    unsafe {
        let compiled = nvrtc_sys::compile_program(prog, &options(arch));
        let log = nvrtc_sys::program_log(prog)
            .map(|raw| String::from_utf8_lossy(&raw).trim().to_owned())
            .unwrap_or_default();
        let code = match compiled {
            Err(e) => Err(format!("{file} ({arch}): {e:?}\n{log}")),
            Ok(()) if cubin => {
                let mut size = 0;
                nvrtc_sys::nvrtcGetCUBINSize(prog, &mut size)
                    .result()
                    .and_then(|()| {
                        let mut bin = vec![0u8; size];
                        nvrtc_sys::nvrtcGetCUBIN(prog, bin.as_mut_ptr().cast())
                            .result()
                            .map(|()| bin)
                    })
                    .map_err(|e| format!("{file}: nvrtcGetCUBIN: {e:?}"))
            }
            Ok(()) => nvrtc_sys::ptx(prog).map_err(|e| format!("{file}: nvrtcGetPTX: {e:?}")),
        };
        let _ = nvrtc_sys::destroy_program(prog);
        code.map(|code| (code, log))
    }
}

/// Compiles the prelude plus each of `programs` for `arch` (e.g.
/// `compute_90`, see [`arch_for`]), the programs in parallel; returns the
/// PTX text per file. The error names the file and carries NVRTC's log.
pub fn compile_ptx(
    arch: &'static str,
    programs: &[Program],
) -> Result<Vec<(&'static str, String)>, String> {
    if !arch.starts_with("compute_") {
        return Err(format!("{arch} is not a virtual architecture (compute_XY)"));
    }
    let programs = compile_all(arch, programs)?;
    Ok(programs
        .into_iter()
        .map(|(f, ptx, _)| (f, String::from_utf8_lossy(&ptx).into_owned()))
        .collect())
}

/// Compiles every source to a CUBIN for the real architecture `sm` (e.g.
/// `sm_90`, see [`Target`]), in parallel; returns the CUBIN per file.
pub fn compile_cubin(
    sm: &str,
    programs: &[Program],
) -> Result<Vec<(&'static str, Vec<u8>)>, String> {
    if !sm.starts_with("sm_") {
        return Err(format!("{sm} is not a real architecture (sm_XY)"));
    }
    let programs = compile_all(sm, programs)?;
    Ok(programs.into_iter().map(|(f, bin, _)| (f, bin)).collect())
}

/// One compiled program: its file, its code (PTX text or CUBIN), NVRTC's log.
pub(crate) type Compiled = (&'static str, Vec<u8>, String);

/// Each source compiled for `arch` on its own thread.
pub(crate) fn compile_all(arch: &str, programs: &[Program]) -> Result<Vec<Compiled>, String> {
    if let Some(missing) = nvrtc_missing() {
        return Err(missing);
    }
    std::thread::scope(|s| {
        let jobs: Vec<_> = programs
            .iter()
            .map(|p| {
                let job = std::thread::Builder::new()
                    .spawn_scoped(s, move || compile_one(p.file, p.source, arch));
                (p, job)
            })
            .collect();
        jobs.into_iter()
            .map(|(p, job)| {
                let (code, log) = match job {
                    Ok(job) => job
                        .join()
                        .map_err(|_| format!("{}: the NVRTC thread panicked", p.file))??,
                    // No thread to be had (RLIMIT_NPROC): compiled here.
                    Err(_) => compile_one(p.file, p.source, arch)?,
                };
                Ok((p.file, code, log))
            })
            .collect()
    })
}

/// Device pointer, 64-bit count, int or float: the kernels' parameter
/// types, each passed by value.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Arg {
    Ptr(CUdeviceptr),
    U64(u64),
    I32(i32),
    F32(f32),
}

pub(crate) fn invalid(call: &'static str, status: String) -> GpuError {
    GpuError {
        call,
        status,
        oom: false,
    }
}

pub(crate) fn to_i32(kernel: &'static str, what: &str, v: usize) -> GpuResult<i32> {
    i32::try_from(v).map_err(|_| invalid(kernel, format!("{what} = {v} does not fit in an int")))
}

pub(crate) fn to_u64(kernel: &'static str, v: usize) -> GpuResult<u64> {
    u64::try_from(v).map_err(|_| invalid(kernel, format!("{v} elements do not fit in 64 bits")))
}

/// Blocks of [`THREADS`] for a grid-stride loop over `n` elements.
pub(crate) fn blocks_for(n: u64) -> u32 {
    // At most MAX_BLOCKS, which fits in u32.
    n.div_ceil(u64::from(THREADS)).min(MAX_BLOCKS) as u32
}

/// Elements of storage `st` in one 16-byte vector (prelude.cuh's `Vec16`).
pub(crate) fn vector_len(st: Storage) -> usize {
    match st {
        Storage::F32 => 4,
        Storage::F16 | Storage::Bf16 => 8,
    }
}

/// Elements per thread slot of a kernel with a vector and an element
/// variant: a 16-byte vector where runs of `run` elements (a row's
/// channels, a plane) divide into vectors and every buffer in `ptrs` is
/// 16-byte aligned, else one.
pub(crate) fn vector_width(st: Storage, run: usize, ptrs: &[CUdeviceptr]) -> usize {
    let per = vector_len(st);
    if run.is_multiple_of(per) && ptrs.iter().all(|p| p.is_multiple_of(16)) {
        per
    } else {
        1
    }
}

/// Blocks of [`THREADS`] for a grid-stride loop over the 16-byte vectors
/// (prelude.cuh's `Vec16`) of `n` elements of storage `st`.
pub(crate) fn vector_blocks(st: Storage, n: u64) -> u32 {
    blocks_for(n.div_ceil(vector_len(st) as u64))
}

/// Checks that no two of `programs` name the same kernel, so that each
/// name is looked up in exactly one module.
pub(crate) fn unique_kernels(programs: &[Program]) -> Result<(), String> {
    let mut seen = HashMap::new();
    for p in programs {
        for name in p.kernel_names() {
            if let Some(other) = seen.insert(name, p.file) {
                return Err(format!("{other} and {} both list kernel {name}", p.file));
            }
        }
    }
    Ok(())
}

/// The compiled kernels, loaded into one context. Every launch goes onto
/// the stream the caller passes, which must belong to that context.
pub struct Kernels {
    funcs: HashMap<&'static str, CudaFunction>,
    target: Target,
}

impl Kernels {
    /// Compiles every source for a device of compute capability `cc` (to a
    /// CUBIN where this NVRTC knows the architecture, else PTX; see
    /// [`Target`]) and loads every kernel they define into `ctx`. Done once,
    /// at start-up: compilation takes a good fraction of a second.
    pub fn compile(
        ctx: &Arc<CudaContext>,
        cc: (i32, i32),
        programs: &[Program],
    ) -> GpuResult<Kernels> {
        if let Some(missing) = nvrtc_missing() {
            return Err(invalid("nvrtcCreateProgram", missing));
        }
        let supported = supported_archs().map_err(|e| invalid("nvrtcGetSupportedArchs", e))?;
        let target = Target::for_device(cc, &supported);
        let compile_err = |log| invalid("nvrtcCompileProgram", log);
        let compiled: Vec<(&str, Ptx)> = match &target {
            Target::Cubin(sm) => compile_cubin(sm, programs)
                .map_err(compile_err)?
                .into_iter()
                .map(|(f, bin)| (f, Ptx::from_binary(bin)))
                .collect(),
            Target::Ptx(arch) => compile_ptx(arch, programs)
                .map_err(compile_err)?
                .into_iter()
                .map(|(f, ptx)| (f, Ptx::from_src(ptx)))
                .collect(),
        };
        // Each program's module is searched for that program's kernels
        // only, each of which it defines (`cuda_programs`' tests check the
        // lists against NVRTC's output): a name looked up in a module that
        // lacks it fails with CUDA_ERROR_NOT_FOUND, which compute-sanitizer
        // reports as an API error even where it is handled.
        unique_kernels(programs).map_err(|e| invalid("cuModuleGetFunction", e))?;
        let mut funcs = HashMap::new();
        for (program, (file, code)) in programs.iter().zip(compiled) {
            let module = ctx.load_module(code).map_err(|e| {
                let mut err = driver("cuModuleLoadData", e);
                err.status = if e.0 == CUresult::CUDA_ERROR_UNSUPPORTED_PTX_VERSION {
                    format!(
                        "{} for {file}: NVRTC is newer than the driver; \
                         update the driver or use an NVRTC no newer than it",
                        err.status
                    )
                } else {
                    format!("{} for {file} ({})", err.status, target.arch())
                };
                err
            })?;
            for name in program.kernel_names() {
                let f = module.load_function(name).map_err(|e| {
                    let mut err = driver("cuModuleGetFunction", e);
                    err.status = format!("{} for {name} in {file}", err.status);
                    err
                })?;
                funcs.insert(name, f);
            }
        }
        Ok(Kernels { funcs, target })
    }

    /// What the kernels were compiled to (for the run's metadata).
    pub fn target(&self) -> &Target {
        &self.target
    }

    /// Launches `name` with `grid` blocks of [`THREADS`] threads.
    ///
    /// # Safety
    ///
    /// `args` must match the kernel's parameters in number and type, and
    /// every pointer among them must be valid for what the kernel reads and
    /// writes at these sizes, until the launch completes on `stream`.
    pub(crate) unsafe fn launch(
        &self,
        stream: &CudaStream,
        name: &'static str,
        grid: u32,
        args: &[Arg],
    ) -> GpuResult<()> {
        let f = self.funcs.get(name).ok_or_else(|| {
            invalid(
                "cuModuleGetFunction",
                format!("CUDA_ERROR_NOT_FOUND: {name}"),
            )
        })?;
        let mut b = stream.launch_builder(f);
        for a in args {
            match a {
                Arg::Ptr(v) | Arg::U64(v) => b.arg(v),
                Arg::I32(v) => b.arg(v),
                Arg::F32(v) => b.arg(v),
            };
        }
        let cfg = LaunchConfig {
            grid_dim: (grid, 1, 1),
            block_dim: (THREADS, 1, 1),
            shared_mem_bytes: 0,
        };
        // SAFETY: the caller guarantees the arguments (see above); the
        // builder holds pointers to `args`, which outlive the call, and
        // cuLaunchKernel copies the values before it returns.
        unsafe { b.launch(cfg) }.map(|_| ()).map_err(|e| {
            let mut err = driver("cuLaunchKernel", e);
            err.status = format!("{} launching {name}", err.status);
            err
        })
    }

    /// `y = x` converted from `from` to `to`, `n` elements: f32 to f16 or
    /// bf16 (rounding to nearest even) and back. The same storage on both
    /// sides is a plain device copy; f16 to bf16 and back is an error
    /// (nothing needs it; go through f32).
    ///
    /// # Safety
    ///
    /// `x` and `y` must hold `n` elements of their storage, live until the
    /// work completes on `stream`, and not overlap.
    pub unsafe fn cast(
        &self,
        stream: &CudaStream,
        from: Storage,
        to: Storage,
        x: CUdeviceptr,
        y: CUdeviceptr,
        n: usize,
    ) -> GpuResult<()> {
        if n == 0 {
            return Ok(());
        }
        let name = match (from, to) {
            (Storage::F32, Storage::F16) => CAST_F32_TO_F16,
            (Storage::F32, Storage::Bf16) => CAST_F32_TO_BF16,
            (Storage::F16, Storage::F32) => CAST_F16_TO_F32,
            (Storage::Bf16, Storage::F32) => CAST_BF16_TO_F32,
            (a, b) if a == b => {
                let size = if a == Storage::F32 { 4 } else { 2 };
                let bytes = n
                    .checked_mul(size)
                    .ok_or_else(|| invalid("cuMemcpyDtoDAsync", format!("{n} elements")))?;
                stream
                    .context()
                    .bind_to_thread()
                    .map_err(|e| driver("cuCtxSetCurrent", e))?;
                // SAFETY: both hold `bytes` (the caller's contract), in
                // stream order.
                return unsafe {
                    cudarc::driver::result::memcpy_dtod_async(y, x, bytes, stream.cu_stream())
                }
                .map_err(|e| driver("cuMemcpyDtoDAsync", e));
            }
            (a, b) => {
                return Err(invalid(
                    "cast",
                    format!("no kernel casts {a:?} to {b:?}; go through f32"),
                ))
            }
        };
        let n = to_u64(name, n)?;
        // SAFETY: (const T* x, U* y, u64 n) with the caller's sizes.
        unsafe {
            self.launch(
                stream,
                name,
                blocks_for(n),
                &[Arg::Ptr(x), Arg::Ptr(y), Arg::U64(n)],
            )
        }
    }

    /// SGD with momentum on f32 master weights, as
    /// `cnnbench_kernels::eltwise::sgd_update`: `v = momentum·v + g;
    /// w -= lr·v`, `n` elements.
    ///
    /// # Safety
    ///
    /// `w`, `g` and `v` must each hold `n` f32s, live until the work
    /// completes on `stream`, and not overlap.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn sgd_update(
        &self,
        stream: &CudaStream,
        w: CUdeviceptr,
        g: CUdeviceptr,
        v: CUdeviceptr,
        n: usize,
        lr: f32,
        momentum: f32,
    ) -> GpuResult<()> {
        if n == 0 {
            return Ok(());
        }
        let n = to_u64(SGD_UPDATE, n)?;
        let args = [
            Arg::Ptr(w),
            Arg::Ptr(g),
            Arg::Ptr(v),
            Arg::U64(n),
            Arg::F32(lr),
            Arg::F32(momentum),
        ];
        // SAFETY: (float* w, const float* g, float* v, u64 n, float lr,
        // float momentum) with the caller's sizes.
        unsafe { self.launch(stream, SGD_UPDATE, blocks_for(n), &args) }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn nvrtc_here() -> bool {
        let present = nvrtc_sys::missing().is_none();
        crate::backend::cuda::gpu_lib_for_test("NVRTC (libnvrtc.so.13)", present)
    }

    #[test]
    fn cubin_where_nvrtc_knows_the_gpu_else_ptx() {
        let nvrtc_13_2 = [75, 80, 86, 87, 88, 89, 90, 100, 103, 110, 120, 121];
        let t = |cc| Target::for_device(cc, &nvrtc_13_2);
        assert_eq!(t((9, 0)), Target::Cubin("sm_90".into()));
        assert_eq!(t((8, 6)), Target::Cubin("sm_86".into()));
        assert_eq!(t((12, 0)).arch(), "sm_120");
        assert_eq!(t((13, 0)), Target::Ptx("compute_90"));
        assert_eq!(t((8, 5)), Target::Ptx("compute_80"));
        assert_eq!(t((7, 0)), Target::Ptx("compute_70"));
        assert_eq!(t((9, 0)).arch(), "sm_90");
        assert_eq!(t((13, 0)).arch(), "compute_90");
    }

    #[test]
    fn compile_errors_name_the_file_and_carry_the_log() {
        if !nvrtc_here() {
            return;
        }
        let e = compile_one(
            "broken.cu",
            "extern \"C\" __global__ void k() { x; }",
            "compute_90",
        )
        .unwrap_err();
        assert!(e.starts_with("broken.cu (compute_90): "), "{e}");
        assert!(e.contains("identifier \"x\" is undefined"), "{e}");
    }

    #[test]
    fn arch_table() {
        assert_eq!(arch_for((12, 0)), "compute_90");
        assert_eq!(arch_for((10, 0)), "compute_90");
        assert_eq!(arch_for((9, 0)), "compute_90");
        assert_eq!(arch_for((8, 9)), "compute_89");
        assert_eq!(arch_for((8, 7)), "compute_87");
        assert_eq!(arch_for((8, 6)), "compute_86");
        assert_eq!(arch_for((8, 0)), "compute_80");
        assert_eq!(arch_for((8, 8)), "compute_80");
        assert_eq!(arch_for((7, 5)), "compute_75");
        assert_eq!(arch_for((7, 2)), "compute_72");
        assert_eq!(arch_for((7, 0)), "compute_70");
    }

    #[test]
    fn launch_sizes_are_checked() {
        assert_eq!(blocks_for(1), 1);
        assert_eq!(blocks_for(256), 1);
        assert_eq!(blocks_for(257), 2);
        assert_eq!(blocks_for(u64::MAX), MAX_BLOCKS as u32);
        assert!(to_i32("k", "c", 1 << 31).is_err());
    }
}
