// The bias gradient db[c] = sum of dy over every image and pixel, for what
// cuDNN refuses: cudnnConvolutionBackwardBias checks for half, float and
// double data and has no bf16 kernel. Used by the convolutions and the
// fully connected layers.
//
// dy is viewed as [outer][c][inner]: NCHW is outer = n, inner = h·w; NHWC
// (and a fully connected layer's [n][c]) is outer = n·h·w, inner = 1. The
// outer range is cut into `chunks` of `per_chunk`; pass 1 writes one fp32
// partial sum per (chunk, channel) into part[chunk][c], pass 2
// (bias_grad_finish) adds a channel's partials in chunk order and rounds
// once. Every sum runs in a fixed order, so the result is deterministic,
// and all accumulation is fp32, as cuDNN's is for half data. Only the bf16
// instances run in training (cuDNN does f32 and f16); the others are
// compiled for uniformity and the host tests.

#define BIAS_THREADS 256
// bias_grad_rows: 32 lanes over neighbouring channels (coalesced reads of
// an NHWC row) x 8 row groups.
#define BIAS_LANES 32
#define BIAS_ROWS (BIAS_THREADS / BIAS_LANES)

// NHWC: block = (chunk, tile of 32 channels), blockIdx.x = chunk·tiles +
// tile. Lane l of row group g sums rows g, g + 8, ... of the chunk.
template <class D>
__device__ __forceinline__ void bias_grad_rows_body(const typename D::T* dy, float* part,
                                                    u64 rows, u64 per_chunk, int c) {
    __shared__ float sh[BIAS_ROWS][BIAS_LANES];
    int tiles = (c + BIAS_LANES - 1) / BIAS_LANES;
    u64 chunk = blockIdx.x / tiles;
    int lane = threadIdx.x % BIAS_LANES;
    int group = threadIdx.x / BIAS_LANES;
    int ch = (int)(blockIdx.x % tiles) * BIAS_LANES + lane;
    u64 lo = chunk * per_chunk;
    u64 hi = min(lo + per_chunk, rows);
    float acc = 0.0f;
    if (ch < c) {
        for (u64 r = lo + group; r < hi; r += BIAS_ROWS) acc += D::load(dy, r * (u64)c + ch);
    }
    sh[group][lane] = acc;
    __syncthreads();
    if (group == 0 && ch < c) {
        float s = 0.0f;
        for (int g = 0; g < BIAS_ROWS; ++g) s += sh[g][lane];
        part[chunk * (u64)c + ch] = s;
    }
}

// NCHW: block = (chunk, channel), blockIdx.x = chunk·c + channel. The
// threads stride over each image's plane of the channel, then reduce.
template <class D>
__device__ __forceinline__ void bias_grad_planes_body(const typename D::T* dy, float* part,
                                                      u64 outer, u64 per_chunk, int c,
                                                      u64 inner) {
    __shared__ float sh[BIAS_THREADS];
    u64 chunk = blockIdx.x / c;
    int ch = (int)(blockIdx.x % c);
    u64 lo = chunk * per_chunk;
    u64 hi = min(lo + per_chunk, outer);
    float acc = 0.0f;
    for (u64 b = lo; b < hi; ++b) {
        u64 base = (b * (u64)c + ch) * inner;
        for (u64 i = threadIdx.x; i < inner; i += BIAS_THREADS) acc += D::load(dy, base + i);
    }
    unsigned t = threadIdx.x;
    sh[t] = acc;
    __syncthreads();
    for (unsigned s = BIAS_THREADS / 2; s > 0; s >>= 1) {
        if (t < s) sh[t] += sh[t + s];
        __syncthreads();
    }
    if (t == 0) part[chunk * (u64)c + ch] = sh[0];
}

// db[ch] = the chunks' partial sums of channel ch, in chunk order.
template <class D>
__device__ __forceinline__ void bias_grad_finish_body(const float* part, typename D::T* db,
                                                      int chunks, int c) {
    GRID_STRIDE(ch, c) {
        float s = 0.0f;
        for (int k = 0; k < chunks; ++k) s += part[(u64)k * c + ch];
        D::store(db, ch, s);
    }
}

#define BIAS_GRAD(suffix, D)                                                                   \
    extern "C" __global__ void bias_grad_rows_##suffix(const D::T* dy, float* part, u64 rows,  \
                                                       u64 per_chunk, int c) {                 \
        bias_grad_rows_body<D>(dy, part, rows, per_chunk, c);                                  \
    }                                                                                          \
    extern "C" __global__ void bias_grad_planes_##suffix(const D::T* dy, float* part,          \
                                                         u64 outer, u64 per_chunk, int c,      \
                                                         u64 inner) {                          \
        bias_grad_planes_body<D>(dy, part, outer, per_chunk, c, inner);                        \
    }                                                                                          \
    extern "C" __global__ void bias_grad_finish_##suffix(const float* part, D::T* db,          \
                                                         int chunks, int c) {                  \
        bias_grad_finish_body<D>(part, db, chunks, c);                                         \
    }
INSTANTIATE_STORAGES(BIAS_GRAD)
