// LRN across channels for what cuDNN refuses: its LRN checks allow half,
// float, double and int8 data, and it has no bf16 kernel. The semantics are
// cnnbench_kernels::norm::lrn's (Caffe/PyTorch):
//   s_i = k + alpha/size · Σ x_j² over the window j ∈ [i − before, i + after]
//         clipped to 0..c (before = (size − 1)/2, after = size − 1 − before),
//   y_i = x_i · s_i^−beta,
//   dx_i = dy_i · s_i^−beta − 2·alpha·beta/size · x_i · Σ_{j: i ∈ win(j)} dy_j·y_j/s_j.
// One thread per element; the backward recomputes each neighbour's s_j from
// x (size² loads of neighbouring, cached values) instead of keeping s.
// Everything is computed in float. `nchw` selects the memory order: a
// channel's neighbours are h·w elements apart (NCHW) or adjacent (NHWC).
// Only the bf16 instances run in training (cuDNN does f32 and f16); the
// others are compiled for uniformity and the host tests.

struct LrnArgs {
    u64 len, hw;
    int c, nchw, size;
    float alpha, beta, k;

    // The channel of element e, and the offset of its channel 0.
    __device__ __forceinline__ void locate(u64 e, int& ch, u64& base, u64& stride) const {
        if (nchw) {
            stride = hw;
            ch = (int)((e / hw) % (u64)c);
        } else {
            stride = 1;
            ch = (int)(e % (u64)c);
        }
        base = e - (u64)ch * stride;
    }
    __device__ __forceinline__ int before() const { return (size - 1) / 2; }
    __device__ __forceinline__ int after() const { return size - 1 - before(); }

    // s_j = k + alpha/size · Σ x² over channel j's window.
    template <class D>
    __device__ __forceinline__ float scale(const typename D::T* x, u64 base, u64 stride,
                                           int j) const {
        int lo = max(j - before(), 0);
        int hi = min(j + after() + 1, c);
        float sq = 0.0f;
        for (int m = lo; m < hi; ++m) {
            float v = D::load(x, base + (u64)m * stride);
            sq += v * v;
        }
        return k + alpha / (float)size * sq;
    }
};

template <class D>
__device__ __forceinline__ void lrn_fwd_body(const typename D::T* x, typename D::T* y,
                                             LrnArgs a) {
    GRID_STRIDE(e, a.len) {
        int ch;
        u64 base, stride;
        a.locate(e, ch, base, stride);
        float s = a.scale<D>(x, base, stride, ch);
        D::store(y, e, D::load(x, e) * powf(s, -a.beta));
    }
}

template <class D>
__device__ __forceinline__ void lrn_bwd_body(const typename D::T* x, const typename D::T* y,
                                             const typename D::T* dy, typename D::T* dx,
                                             LrnArgs a) {
    float coef = 2.0f * a.alpha * a.beta / (float)a.size;
    GRID_STRIDE(e, a.len) {
        int ch;
        u64 base, stride;
        a.locate(e, ch, base, stride);
        // Channel j's window holds ch when j − before <= ch <= j + after.
        int lo = max(ch - a.after(), 0);
        int hi = min(ch + a.before() + 1, a.c);
        float acc = 0.0f;
        for (int j = lo; j < hi; ++j) {
            u64 o = base + (u64)j * stride;
            acc += D::load(dy, o) * D::load(y, o) / a.scale<D>(x, base, stride, j);
        }
        float s = a.scale<D>(x, base, stride, ch);
        D::store(dx, e, D::load(dy, e) * powf(s, -a.beta) - coef * D::load(x, e) * acc);
    }
}

#define LRN_ARGS u64 len, u64 hw, int c, int nchw, int size, float alpha, float beta, float k
#define LRN_MAKE_ARGS {len, hw, c, nchw, size, alpha, beta, k}

#define LRN(suffix, D)                                                                         \
    extern "C" __global__ void lrn_fwd_##suffix(const D::T* x, D::T* y, LRN_ARGS) {            \
        LrnArgs a = LRN_MAKE_ARGS;                                                             \
        lrn_fwd_body<D>(x, y, a);                                                              \
    }                                                                                          \
    extern "C" __global__ void lrn_bwd_##suffix(const D::T* x, const D::T* y, const D::T* dy,  \
                                                D::T* dx, LRN_ARGS) {                          \
        LrnArgs a = LRN_MAKE_ARGS;                                                             \
        lrn_bwd_body<D>(x, y, dy, dx, a);                                                      \
    }
INSTANTIATE_STORAGES(LRN)
