//! Launch wrappers of `relu.cu` (ReLU forward and backward on 16-byte
//! vectors, the `--own-kernels` path), on the compiled [`Kernels`].

use crate::backend::cuda::kernel_name::{per_storage, PerStorage};
use crate::backend::cuda::nvrtc::{to_u64, vector_blocks, Arg, Kernels, Program};
use crate::backend::cuda::GpuResult;
use crate::core::dtype::Storage;
use cudarc::driver::sys::CUdeviceptr;
use cudarc::driver::CudaStream;

/// One instance per storage ([`per_storage!`]).
pub(crate) const RELU_FWD: PerStorage = per_storage!("relu_fwd");
pub(crate) const RELU_BWD: PerStorage = per_storage!("relu_bwd");

/// `relu.cu` and its kernels.
pub const PROGRAM: Program = Program {
    file: "relu.cu",
    source: include_str!("relu.cu"),
    per_storage: &[RELU_FWD, RELU_BWD],
    single: &[],
};

impl Kernels {
    /// `y = max(x, 0)` over `n` elements of storage `st` (a NaN stays NaN).
    ///
    /// # Safety
    ///
    /// `x` and `y` must hold `n` elements of `st` and live until the work
    /// completes on `stream`; they may be the same buffer, not otherwise
    /// overlap.
    pub unsafe fn relu_fwd(
        &self,
        stream: &CudaStream,
        st: Storage,
        x: CUdeviceptr,
        y: CUdeviceptr,
        n: usize,
    ) -> GpuResult<()> {
        let name = RELU_FWD.name(st);
        let n = to_u64(name, n)?;
        if n == 0 {
            return Ok(());
        }
        let args = [Arg::Ptr(x), Arg::Ptr(y), Arg::U64(n)];
        // SAFETY: (const T* x, T* y, u64 n) with the caller's sizes.
        unsafe { self.launch(stream, name, vector_blocks(st, n), &args) }
    }

