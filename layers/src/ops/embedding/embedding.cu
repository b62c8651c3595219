// Embedding lookup and its dense table gradient, as
// cnnbench_kernels::embedding. Token ids arrive as f32 (the network's
// input buffer is f32 in every precision); the table and its gradient are
// the f32 master and gradient, whatever the run's storage D of the output.
//
// An id that is not a whole number in [0, vocab) selects no row: its
// output row is zeros and its gradient goes nowhere. The CPU refuses such
// an id with an error before writing anything; the GPU cannot report one
// without a host round trip per step, so it stays in bounds instead.

#ifndef __CUDACC__
// Host emulation (backend/cuda/emu) has no atomicAdd; the same operation
// on the host, which ThreadSanitizer understands.
#include <atomic>
inline float atomicAdd(float* p, float v) { return std::atomic_ref<float>(*p).fetch_add(v); }
#endif

// The row `id` selects, or -1.
__device__ __forceinline__ long long embedding_row(float id, int vocab) {
    // A NaN fails every comparison.
    if (!(id >= 0.0f && id < (float)vocab) || id != floorf(id)) return -1;
    return (long long)id;
}

// Output element e (in the output's memory order) as (token k, feature j):
// NHWC [n][t][dim], or NCHW [n][dim][1][t].
__device__ __forceinline__ void embedding_split(u64 e, int dim, int t, int nchw, u64* k,
                                                u64* j) {
    if (nchw) {
        u64 s = e % (u64)t;
        u64 r = e / (u64)t;
        *j = r % (u64)dim;
        *k = (r / (u64)dim) * (u64)t + s;
    } else {
        *j = e % (u64)dim;
        *k = e / (u64)dim;
    }
}

// y = table[ids], over tokens·dim output elements.
template <class D>
__device__ __forceinline__ void embedding_fwd_body(const float* ids, const float* table,
                                                   typename D::T* y, u64 tokens, int dim,
                                                   int vocab, int t, int nchw) {
    u64 n = tokens * (u64)dim;
    GRID_STRIDE(e, n) {
        u64 k, j;
        embedding_split(e, dim, t, nchw, &k, &j);
        long long r = embedding_row(ids[k], vocab);
        D::store(y, e, r < 0 ? 0.0f : table[(u64)r * (u64)dim + j]);
    }
}

// grad[ids[k]] += dy[k] for every token k; `grad` zeroed beforehand. The
// additions to one row come in no fixed order (atomics), so the sums may
// differ from the CPU's token-order sums in the last bits.
template <class D>
__device__ __forceinline__ void embedding_bwd_body(const float* ids, const typename D::T* dy,
                                                   float* grad, u64 tokens, int dim, int vocab,
                                                   int t, int nchw) {
    u64 n = tokens * (u64)dim;
    GRID_STRIDE(e, n) {
        u64 k, j;
        embedding_split(e, dim, t, nchw, &k, &j);
        long long r = embedding_row(ids[k], vocab);
        if (r >= 0) atomicAdd(&grad[(u64)r * (u64)dim + j], D::load(dy, e));
    }
}

#define EMBEDDING(sfx, D)                                                                   \
    extern "C" __global__ void embedding_fwd_##sfx(const float* ids, const float* table,    \
                                                   D::T* y, u64 tokens, int dim, int vocab, \
                                                   int t, int nchw) {                       \
        embedding_fwd_body<D>(ids, table, y, tokens, dim, vocab, t, nchw);                  \
    }                                                                                       \
    extern "C" __global__ void embedding_bwd_##sfx(const float* ids, const D::T* dy,        \
                                                   float* grad, u64 tokens, int dim,        \
                                                   int vocab, int t, int nchw) {            \
        embedding_bwd_body<D>(ids, dy, grad, tokens, dim, vocab, t, nchw);                  \
    }
INSTANTIATE_STORAGES(EMBEDDING)
