// A host emulation of the little of CUDA that cnnbench's kernels use, so
// that their bodies can run on a machine without a GPU (tests only; see
// emu.rs). A launch runs its blocks one after another on THREADS host
// threads, which meet at a barrier for every __syncthreads(); a __shared__
// array is a function-local static, which all threads of the running block
// see, as on the device. This replaces prelude.cuh, whose conversions are
// PTX: F16 goes through _Float16 and BF16 rounds in integer arithmetic
// (prelude.cuh's own pre-sm_80 path), both to nearest even.
#include <barrier>
#include <cmath>
#include <math.h>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <thread>
#include <vector>

typedef unsigned long long u64;
typedef unsigned int u32;
typedef unsigned short u16;
typedef unsigned char u8;

struct dim3 {
    unsigned x = 0, y = 0, z = 0;
};
static const unsigned EMU_THREADS = 256;
static thread_local dim3 threadIdx;
static thread_local dim3 blockIdx;
static dim3 blockDim{EMU_THREADS, 1, 1};
static dim3 gridDim{1, 1, 1};
static std::barrier<>* emu_barrier = nullptr;

#define __global__
#define __device__
#define __forceinline__ inline
#define __shared__ static
inline void __syncthreads() { emu_barrier->arrive_and_wait(); }

template <class T> inline T min(T a, T b) { return a < b ? a : b; }
template <class T> inline T max(T a, T b) { return a < b ? b : a; }
inline float __uint_as_float(u32 u) {
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}
inline u32 __float_as_uint(float f) {
    u32 u;
    std::memcpy(&u, &f, 4);
    return u;
}

#define NEG_INF __uint_as_float(0xff800000u)
#define QNAN __uint_as_float(0x7fc00000u)
#define GRID_STRIDE(i, n)                                                      \
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < (u64)(n);    \
         i += (u64)blockDim.x * gridDim.x)

inline float f16_to_f32(u16 h) {
    _Float16 v;
    std::memcpy(&v, &h, 2);
    return (float)v;
}
inline u16 f32_to_f16(float f) {
    _Float16 v = (_Float16)f;
    u16 h;
    std::memcpy(&h, &v, 2);
    return h;
}
inline float bf16_to_f32(u16 b) { return __uint_as_float(((u32)b) << 16); }
inline u16 f32_to_bf16(float f) {
    u32 u = __float_as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (u16)((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (u16)(u >> 16);
}

struct F32 {
    typedef float T;
    static float load(const T* p, u64 i) { return p[i]; }
    static void store(T* p, u64 i, float v) { p[i] = v; }
};
struct F16 {
    typedef u16 T;
    static float load(const T* p, u64 i) { return f16_to_f32(p[i]); }
    static void store(T* p, u64 i, float v) { p[i] = f32_to_f16(v); }
};
struct BF16 {
    typedef u16 T;
    static float load(const T* p, u64 i) { return bf16_to_f32(p[i]); }
    static void store(T* p, u64 i, float v) { p[i] = f32_to_bf16(v); }
};
#define INSTANTIATE_STORAGES(M) M(f32, F32) M(f16, F16) M(bf16, BF16)

// Runs `kernel` (a call of one extern "C" kernel) over `grid` blocks of
// EMU_THREADS threads.
inline void emu_launch(unsigned grid, const std::function<void()>& kernel) {
    gridDim = dim3{grid, 1, 1};
    std::barrier<> bar(EMU_THREADS);
    emu_barrier = &bar;
    std::vector<std::thread> workers;
    for (unsigned t = 0; t < EMU_THREADS; ++t) {
        workers.emplace_back([&, t] {
            threadIdx = dim3{t, 0, 0};
            for (unsigned b = 0; b < grid; ++b) {
                blockIdx = dim3{b, 0, 0};
                kernel();
                // No thread starts the next block (and its shared arrays)
                // before all have finished this one.
                bar.arrive_and_wait();
            }
        });
    }
    for (auto& w : workers) w.join();
    emu_barrier = nullptr;
}

// Host buffers in a storage, from and to little-endian f32 files.
template <class D> std::vector<typename D::T> emu_load(const char* path, size_t n) {
    std::vector<float> f(n);
    FILE* fp = std::fopen(path, "rb");
    if (!fp || std::fread(f.data(), 4, n, fp) != n) {
        std::fprintf(stderr, "emu: cannot read %zu floats from %s\n", n, path);
        std::exit(2);
    }
    std::fclose(fp);
    std::vector<typename D::T> v(n);
    for (size_t i = 0; i < n; ++i) D::store(v.data(), i, f[i]);
    return v;
}
template <class D> void emu_save(const char* path, const std::vector<typename D::T>& v) {
    std::vector<float> f(v.size());
    for (size_t i = 0; i < v.size(); ++i) f[i] = D::load(v.data(), i);
    FILE* fp = std::fopen(path, "wb");
    if (!fp || std::fwrite(f.data(), 4, f.size(), fp) != f.size()) {
        std::fprintf(stderr, "emu: cannot write %s\n", path);
        std::exit(2);
    }
    std::fclose(fp);
}