    /// `dx = y > 0 ? dy : 0` over `n` elements of storage `st`, where `dy`
    /// is `dys[0]`, or `dys[0] + dys[1]` summed on the way (at most two).
    ///
    /// # Safety
    ///
    /// `y`, each of `dys` and `dx` must hold `n` elements of `st` and live
    /// until the work completes on `stream`; `dx` may be one of the `dys`
    /// (each element is read before it is written), not otherwise overlap.
    pub unsafe fn relu_bwd(
        &self,
        stream: &CudaStream,
        st: Storage,
        y: CUdeviceptr,
        dys: &[CUdeviceptr],
        dx: CUdeviceptr,
        n: usize,
    ) -> GpuResult<()> {
        let name = RELU_BWD.name(st);
        let (dy0, dy1, two) = match *dys {
            [d] => (d, d, 0),
            [d0, d1] => (d0, d1, 1),
            _ => {
                let what = format!("{} output gradients (1 or 2)", dys.len());
                return Err(crate::backend::cuda::nvrtc::invalid(name, what));
            }
        };
        let n = to_u64(name, n)?;
        if n == 0 {
            return Ok(());
        }
        let args = [
            Arg::Ptr(y),
            Arg::Ptr(dy0),
            Arg::Ptr(dy1),
            Arg::Ptr(dx),
            Arg::U64(n),
            Arg::I32(two),
        ];
        // SAFETY: (const T* y, const T* dy0, const T* dy1, T* dx, u64 n,
        // int two) with the caller's sizes.
        unsafe { self.launch(stream, name, vector_blocks(st, n), &args) }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::backend::cuda::emu::{self, EmuRun};
    use crate::core::DType;
    use cnnbench_kernels::eltwise;
    use cnnbench_kernels::isa::Isa;
    use cnnbench_kernels::rng::fill_uniform;

    /// The storages, by kernel suffix and dtype.
    pub(crate) const STORAGES: [(&str, DType); 3] = [
        ("f32", DType::F32),
        ("f16", DType::F16),
        ("bf16", DType::Bf16),
    ];

    /// One elementwise launch to emulate: `n` elements, each input's values
    /// and its start in elements past a 16-byte boundary, the output's
    /// start, and the call (`{in0}`, `{in1}`, ... and `{out}` stand for the
    /// pointers, `{n}` for the length). `in_place`: the result is read
    /// from that input's buffer instead.
    pub(crate) struct EltwiseCase {
        pub n: usize,
        pub inputs: Vec<(Vec<f32>, usize)>,
        pub out_offset: usize,
        pub call: String,
        pub in_place: Option<usize>,
    }

    /// Runs the cases of `storage` on the host (`backend::cuda::emu`), two
    /// blocks each; each case's output as f32.
    pub(crate) fn emulate_eltwise(
        program: &Program,
        storage: &str,
        cases: &[EltwiseCase],
    ) -> Vec<Vec<f32>> {
        let ty = emu::storage_type(storage);
        // A pointer `off` elements past a 16-byte boundary of `v`.
        let mut main = String::from(
            "auto at = [](auto& v, size_t off) {
                 size_t skip = (16 - (uintptr_t)v.data() % 16) % 16 / sizeof(v[0]);
                 return v.data() + skip + off;
             };\n",
        );
        let (mut inputs, mut outputs) = (Vec::new(), Vec::new());
        for (c, case) in cases.iter().enumerate() {
            let n = case.n;
            let mut call = case.call.replace("{n}", &format!("{n}ull"));
            main += "{\n";
            for (k, (values, off)) in case.inputs.iter().enumerate() {
                let file = format!("in{c}_{k}.bin");
                inputs.push((file.clone(), values.clone()));
                main += &format!(
                    "auto v{k} = emu_load<{ty}>(\"{file}\", {n});
                     std::vector<{ty}::T> b{k}({n} + 16);
                     auto p{k} = at(b{k}, {off});
                     std::copy(v{k}.begin(), v{k}.end(), p{k});\n"
                );
                call = call.replace(&format!("{{in{k}}}"), &format!("p{k}"));
            }
            let file = format!("out{c}.bin");
            let result = case.in_place.map_or("po".into(), |k| format!("p{k}"));
            main += &format!(
                "std::vector<{ty}::T> bo({n} + 16);
                 auto po = at(bo, {off});
                 for (size_t i = 0; i < {n}; ++i) {ty}::store(po, i, NAN);
                 emu_launch(2, [&] {{ {call}; }});
                 emu_save<{ty}>(\"{file}\", std::vector<{ty}::T>({result}, {result} + {n}));\n}}\n",
                off = case.out_offset,
                call = call.replace("{out}", "po"),
            );
            outputs.push((file, n));
        }
        EmuRun {
            program,
            main,
            inputs,
            outputs,
        }
        .run()
    }

    /// Lengths and starts that exercise the vector body with a tail, a
    /// head peeled up to the first 16-byte boundary, the scalar fallback
    /// (starts that differ), and a length shorter than one vector, as
    /// (n, the inputs' starts, the output's start).
    pub(crate) fn layouts(inputs: usize) -> Vec<(usize, Vec<usize>, usize)> {
        vec![
            (5003, vec![0; inputs], 0),
            (5003, vec![3; inputs], 3),
            (1001, vec![1; inputs], 0),
            (5, vec![1; inputs], 1),
        ]
    }

    /// Values with zeros of both signs and, where `nan`, a NaN.
    pub(crate) fn values(n: usize, seed: u64, nan: bool) -> Vec<f32> {
        let mut v = vec![0.0; n];
        fill_uniform(&mut v, seed, 1.0);
        for (i, special) in [(0, 0.0), (2, -0.0), (n / 2, f32::NAN)] {
            if i < n && (nan || !special.is_nan()) {
                v[i] = special;
            }
        }
        v
    }

    /// Bitwise equality, NaN equal to NaN.
    pub(crate) fn same(what: &str, got: &[f32], want: &[f32]) {
        assert_eq!(got.len(), want.len(), "{what}");
        for (i, (a, b)) in got.iter().zip(want).enumerate() {
            assert!(
                a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan()),
                "{what}[{i}]: {a} vs {b}"
            );
        }
    }

