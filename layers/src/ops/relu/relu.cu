// ReLU forward and backward on 16-byte vectors (prelude.cuh's Vec16 and
// VecSplit): the `--own-kernels` path, in place of cuDNN's activation.
// Each pass is one grid-stride loop over whole vectors and one over the
// scalars left at either end (or over every element when the buffers do
// not share their alignment). Arithmetic is in float, each element rounded
// once to the storage.
//
// Forward: y = x > 0 ? x : 0, except that a NaN stays NaN, as cuDNN's
// activation with CUDNN_PROPAGATE_NAN gives it (the default path); the
// CPU's relu (f32::max) turns it into 0.
// Backward: dx = y > 0 ? dy : 0, reading y and dy only (cuDNN's also reads
// x). With `two`, the ReLU's output has two consumers and dy = dy0 + dy1 is
// summed on the way (in float, before the select, as the CPU does), so no
// separate pass forms the sum.

// relu() itself is prelude.cuh's (the add's fused ReLU uses it too).

template <class D>
__device__ __forceinline__ void relu_fwd_body(const typename D::T* x, typename D::T* y, u64 n) {
    typedef Vec16<D> V;
    VecSplit s(n, sizeof(typename D::T), V::N, line_offset(x) | line_offset(y),
               line_offset(x) & line_offset(y));
    const typename D::T* xv = x + s.head;
    typename D::T* yv = y + s.head;
    GRID_STRIDE(v, s.vectors) {
        V a = V::load(xv, v);
#pragma unroll
        for (int i = 0; i < V::N; ++i) a.set(i, relu(a.get(i)));
        a.store(yv, v);
    }
    GRID_STRIDE(k, s.scalars()) {
        u64 i = s.scalar(k);
        D::store(y, i, relu(D::load(x, i)));
    }
}

template <class D>
__device__ __forceinline__ void relu_bwd_body(const typename D::T* y, const typename D::T* dy0,
                                              const typename D::T* dy1, typename D::T* dx, u64 n,
                                              int two) {
    typedef Vec16<D> V;
    if (!two) dy1 = dy0;
    u64 ors = line_offset(y) | line_offset(dy0) | line_offset(dy1) | line_offset(dx);
    u64 ands = line_offset(y) & line_offset(dy0) & line_offset(dy1) & line_offset(dx);
    VecSplit s(n, sizeof(typename D::T), V::N, ors, ands);
    u64 h = s.head;
    GRID_STRIDE(v, s.vectors) {
        V m = V::load(y + h, v);
        V g = V::load(dy0 + h, v);
        // dy1 is read only when it is a second tensor.
        V g1 = two ? V::load(dy1 + h, v) : g;
#pragma unroll
        for (int i = 0; i < V::N; ++i) {
            float d = two ? g.get(i) + g1.get(i) : g.get(i);
            g.set(i, m.get(i) > 0.0f ? d : 0.0f);
        }
        g.store(dx + h, v);
    }
    GRID_STRIDE(k, s.scalars()) {
        u64 i = s.scalar(k);
        float g = D::load(dy0, i);
        if (two) g += D::load(dy1, i);
        D::store(dx, i, D::load(y, i) > 0.0f ? g : 0.0f);
    }
}

#define RELU(sfx, D)                                                                          \
    extern "C" __global__ void relu_fwd_##sfx(const D::T* x, D::T* y, u64 n) {                \
        relu_fwd_body<D>(x, y, n);                                                            \
    }                                                                                         \
    extern "C" __global__ void relu_bwd_##sfx(const D::T* y, const D::T* dy0, const D::T* dy1, \
                                              D::T* dx, u64 n, int two) {                     \
        relu_bwd_body<D>(y, dy0, dy1, dx, n, two);                                            \
    }
INSTANTIATE_STORAGES(RELU)
