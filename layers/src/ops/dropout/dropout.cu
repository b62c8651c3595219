// Dropout with the CPU's counter-based mask (cnnbench_kernels::eltwise::
// dropout_keep): element i's keep bit is a hash of (seed, i), where i is the
// element's NHWC index over the whole batch. An NCHW tensor therefore gets
// exactly the mask the CPU draws for the same tensor in NHWC, and any grid
// shape draws the same bits.
//
// The seed is `seed`, or, where `seed_at` is not null, `seed` XOR the u64 it
// points to: a step captured in a CUDA graph reads the step's seed from
// device memory that a copy outside the graph sets before each replay, so
// that each replay draws a new mask as an eager step does.

template <class D>
__device__ __forceinline__ void dropout_fwd_body(const typename D::T* x, typename D::T* y,
                                                 u8* mask, u64 n, float p, u64 seed,
                                                 const u64* seed_at, int c, int h, int w,
                                                 int nchw) {
    float scale = 1.0f / (1.0f - p);
    if (seed_at) seed ^= *seed_at;
    GRID_STRIDE(e, n) {
        u64 idx = e;
        if (nchw) {
            // e = ((b*c + cc)*h + hh)*w + ww  ->  ((b*h + hh)*w + ww)*c + cc
            u64 ww = e % (u64)w;
            u64 t = e / (u64)w;
            u64 hh = t % (u64)h;
            t /= (u64)h;
            u64 cc = t % (u64)c;
            u64 b = t / (u64)c;
            idx = ((b * (u64)h + hh) * (u64)w + ww) * (u64)c + cc;
        }
        u8 keep = dropout_keep(seed, idx, p) ? 1 : 0;
        mask[e] = keep;
        D::store(y, e, D::load(x, e) * ((float)keep * scale));
    }
}

template <class D>
__device__ __forceinline__ void dropout_bwd_body(const typename D::T* dy, const u8* mask,
                                                 typename D::T* dx, u64 n, float p) {
    float scale = 1.0f / (1.0f - p);
    GRID_STRIDE(e, n) { D::store(dx, e, D::load(dy, e) * ((float)mask[e] * scale)); }
}

#define DROPOUT(sfx, D)                                                                  \
    extern "C" __global__ void dropout_fwd_##sfx(const D::T* x, D::T* y, u8* mask, u64 n, \
                                                 float p, u64 seed, const u64* seed_at,  \
                                                 int c, int h, int w, int nchw) {        \
        dropout_fwd_body<D>(x, y, mask, n, p, seed, seed_at, c, h, w, nchw);             \
    }                                                                                    \
    extern "C" __global__ void dropout_bwd_##sfx(const D::T* dy, const u8* mask, D::T* dx, \
                                                 u64 n, float p) {                       \
        dropout_bwd_body<D>(dy, mask, dx, n, p);                                         \
    }
INSTANTIATE_STORAGES(DROPOUT)