    /// `relu.cu` on the host against the CPU's relu: forward (NaN kept, as
    /// cuDNN's CUDNN_PROPAGATE_NAN, where the CPU's gives 0), backward with
    /// one and two output gradients, and in place (dx = dy0), in every
    /// storage, on lengths and starts that take every path.
    #[test]
    fn emulated_relu_matches_the_cpu() {
        if !emu::available() {
            return;
        }
        for (storage, dtype) in STORAGES {
            let (mut cases, mut want) = (Vec::new(), Vec::new());
            for (n, offs, out) in layouts(3) {
                let round = |mut v: Vec<f32>| {
                    dtype.round_in_place(&mut v);
                    v
                };
                let x = round(values(n, 1, true));
                let (d0, d1) = (round(values(n, 2, false)), round(values(n, 3, false)));
                let mut y = vec![0.0; n];
                eltwise::relu_fwd(Isa::Scalar, &x, &mut y);
                for (y, x) in y.iter_mut().zip(&x) {
                    if x.is_nan() {
                        *y = *x;
                    }
                }
                let (mut dx1, mut dx2) = (vec![0.0; n], vec![0.0; n]);
                eltwise::relu_bwd(Isa::Scalar, &y, &[&d0], &mut dx1);
                eltwise::relu_bwd(Isa::Scalar, &y, &[&d0, &d1], &mut dx2);
                let dx2 = round(dx2);
                let sfx = storage;
                cases.push(EltwiseCase {
                    n,
                    inputs: vec![(x.clone(), offs[0])],
                    out_offset: out,
                    call: format!("relu_fwd_{sfx}({{in0}}, {{out}}, {{n}})"),
                    in_place: None,
                });
                want.push((format!("{storage} relu_fwd n={n} {offs:?}"), y.clone()));
                let io = vec![(y.clone(), offs[0]), (d0.clone(), offs[1])];
                cases.push(EltwiseCase {
                    n,
                    inputs: io.clone(),
                    out_offset: out,
                    call: format!("relu_bwd_{sfx}({{in0}}, {{in1}}, {{in1}}, {{out}}, {{n}}, 0)"),
                    in_place: None,
                });
                want.push((format!("{storage} relu_bwd one n={n} {offs:?}"), dx1));
                let mut io2 = io.clone();
                io2.push((d1.clone(), offs[2]));
                cases.push(EltwiseCase {
                    n,
                    inputs: io2,
                    out_offset: out,
                    call: format!("relu_bwd_{sfx}({{in0}}, {{in1}}, {{in2}}, {{out}}, {{n}}, 1)"),
                    in_place: None,
                });
                want.push((
                    format!("{storage} relu_bwd two n={n} {offs:?}"),
                    dx2.clone(),
                ));
                // In place: the sum lands in dy0's buffer.
                let io3 = vec![(y.clone(), offs[0]), (d0, offs[1]), (d1, offs[2])];
                cases.push(EltwiseCase {
                    n,
                    inputs: io3,
                    out_offset: out,
                    call: format!("relu_bwd_{sfx}({{in0}}, {{in1}}, {{in2}}, {{in1}}, {{n}}, 1)"),
                    in_place: Some(1),
                });
                want.push((format!("{storage} relu_bwd in place n={n} {offs:?}"), dx2));
            }
            let got = emulate_eltwise(&PROGRAM, storage, &cases);
            for (got, (what, want)) in got.iter().zip(&want) {
                same(what, got, want);
            }
        }
    }

    /// The kernels really move 16 bytes per load and store: NVRTC's PTX
    /// has `ld.global.v4` and `st.global.v4`.
    #[test]
    fn relu_compiles_to_16_byte_accesses() {
        use crate::backend::cuda::nvrtc::compile_ptx;
        use crate::backend::cuda::nvrtc::tests::nvrtc_here;
        if !nvrtc_here() {
            return;
        }
        let ptx = compile_ptx("compute_90", &[PROGRAM]).unwrap();
        let text = &ptx[0].1;
        assert!(text.contains("ld.global.v4"), "no 16-byte load");
        assert!(text.contains("st.global.v4"), "no 16-byte store");
    }
}
