// Softmax cross-entropy over `classes` logits per image, mean over the
// batch, as cnnbench_kernels::loss (which accumulates in f64; these in
// float). The forward runs one block of XENT_THREADS threads per image; the
// host then launches mean_f32 over the per-image losses.

#define XENT_THREADS 256

// Tree reductions over a block of XENT_THREADS threads (a power of two);
// every thread gets the result. `sh` holds XENT_THREADS values.
__device__ __forceinline__ float block_max(float v, float* sh) {
    unsigned t = threadIdx.x;
    sh[t] = v;
    __syncthreads();
    for (unsigned s = XENT_THREADS / 2; s > 0; s >>= 1) {
        if (t < s) sh[t] = fmaxf(sh[t], sh[t + s]);
        __syncthreads();
    }
    float r = sh[0];
    __syncthreads();
    return r;
}

__device__ __forceinline__ float block_sum(float v, float* sh) {
    unsigned t = threadIdx.x;
    sh[t] = v;
    __syncthreads();
    for (unsigned s = XENT_THREADS / 2; s > 0; s >>= 1) {
        if (t < s) sh[t] += sh[t + s];
        __syncthreads();
    }
    float r = sh[0];
    __syncthreads();
    return r;
}

// probs[b, :] = softmax(logits[b, :]); row_loss[b] = -log p[label]
// computed as -(z[label] - max - log(sum)). fmaxf ignores a NaN logit, as
// f32::max does on the CPU; the NaN still reaches the sum and the loss. A
// label outside 0..classes gives a NaN loss (the CPU would panic).
template <class D>
__device__ __forceinline__ void xent_fwd_body(const typename D::T* logits, const u32* labels,
                                              float* probs, float* row_loss, int classes) {
    __shared__ float sh[XENT_THREADS];
    u64 b = blockIdx.x;
    const typename D::T* z = logits + b * (u64)classes;
    float* p = probs + b * (u64)classes;
    float m = NEG_INF;
    for (int j = threadIdx.x; j < classes; j += XENT_THREADS) m = fmaxf(m, D::load(z, j));
    m = block_max(m, sh);
    float s = 0.0f;
    for (int j = threadIdx.x; j < classes; j += XENT_THREADS) {
        float e = expf(D::load(z, j) - m);
        p[j] = e;
        s += e;
    }
    s = block_sum(s, sh);
    // Each thread rescales the values it wrote itself: no barrier needed.
    for (int j = threadIdx.x; j < classes; j += XENT_THREADS) p[j] = p[j] / s;
    if (threadIdx.x == 0) {
        u32 l = labels[b];
        row_loss[b] = l < (u32)classes ? -(D::load(z, l) - m - logf(s)) : QNAN;
    }
}

// dlogits = (p - onehot(label)) / batch, the gradient of the mean loss.
template <class D>
__device__ __forceinline__ void xent_bwd_body(const float* probs, const u32* labels,
                                              typename D::T* dlogits, int classes, int batch) {
    u64 n = (u64)classes * (u64)batch;
    GRID_STRIDE(e, n) {
        u64 b = e / (u64)classes;
        u32 j = (u32)(e - b * (u64)classes);
        float t = j == labels[b] ? 1.0f : 0.0f;
        D::store(dlogits, e, (probs[e] - t) / (float)batch);
    }
}

#define XENT(sfx, D)                                                                      \
    extern "C" __global__ void __launch_bounds__(XENT_THREADS)                            \
        softmax_xent_fwd_##sfx(const D::T* logits, const u32* labels, float* probs,       \
                               float* row_loss, int classes) {                            \
        xent_fwd_body<D>(logits, labels, probs, row_loss, classes);                       \
    }                                                                                     \
    extern "C" __global__ void softmax_xent_bwd_##sfx(const float* probs, const u32* labels, \
                                                      D::T* dlogits, int classes, int batch) { \
        xent_bwd_body<D>(probs, labels, dlogits, classes, batch);                         \
    }
INSTANTIATE_STORAGES(XENT)

// out[0] = mean of x[0..n), in one block of XENT_THREADS threads. Summed in
// double, as the CPU sums the per-image losses in f64.
extern "C" __global__ void __launch_bounds__(XENT_THREADS)
    mean_f32(const float* x, int n, float* out) {
    __shared__ double sh[XENT_THREADS];
    unsigned t = threadIdx.x;
    double s = 0.0;
    for (int i = t; i < n; i += XENT_THREADS) s += (double)x[i];
    sh[t] = s;
    __syncthreads();
    for (unsigned k = XENT_THREADS / 2; k > 0; k >>= 1) {
        if (t < k) sh[t] += sh[t + k];
        __syncthreads();
    }
    if (t == 0) out[0] = (float)(sh[0] / (double)n);
}
