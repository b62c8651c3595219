// Sigmoid with binary cross-entropy over one logit per image, mean over
// the batch, as cnnbench_kernels::loss::sigmoid_bce_fwd/bwd: the stable
// form max(z, 0) − z·y + log1p(exp(−|z|)), its derivative (σ(z) − y)/n.
// Both in double, as the CPU computes them (one value per image: the cost
// is nothing beside the network). Labels are 0 or 1 (checked on the host).

#define BCE_THREADS 256

// out[0] = the mean loss, in one block of BCE_THREADS threads.
template <class D>
__device__ __forceinline__ void bce_fwd_body(const typename D::T* z, const u32* labels,
                                             float* out, int n) {
    __shared__ double sh[BCE_THREADS];
    unsigned t = threadIdx.x;
    double s = 0.0;
    for (int i = t; i < n; i += BCE_THREADS) {
        double v = (double)D::load(z, i);
        s += fmax(v, 0.0) - v * (double)labels[i] + log1p(exp(-fabs(v)));
    }
    sh[t] = s;
    __syncthreads();
    for (unsigned k = BCE_THREADS / 2; k > 0; k >>= 1) {
        if (t < k) sh[t] += sh[t + k];
        __syncthreads();
    }
    if (t == 0) out[0] = (float)(sh[0] / (double)n);
}

// dz = (σ(z) − y) / n, in the logits' storage.
template <class D>
__device__ __forceinline__ void bce_bwd_body(const typename D::T* z, const u32* labels,
                                             typename D::T* dz, int n) {
    GRID_STRIDE(i, n) {
        double s = 1.0 / (1.0 + exp(-(double)D::load(z, i)));
        D::store(dz, i, (float)((s - (double)labels[i]) / (double)n));
    }
}

#define SIGMOID_BCE(sfx, D)                                                            \
    extern "C" __global__ void __launch_bounds__(BCE_THREADS)                          \
        sigmoid_bce_fwd_##sfx(const D::T* z, const u32* labels, float* out, int n) {   \
        bce_fwd_body<D>(z, labels, out, n);                                            \
    }                                                                                  \
    extern "C" __global__ void sigmoid_bce_bwd_##sfx(const D::T* z, const u32* labels, \
                                                     D::T* dz, int n) {                \
        bce_bwd_body<D>(z, labels, dz, n);                                             \
    }
INSTANTIATE_STORAGES(SIGMOID_BCE)
