// The residual add y = a + b on 16-byte vectors (prelude.cuh's Vec16 and
// VecSplit): the `--own-kernels` path, in place of cuDNN's op-tensor. One
// grid-stride loop over whole vectors and one over the scalars left at
// either end (or over every element when the buffers do not share their
// alignment); the sum is in float, rounded once to the storage, as
// cudnnOpTensor's. add_relu_fwd applies the ReLU that alone reads the sum
// in the same pass (prelude.cuh's relu(), before the one rounding), so the
// ReLU's forward moves nothing of its own; its backward still runs.

template <class D, bool RELU>
__device__ __forceinline__ void add_fwd_body(const typename D::T* a, const typename D::T* b,
                                             typename D::T* y, u64 n) {
    typedef Vec16<D> V;
    u64 ors = line_offset(a) | line_offset(b) | line_offset(y);
    u64 ands = line_offset(a) & line_offset(b) & line_offset(y);
    VecSplit s(n, sizeof(typename D::T), V::N, ors, ands);
    u64 h = s.head;
    GRID_STRIDE(v, s.vectors) {
        V p = V::load(a + h, v);
        V q = V::load(b + h, v);
#pragma unroll
        for (int i = 0; i < V::N; ++i) {
            float sum = p.get(i) + q.get(i);
            p.set(i, RELU ? relu(sum) : sum);
        }
        p.store(y + h, v);
    }
    GRID_STRIDE(k, s.scalars()) {
        u64 i = s.scalar(k);
        float sum = D::load(a, i) + D::load(b, i);
        D::store(y, i, RELU ? relu(sum) : sum);
    }
}

#define ADD(sfx, D)                                                                     \
    extern "C" __global__ void add_fwd_##sfx(const D::T* a, const D::T* b, D::T* y, u64 n) { \
        add_fwd_body<D, false>(a, b, y, n);                                             \
    }                                                                                   \
    extern "C" __global__ void add_relu_fwd_##sfx(const D::T* a, const D::T* b, D::T* y,   \
                                                  u64 n) {                              \
        add_fwd_body<D, true>(a, b, y, n);                                              \
    }
INSTANTIATE_STORAGES(ADD)
