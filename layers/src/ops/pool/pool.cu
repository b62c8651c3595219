// Max and average pooling for what cuDNN cannot do (ceil-mode output
// sizes, whose last window runs into the far padding), with the semantics
// of cnnbench_kernels::pool:
// - a window's input range is clipped to the input, and its end never
//   passes n + pad (PyTorch's ceil-mode rule);
// - the average divides by the padded window when count_pad, else by the
//   cells inside the input;
// - max keeps the first maximum in scan order (rows, then columns), and a
//   NaN input wins (x > best || isnan(x)), so a NaN is never hidden;
// - a window with no input cell gives -inf (max) or 0 * (1 / divisor)
//   (average; NaN when the divisor is 0), and its gradient goes nowhere.
//   PyTorch's output-size rule never makes such a window.
// The backward gathers: one thread per input cell visits the output
// windows that contain it, in ascending (oh, ow) order, the CPU's order of
// accumulation, so no atomics are needed. `nchw` selects the memory order
// of x, y, dx and dy (NCHW, else NHWC). Index arithmetic is int within an
// image plane (the host checks it fits) and 64-bit across the batch.

struct Win {
    int lo, hi, padded;
};

// cnnbench_kernels::pool::window: input rows lo..hi under output o, and the
// window's length counting padding (the count_pad divisor).
__device__ __forceinline__ Win window(int o, int s, int p, int k, int n) {
    int start = o * s - p;
    int end = min(start + k, n + p);
    Win r;
    r.padded = end - start;
    r.lo = max(start, 0);
    r.hi = max(min(end, n), r.lo);
    return r;
}

struct PoolArgs {
    int mb, c, ih, iw, oh, ow, kh, kw, sh, sw, ph, pw, is_max, count_pad, nchw;

    // Offset of (b, ch, h, w) in a tensor of h_len x w_len pixels.
    __device__ __forceinline__ u64 at(int b, int ch, int h, int w, int h_len, int w_len) const {
        if (nchw) return (((u64)b * c + ch) * h_len + h) * w_len + w;
        return (((u64)b * h_len + h) * w_len + w) * c + ch;
    }
    __device__ __forceinline__ u64 in(int b, int ch, int h, int w) const {
        return at(b, ch, h, w, ih, iw);
    }
    __device__ __forceinline__ u64 out(int b, int ch, int h, int w) const {
        return at(b, ch, h, w, oh, ow);
    }
    // The coordinates of linear position e in a tensor of h_len x w_len.
    __device__ __forceinline__ void coords(u64 e, int h_len, int w_len, int& b, int& ch, int& h,
                                           int& w) const {
        if (nchw) {
            w = (int)(e % (u64)w_len);
            e /= (u64)w_len;
            h = (int)(e % (u64)h_len);
            e /= (u64)h_len;
            ch = (int)(e % (u64)c);
            b = (int)(e / (u64)c);
        } else {
            ch = (int)(e % (u64)c);
            e /= (u64)c;
            w = (int)(e % (u64)w_len);
            e /= (u64)w_len;
            h = (int)(e % (u64)h_len);
            b = (int)(e / (u64)h_len);
        }
    }
    __device__ __forceinline__ float divisor(Win r, Win q) const {
        return count_pad ? (float)(r.padded * q.padded) : (float)((r.hi - r.lo) * (q.hi - q.lo));
    }
};

// The max of window (r, q) and where it is (the first in scan order; a NaN
// wins over anything, a later NaN over an earlier one, as on the CPU).
// With no winner at all (every cell -inf) the first cell is reported, as
// the CPU's argmax starts there.
template <class D>
__device__ __forceinline__ float window_max(const PoolArgs& a, const typename D::T* x, int b,
                                            int ch, Win r, Win q, int& ah, int& aw) {
    float best = NEG_INF;
    ah = r.lo;
    aw = q.lo;
    for (int h = r.lo; h < r.hi; ++h) {
        for (int w = q.lo; w < q.hi; ++w) {
            float v = D::load(x, a.in(b, ch, h, w));
            if (v > best || v != v) {
                best = v;
                ah = h;
                aw = w;
            }
        }
    }
    return best;
}

