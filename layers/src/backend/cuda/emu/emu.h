// A host emulation of the little of CUDA that cnnbench's kernels use, so
// that their bodies can run on a machine without a GPU (tests only; see
// emu.rs). A launch runs its blocks one after another on EMU_THREADS host
// threads, which meet at a barrier for every __syncthreads(); a __shared__
// array is a function-local static, which all threads of the running block
// see, as on the device. Unlike the device's, it starts zeroed and keeps
// its values from block to block: a kernel that reads shared memory it
// never wrote is not caught here. prelude.cuh follows this header, with its device
// conversions (PTX) replaced by conversions.h's.
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
#define __launch_bounds__(n)
inline void __syncthreads() { emu_barrier->arrive_and_wait(); }

template <class T> inline T min(T a, T b) { return a < b ? a : b; }
template <class T> inline T max(T a, T b) { return a < b ? b : a; }
inline float __uint_as_float(unsigned u) {
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}
inline unsigned __float_as_uint(float f) {
    unsigned u;
    std::memcpy(&u, &f, 4);
    return u;
}

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
