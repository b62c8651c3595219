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

// ---------------------------------------------------------------------
// The table gradient without atomics (`--own-kernels`): the tokens sorted
// by row, then each row's gradients summed in token order.
//
// 1. A stable LSD radix sort of (row, token) pairs, 8 bits of the row per
//    pass, as many passes as the vocabulary needs (2 for 20,000 rows). An
//    id that selects no row gets the key `vocab`, sorted last and skipped.
//    Each pass: per tile of SORT_TILE tokens, a histogram of the digit
//    (embedding_sort_hist); one exclusive scan over (digit, tile)
//    (embedding_sort_scan); each token to its place, ranked within its tile
//    by its position (embedding_sort_scatter). No atomics; the order is
//    fixed by the data alone.
// 2. The sorted tokens in chunks of SEG_CHUNK, one thread per (chunk,
//    feature) (embedding_seg_sum): a row whose tokens all fall in one
//    chunk is written directly; a row that crosses chunks leaves partial
//    sums, `head` in the chunk where it starts and `tail` in each chunk it
//    continues into, which embedding_seg_carry adds in chunk order.
// Every row is a sum in token order (the CPU's), in float, of the same
// terms in the same association every step: deterministic, and bit for
// bit the CPU's for a row inside one chunk. Rows no token selects keep
// the zeros the layer writes first.

#define SORT_THREADS 256
#define SORT_PER_THREAD 4
#define SORT_TILE (SORT_THREADS * SORT_PER_THREAD)
#define SEG_CHUNK 32
// Not a digit: a position past the end of the last tile.
#define NO_DIGIT 256u

// Token i's sort key and payload in a pass: from the ids in the first,
// else from the previous pass's output.
__device__ __forceinline__ void sort_item(const float* ids, const u32* keys_in,
                                          const u32* vals_in, u64 i, int vocab, int first,
                                          u32* key, u32* val) {
    if (first) {
        long long r = embedding_row(ids[i], vocab);
        *key = r < 0 ? (u32)vocab : (u32)r;
        *val = (u32)i;
    } else {
        *key = keys_in[i];
        *val = vals_in[i];
    }
}

// The digits of this block's tile into `digits` (NO_DIGIT past the end).
__device__ __forceinline__ void load_digits(u32* digits, const float* ids, const u32* keys_in,
                                            const u32* vals_in, u64 tokens, int vocab,
                                            int shift, int first, u64 tile) {
    for (int q = 0; q < SORT_PER_THREAD; ++q) {
        int p = q * SORT_THREADS + (int)threadIdx.x;
        u64 i = tile * SORT_TILE + (u64)p;
        u32 d = NO_DIGIT;
        if (i < tokens) {
            u32 key, val;
            sort_item(ids, keys_in, vals_in, i, vocab, first, &key, &val);
            d = (key >> shift) & 255u;
        }
        digits[p] = d;
    }
}

// hist[d * tiles + tile] = how many tokens of the tile have digit d.
extern "C" __global__ void embedding_sort_hist(const float* ids, const u32* keys_in,
                                               const u32* vals_in, u32* hist, u64 tokens,
                                               int vocab, int shift, int first) {
    __shared__ u32 digits[SORT_TILE];
    u64 tiles = (tokens + SORT_TILE - 1) / SORT_TILE;
    for (u64 tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
        load_digits(digits, ids, keys_in, vals_in, tokens, vocab, shift, first, tile);
        __syncthreads();
        u32 d = threadIdx.x, count = 0;
        for (int p = 0; p < SORT_TILE; ++p) count += digits[p] == d;
        hist[(u64)d * tiles + tile] = count;
        __syncthreads();
    }
}

// hist (len entries) replaced by its exclusive prefix sums; one block.
extern "C" __global__ void embedding_sort_scan(u32* hist, u64 len) {
    __shared__ u32 sums[SORT_THREADS];
    u64 per = (len + SORT_THREADS - 1) / SORT_THREADS;
    u64 lo = min(len, per * threadIdx.x), hi = min(len, lo + per);
    u32 s = 0;
    for (u64 i = lo; i < hi; ++i) s += hist[i];
    sums[threadIdx.x] = s;
    __syncthreads();
    if (threadIdx.x == 0) {
        u32 run = 0;
        for (int t = 0; t < SORT_THREADS; ++t) {
            u32 v = sums[t];
            sums[t] = run;
            run += v;
        }
    }
    __syncthreads();
    u32 run = sums[threadIdx.x];
    for (u64 i = lo; i < hi; ++i) {
        u32 v = hist[i];
        hist[i] = run;
        run += v;
    }
}

// Each token of the tile to hist[digit, tile] + its rank among the tile's
// earlier tokens of the same digit: a stable pass.
extern "C" __global__ void embedding_sort_scatter(const float* ids, const u32* keys_in,
                                                  const u32* vals_in, const u32* hist,
                                                  u32* keys_out, u32* vals_out, u64 tokens,
                                                  int vocab, int shift, int first) {
    __shared__ u32 digits[SORT_TILE];
    u64 tiles = (tokens + SORT_TILE - 1) / SORT_TILE;
    for (u64 tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
        load_digits(digits, ids, keys_in, vals_in, tokens, vocab, shift, first, tile);
        __syncthreads();
        u32 mine[SORT_PER_THREAD], rank[SORT_PER_THREAD];
        for (int q = 0; q < SORT_PER_THREAD; ++q) {
            mine[q] = digits[q * SORT_THREADS + threadIdx.x];
            rank[q] = 0;
        }
        // Every thread walks the tile in step (one shared word at a time).
        for (int p = 0; p < SORT_TILE; ++p) {
            u32 d = digits[p];
            for (int q = 0; q < SORT_PER_THREAD; ++q)
                rank[q] += (d == mine[q]) & (p < q * SORT_THREADS + (int)threadIdx.x);
        }
        for (int q = 0; q < SORT_PER_THREAD; ++q) {
            u64 i = tile * SORT_TILE + (u64)(q * SORT_THREADS + threadIdx.x);
            if (i >= tokens) continue;
            u32 key, val;
            sort_item(ids, keys_in, vals_in, i, vocab, first, &key, &val);
            u64 at = (u64)hist[(u64)mine[q] * tiles + tile] + rank[q];
            keys_out[at] = key;
            vals_out[at] = val;
        }
        __syncthreads();
    }
}

