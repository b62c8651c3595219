//! The CUDA side of GEMM: cuBLAS GemmEx on device copies of
//! [`GemmTensors`], and the measured peak it gives.

use super::{GemmShape, GemmTensors};
use crate::backend::cuda::{DeviceBuffer, Gpu, GpuResult, Peak};
use crate::core::DType;

pub struct GpuGemm<'g> {
    gpu: &'g Gpu,
    pub shape: GemmShape,
    pub dtype: DType,
    /// (A, B, C) per rotation set; set 0 is the one checked.
    sets: Vec<[DeviceBuffer; 3]>,
    next: usize,
}

impl<'g> GpuGemm<'g> {
    /// Uploads `t` converted to `dtype`, into `sets` copies.
    pub fn new(gpu: &'g Gpu, t: &GemmTensors, dtype: DType, sets: usize) -> GpuResult<Self> {
        let (a, b) = (dtype.encode(&t.a), dtype.encode(&t.b));
        let s = &gpu.stream;
        let mut all = Vec::new();
        for _ in 0..sets.max(1) {
            let mut c = DeviceBuffer::alloc(s, t.c.len() * dtype.size_bytes())?;
            c.fill_bytes(0xFF)?;
            all.push([
                DeviceBuffer::from_bytes(s, &a)?,
                DeviceBuffer::from_bytes(s, &b)?,
                c,
            ]);
        }
        gpu.synchronize()?;
        Ok(GpuGemm {
            gpu,
            shape: t.shape,
            dtype,
            sets: all,
            next: 0,
        })
    }

    /// Bytes of one set of A, B, C in `dtype`.
    pub fn set_bytes(s: &GemmShape, d: DType) -> u128 {
        GemmTensors::bytes_needed(s) / 4 * d.size_bytes() as u128
    }

    /// Enqueues one GEMM on the next set.
    pub fn run(&mut self) -> GpuResult<()> {
        let [a, b, c] = &self.sets[self.next];
        self.next = (self.next + 1) % self.sets.len();
        let s = self.shape;
        // SAFETY: buffers hold m·k, k·n and m·n elements of the dtype.
        unsafe {
            self.gpu.cublas.gemm(
                self.dtype,
                [s.m, s.n, s.k],
                [s.trans_a, s.trans_b],
                a.as_void(),
                b.as_void(),
                c.as_void(),
            )
        }
    }

    /// Poisons set 0's C and makes the next run use set 0.
    pub fn poison(&mut self) -> GpuResult<()> {
        self.sets[0][2].fill_bytes(0xFF)?;
        self.next = 0;
        Ok(())
    }

    /// Set 0's C as f32.
    pub fn download(&self) -> GpuResult<Vec<f32>> {
        Ok(self.dtype.decode(&self.sets[0][2].download()?))
    }
}

/// Side of the square GEMM that measures a peak.
pub const PEAK_GEMM_SIZE: usize = 8192;

/// The best of 10 square cuBLAS GEMMs of [`PEAK_GEMM_SIZE`], on seeded
/// random data, in TFLOP/s.
pub fn measure_peak(gpu: &Gpu, dtype: DType) -> GpuResult<Peak> {
    let n = PEAK_GEMM_SIZE;
    let shape = GemmShape {
        m: n,
        n,
        k: n,
        trans_a: false,
        trans_b: false,
    };
    let t = GemmTensors::random(&shape, 1);
    let mut g = GpuGemm::new(gpu, &t, dtype, 1)?;
    let events = gpu.event_pair()?;
    let mut best = f64::INFINITY;
    for i in 0..13 {
        let ms = events.time(&mut || g.run())?;
        // The first three runs warm up clocks and cuBLAS's heuristics.
        if i >= 3 {
            best = best.min(ms);
        }
    }
    Ok(Peak {
        dtype: dtype.name().into(),
        tflops: shape.flops() as f64 / (best * 1e-3) / 1e12,
        source: format!("measured cuBLAS GEMM ({n}x{n}x{n}, best of 10)"),
    })
}

/// The peak of `dtype` on `gpu`: from its properties when the rate table
/// knows the architecture, else measured once and kept in `gpu.info`.
pub fn ensure_peak(gpu: &mut Gpu, dtype: DType) -> GpuResult<Peak> {
    if let Some(p) = gpu.info.peak(dtype) {
        return Ok(p.clone());
    }
    let p = measure_peak(gpu, dtype)?;
    gpu.info.peaks.push(p.clone());
    Ok(p)
}