template <class D>
__device__ __forceinline__ void pool_fwd_body(const typename D::T* x, typename D::T* y,
                                              const PoolArgs& a) {
    u64 n = (u64)a.mb * a.c * a.oh * a.ow;
    GRID_STRIDE(e, n) {
        int b, ch, oh, ow;
        a.coords(e, a.oh, a.ow, b, ch, oh, ow);
        Win r = window(oh, a.sh, a.ph, a.kh, a.ih);
        Win q = window(ow, a.sw, a.pw, a.kw, a.iw);
        float v;
        if (a.is_max) {
            int ah, aw;
            v = window_max<D>(a, x, b, ch, r, q, ah, aw);
        } else {
            float s = 0.0f;
            for (int h = r.lo; h < r.hi; ++h)
                for (int w = q.lo; w < q.hi; ++w) s += D::load(x, a.in(b, ch, h, w));
            v = s * (1.0f / a.divisor(r, q));
        }
        D::store(y, e, v);
    }
}

// Output rows whose window contains input row i: start = o*s - p <= i and
// i < start + k (the clip at n + p never excludes an input row).
__device__ __forceinline__ void covering(int i, int s, int p, int k, int n_out, int& lo,
                                         int& hi) {
    lo = i + p < k ? 0 : (i + p - k) / s + 1;
    hi = min((i + p) / s, n_out - 1);
}

template <class D>
__device__ __forceinline__ void pool_bwd_body(const typename D::T* x, const typename D::T* dy,
                                              typename D::T* dx, const PoolArgs& a) {
    u64 n = (u64)a.mb * a.c * a.ih * a.iw;
    GRID_STRIDE(e, n) {
        int b, ch, h, w;
        a.coords(e, a.ih, a.iw, b, ch, h, w);
        int oh0, oh1, ow0, ow1;
        covering(h, a.sh, a.ph, a.kh, a.oh, oh0, oh1);
        covering(w, a.sw, a.pw, a.kw, a.ow, ow0, ow1);
        float acc = 0.0f;
        for (int oh = oh0; oh <= oh1; ++oh) {
            Win r = window(oh, a.sh, a.ph, a.kh, a.ih);
            for (int ow = ow0; ow <= ow1; ++ow) {
                Win q = window(ow, a.sw, a.pw, a.kw, a.iw);
                float g = D::load(dy, a.out(b, ch, oh, ow));
                if (a.is_max) {
                    int ah, aw;
                    window_max<D>(a, x, b, ch, r, q, ah, aw);
                    if (ah == h && aw == w) acc += g;
                } else {
                    acc += g * (1.0f / a.divisor(r, q));
                }
            }
        }
        D::store(dx, e, acc);
    }
}

#define POOL_INTS                                                                        \
    int mb, int c, int ih, int iw, int oh, int ow, int kh, int kw, int sh, int sw, int ph, \
        int pw, int is_max, int count_pad, int nchw
#define POOL_ARGS {mb, c, ih, iw, oh, ow, kh, kw, sh, sw, ph, pw, is_max, count_pad, nchw}

#define POOL(sfx, D)                                                                      \
    extern "C" __global__ void pool_fwd_##sfx(const D::T* x, D::T* y, POOL_INTS) {        \
        PoolArgs a = POOL_ARGS;                                                           \
        pool_fwd_body<D>(x, y, a);                                                        \
    }                                                                                     \
    extern "C" __global__ void pool_bwd_##sfx(const D::T* x, const D::T* dy, D::T* dx,    \
                                              POOL_INTS) {                                \
        PoolArgs a = POOL_ARGS;                                                           \
        pool_bwd_body<D>(x, dy, dx, a);                                                   \
    }
INSTANTIATE_STORAGES(POOL)