// Offset of token k's feature j in dy (laid out as y).
__device__ __forceinline__ u64 embedding_at(u64 k, int j, int dim, int t, int nchw) {
    if (nchw) return ((k / (u64)t) * (u64)dim + (u64)j) * (u64)t + k % (u64)t;
    return k * (u64)dim + (u64)j;
}

// One thread per (chunk, feature); see the plan above.
template <class D>
__device__ __forceinline__ void embedding_seg_sum_body(const u32* keys, const u32* vals,
                                                       const typename D::T* dy, float* grad,
                                                       float* head, float* tail, u64 tokens,
                                                       int dim, int vocab, int t, int nchw) {
    u64 chunks = (tokens + SEG_CHUNK - 1) / SEG_CHUNK;
    GRID_STRIDE(e, chunks * (u64)dim) {
        u64 c = e / (u64)dim;
        int j = (int)(e % (u64)dim);
        u64 i0 = c * SEG_CHUNK, i1 = min(i0 + SEG_CHUNK, tokens);
        bool continued = i0 > 0 && keys[i0 - 1] == keys[i0];
        u32 cur = keys[i0];
        u64 start = i0;
        float acc = 0.0f;
        // A run [start, end) of row cur ends: where its sum goes.
        auto flush = [&](u64 end) {
            if (cur >= (u32)vocab) return;
            bool starts_here = !(start == i0 && continued);
            bool ends_here = end < i1 || end == tokens || keys[end] != cur;
            if (!starts_here) tail[c * (u64)dim + j] = acc;
            else if (ends_here) grad[(u64)cur * (u64)dim + j] = acc;
            else head[c * (u64)dim + j] = acc;
        };
        // Loads in groups of 8, issued before the sums that use them.
        for (u64 base = i0; base < i1; base += 8) {
            u32 key[8];
            float g[8];
#pragma unroll
            for (int u = 0; u < 8; ++u) {
                u64 i = base + u;
                key[u] = i < i1 ? keys[i] : 0u;
                g[u] = i < i1 ? D::load(dy, embedding_at(vals[i], j, dim, t, nchw)) : 0.0f;
            }
#pragma unroll
            for (int u = 0; u < 8; ++u) {
                if (base + u >= i1) break;
                if (key[u] != cur) {
                    flush(base + u);
                    cur = key[u];
                    start = base + u;
                    acc = 0.0f;
                }
                acc += g[u];
            }
        }
        flush(i1);
    }
}

// The rows that cross chunks: head of the chunk where the row starts plus
// the tails of the chunks it continues into, in order.
extern "C" __global__ void embedding_seg_carry(const u32* keys, const float* head,
                                               const float* tail, float* grad, u64 tokens,
                                               int dim, int vocab) {
    u64 chunks = (tokens + SEG_CHUNK - 1) / SEG_CHUNK;
    GRID_STRIDE(e, chunks * (u64)dim) {
        u64 c = e / (u64)dim;
        int j = (int)(e % (u64)dim);
        u64 i0 = c * SEG_CHUNK, i1 = min(i0 + SEG_CHUNK, tokens);
        u32 r = keys[i1 - 1];
        if (i1 == tokens || keys[i1] != r || r >= (u32)vocab) continue;
        // The owner is the chunk where the row starts.
        if (keys[i0] == r && i0 > 0 && keys[i0 - 1] == r) continue;
        float s = head[c * (u64)dim + j];
        for (u64 c2 = c + 1; c2 < chunks; c2 += 8) {
            bool in[8];
            float p[8];
#pragma unroll
            for (int u = 0; u < 8; ++u) {
                u64 k = c2 + u;
                in[u] = k < chunks && keys[k * SEG_CHUNK] == r;
                p[u] = in[u] ? tail[k * (u64)dim + j] : 0.0f;
            }
            // Sorted keys: once a chunk starts past the row, all later do.
#pragma unroll
            for (int u = 0; u < 8; ++u)
                if (in[u]) s += p[u];
            if (!in[7]) break;
        }
        grad[(u64)r * (u64)dim + j] = s;
    }
}

#define EMBEDDING_SEG(sfx, D)                                                                \
    extern "C" __global__ void embedding_seg_sum_##sfx(                                      \
        const u32* keys, const u32* vals, const D::T* dy, float* grad, float* head,          \
        float* tail, u64 tokens, int dim, int vocab, int t, int nchw) {                      \
        embedding_seg_sum_body<D>(keys, vals, dy, grad, head, tail, tokens, dim, vocab, t,   \
                                  nchw);                                                     \
    }
INSTANTIATE_STORAGES(EMBEDDING_SEG)
