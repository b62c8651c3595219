// Shared prelude of cnnbench's run-time compiled CUDA kernels. The Rust side
// (layers/src/backend/cuda/nvrtc.rs) prepends this text to every .cu file before
// handing it to NVRTC, so nothing here may #include anything: NVRTC ships
// without the CUDA headers (cuda_fp16.h among them). Half-precision values
// are therefore stored as raw 16-bit patterns (unsigned short) and converted
// with inline PTX; all arithmetic is done in float.

typedef unsigned long long u64;
typedef unsigned int u32;
typedef unsigned short u16;
typedef unsigned char u8;

#define NEG_INF __uint_as_float(0xff800000u)

// The own kernels' ReLU (relu.cu, and the add's fused one in add.cu):
// x > 0 ? x : 0, except that a NaN stays NaN, as cuDNN's activation with
// CUDNN_PROPAGATE_NAN gives it.
__device__ __forceinline__ float relu(float v) { return (v > 0.0f || v != v) ? v : 0.0f; }
#define QNAN __uint_as_float(0x7fc00000u)

// Every thread of the grid visits i = its id, id + grid size, ... < n; any
// grid size covers any n, so the host can cap the block count.
#define GRID_STRIDE(i, n)                                                      \
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < (u64)(n);    \
         i += (u64)blockDim.x * gridDim.x)

// device conversions: begin (tests replace this part: backend/cuda/emu)
__device__ __forceinline__ float f16_to_f32(u16 h) {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
    return f;
}

// Round to nearest even, as half::f16::from_f32 does.
__device__ __forceinline__ u16 f32_to_f16(float f) {
    u16 h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
    return h;
}

// bf16 is the top half of an f32: widening is exact.
__device__ __forceinline__ float bf16_to_f32(u16 b) {
    return __uint_as_float(((u32)b) << 16);
}

// Round to nearest even, as half::bf16::from_f32 does. The cvt to bf16
// needs sm_80; older targets round in integer arithmetic, the same way
// (a NaN stays a quiet NaN with its sign and top payload bits).
__device__ __forceinline__ u16 f32_to_bf16(float f) {
#if __CUDA_ARCH__ >= 800
    u16 b;
    asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(b) : "f"(f));
    return b;
#else
    u32 u = __float_as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) {
        return (u16)((u >> 16) | 0x40u);
    }
    u += 0x7fffu + ((u >> 16) & 1u);
    return (u16)(u >> 16);
#endif
}

// device conversions: end

// Storage types: T is what the elements in memory are; load and store
// convert to and from float. Kernels are templates over one of these and
// are instantiated by INSTANTIATE_STORAGES below.
struct F32 {
    typedef float T;
    static __device__ __forceinline__ float load(const T* p, u64 i) { return p[i]; }
    static __device__ __forceinline__ void store(T* p, u64 i, float v) { p[i] = v; }
};
struct F16 {
    typedef u16 T;
    static __device__ __forceinline__ float load(const T* p, u64 i) { return f16_to_f32(p[i]); }
    static __device__ __forceinline__ void store(T* p, u64 i, float v) { p[i] = f32_to_f16(v); }
};
struct BF16 {
    typedef u16 T;
    static __device__ __forceinline__ float load(const T* p, u64 i) { return bf16_to_f32(p[i]); }
    static __device__ __forceinline__ void store(T* p, u64 i, float v) { p[i] = f32_to_bf16(v); }
};

// INSTANTIATE_STORAGES(M) expands M(suffix, D) once per storage, where M
// defines `extern "C" __global__ void name_##suffix(...)` (unmangled, so
// the host finds it by name) calling the template body with D. Inside M,
// `D::T` is the storage type. The host derives the same names from `name`
// in one place (backend/cuda/kernel_name.rs, whose tests read this line).
#define INSTANTIATE_STORAGES(M) M(f32, F32) M(f16, F16) M(bf16, BF16)

// SplitMix64, identical to cnnbench_kernels::rng::SplitMix64 (unsigned
// 64-bit arithmetic wraps exactly as Rust's wrapping_* does).
struct SplitMix64 {
    u64 s;
    __device__ __forceinline__ explicit SplitMix64(u64 seed) : s(seed) {}
    __device__ __forceinline__ u64 next_u64() {
        s += 0x9E3779B97F4A7C15ull;
        u64 z = s;
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        return z ^ (z >> 31);
    }
};

// cnnbench_kernels::eltwise::dropout_keep: element i of the draw seeded by
// `seed` is kept when a uniform u in [0, 1) is >= p. (x >> 40) < 2^24 is
// exact in float, and so is the division by 2^24.
__device__ __forceinline__ bool dropout_keep(u64 seed, u64 i, float p) {
    SplitMix64 g(seed ^ (i * 0xD6E8FEB86659FD93ull));
    float u = (float)(g.next_u64() >> 40) / 16777216.0f;
    return u >= p;
}

// 16-byte vectors for memory-bound kernels: one ld.global.v4 / st.global.v4
// moves 4 f32 or 8 f16/bf16 (ops/relu, ops/add, ops/pool). The host
// emulation (backend/cuda/emu) has no CUDA vector types: a 16-byte aligned
// struct stands in.
#ifndef __CUDACC__
struct alignas(16) uint4 {
    unsigned x, y, z, w;
};
#endif

// The byte offset of p within its 16-byte line.
__device__ __forceinline__ u64 line_offset(const void* p) { return (u64)p & 15u; }

// One vector of storage D: its elements through D's conversions.
template <class D>
struct Vec16 {
    static constexpr int N = 16 / (int)sizeof(typename D::T);
    union {
        uint4 raw;
        typename D::T e[N];
    };
    __device__ __forceinline__ float get(int i) const { return D::load(e, i); }
    __device__ __forceinline__ void set(int i, float v) { D::store(e, i, v); }
    // Vector v of p, which must be 16-byte aligned.
    static __device__ __forceinline__ Vec16 load(const typename D::T* p, u64 v) {
        Vec16 r;
        r.raw = ((const uint4*)p)[v];
        return r;
    }
    __device__ __forceinline__ void store(typename D::T* p, u64 v) const { ((uint4*)p)[v] = raw; }
};

// How an elementwise pass over n elements of `size` bytes splits: `head`
// scalars up to the first 16-byte boundary, `vectors` whole vectors of
// `per` elements from there, then the tail's scalars. `ors` and `ands` are
// the OR and AND of every pointer's line_offset: the pointers share one
// offset exactly when the two are equal, and only then, with that offset a
// whole number of elements, are there vectors (else every element is a
// scalar: the fallback for misaligned buffers).
struct VecSplit {
    u64 n, head, vectors, per;
    __device__ __forceinline__ VecSplit(u64 n_, u64 size, u64 per_, u64 ors, u64 ands)
        : n(n_), head(n_), vectors(0), per(per_) {
        if (ors == ands && ors % size == 0) {
            head = min(n, ((16u - ors) & 15u) / size);
            vectors = (n - head) / per;
        }
    }
    // Scalars outside the vectors: the head, then the tail.
    __device__ __forceinline__ u64 scalars() const { return n - vectors * per; }
    // The element index of scalar s.
    __device__ __forceinline__ u64 scalar(u64 s) const {
        return s < head ? s : s + vectors * per;
    }
};
