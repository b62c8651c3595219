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

// ---------------------------------------------------------------------
// NHWC max pooling on channel vectors (`--own-kernels`): each thread takes
// G contiguous channels of one pixel, G = 16 bytes' worth (Vec16) when the
// channels divide into vectors and the buffers are 16-byte aligned (the
// host checks), else 1. The semantics are those above (window rule, first
// maximum in scan order, a NaN wins). The forward also writes, per output
// element, a byte `arg`: where its maximum is within the unclipped window,
// (h - oh·sh + ph)·kw + (w - ow·sw + pw) (the host checks kh·kw <= 256).
// The backward then gathers from arg and dy alone, reading no x: each
// input cell sums, in ascending (oh, ow) order (the CPU's), the gradients
// of the windows whose arg names it.

// G channels of storage D at element offset i: a vector or one scalar.
template <class D, int G>
struct Chans {
    float v[G];
    __device__ __forceinline__ void load(const typename D::T* p, u64 i) {
        if (G == Vec16<D>::N) {
            Vec16<D> a = Vec16<D>::load(p + i, 0);
#pragma unroll
            for (int k = 0; k < G; ++k) v[k] = a.get(k % Vec16<D>::N);
        } else {
#pragma unroll
            for (int k = 0; k < G; ++k) v[k] = D::load(p, i + k);
        }
    }
    __device__ __forceinline__ void store(typename D::T* p, u64 i) const {
        if (G == Vec16<D>::N) {
            Vec16<D> a;
#pragma unroll
            for (int k = 0; k < G; ++k) a.set(k % Vec16<D>::N, v[k]);
            a.store(p + i, 0);
        } else {
#pragma unroll
            for (int k = 0; k < G; ++k) D::store(p, i + k, v[k]);
        }
    }
};

// G argmax bytes at p (p + i is G-aligned: the channel groups start at
// multiples of G and the buffer is the allocator's): one 4- or 8-byte
// access for the vector kernels instead of G byte accesses, bytes in
// address order (little-endian, as the GPU and the host emulator are).
template <int G>
__device__ __forceinline__ void store_args(u8* p, const int* at) {
    if (G == 8 || G == 4) {
        u64 v = 0;
#pragma unroll
        for (int k = 0; k < G; ++k) v |= (u64)(u8)at[k] << (8 * k);
        if (G == 8) *(u64*)p = v;
        else *(u32*)p = (u32)v;
    } else {
#pragma unroll
        for (int k = 0; k < G; ++k) p[k] = (u8)at[k];
    }
}

template <int G>
__device__ __forceinline__ void load_args(const u8* p, int* at) {
    if (G == 8 || G == 4) {
        u64 v = G == 8 ? *(const u64*)p : (u64) * (const u32*)p;
#pragma unroll
        for (int k = 0; k < G; ++k) at[k] = (int)((v >> (8 * k)) & 0xffu);
    } else {
#pragma unroll
        for (int k = 0; k < G; ++k) at[k] = p[k];
    }
}

template <class D, int G>
__device__ __forceinline__ void maxpool_nhwc_fwd_body(const typename D::T* x, typename D::T* y,
                                                      u8* arg, const PoolArgs& a) {
    int groups = a.c / G;
    u64 n = (u64)a.mb * a.oh * a.ow * groups;
    GRID_STRIDE(e, n) {
        int ch = (int)(e % (u64)groups) * G;
        u64 pix = e / (u64)groups;
        int ow = (int)(pix % (u64)a.ow), oh = (int)(pix / (u64)a.ow % (u64)a.oh);
        int b = (int)(pix / ((u64)a.ow * a.oh));
        Win r = window(oh, a.sh, a.ph, a.kh, a.ih);
        Win q = window(ow, a.sw, a.pw, a.kw, a.iw);
        int h0 = oh * a.sh - a.ph, w0 = ow * a.sw - a.pw;
        Chans<D, G> best;
        int at[G];
#pragma unroll
        for (int k = 0; k < G; ++k) {
            best.v[k] = NEG_INF;
            at[k] = (r.lo - h0) * a.kw + (q.lo - w0);
        }
        for (int h = r.lo; h < r.hi; ++h) {
            for (int w = q.lo; w < q.hi; ++w) {
                Chans<D, G> xs;
                xs.load(x, a.in(b, ch, h, w));
                int code = (h - h0) * a.kw + (w - w0);
#pragma unroll
                for (int k = 0; k < G; ++k) {
                    float v = xs.v[k];
                    if (v > best.v[k] || v != v) {
                        best.v[k] = v;
                        at[k] = code;
                    }
                }
            }
        }
        u64 o = a.out(b, ch, oh, ow);
        best.store(y, o);
        store_args<G>(arg + o, at);
    }
}

template <class D, int G>
__device__ __forceinline__ void maxpool_nhwc_bwd_body(const u8* arg, const typename D::T* dy,
                                                      typename D::T* dx, const PoolArgs& a) {
    int groups = a.c / G;
    u64 n = (u64)a.mb * a.ih * a.iw * groups;
    GRID_STRIDE(e, n) {
        int ch = (int)(e % (u64)groups) * G;
        u64 pix = e / (u64)groups;
        int w = (int)(pix % (u64)a.iw), h = (int)(pix / (u64)a.iw % (u64)a.ih);
        int b = (int)(pix / ((u64)a.iw * a.ih));
        int oh0, oh1, ow0, ow1;
        covering(h, a.sh, a.ph, a.kh, a.oh, oh0, oh1);
        covering(w, a.sw, a.pw, a.kw, a.ow, ow0, ow1);
        Chans<D, G> acc;
#pragma unroll
        for (int k = 0; k < G; ++k) acc.v[k] = 0.0f;
        for (int oh = oh0; oh <= oh1; ++oh) {
            for (int ow = ow0; ow <= ow1; ++ow) {
                int code = (h - (oh * a.sh - a.ph)) * a.kw + (w - (ow * a.sw - a.pw));
                u64 o = a.out(b, ch, oh, ow);
                Chans<D, G> g;
                g.load(dy, o);
                int won[G];
                load_args<G>(arg + o, won);
#pragma unroll
                for (int k = 0; k < G; ++k)
                    if (won[k] == code) acc.v[k] += g.v[k];
            }
        }
        acc.store(dx, a.in(b, ch, h, w));
    }
}

#define MAXPOOL_NHWC(sfx, D)                                                                 \
    extern "C" __global__ void maxpool_nhwc_fwd_##sfx(const D::T* x, D::T* y, u8* arg,        \
                                                      POOL_INTS) {                           \
        PoolArgs a = POOL_ARGS;                                                              \
        maxpool_nhwc_fwd_body<D, 1>(x, y, arg, a);                                           \
    }                                                                                        \
    extern "C" __global__ void maxpool_nhwc_fwd_vec_##sfx(const D::T* x, D::T* y, u8* arg,    \
                                                          POOL_INTS) {                       \
        PoolArgs a = POOL_ARGS;                                                              \
        maxpool_nhwc_fwd_body<D, Vec16<D>::N>(x, y, arg, a);                                 \
    }                                                                                        \
    extern "C" __global__ void maxpool_nhwc_bwd_##sfx(const u8* arg, const D::T* dy, D::T* dx, \
                                                      POOL_INTS) {                           \
        PoolArgs a = POOL_ARGS;                                                              \
        maxpool_nhwc_bwd_body<D, 1>(arg, dy, dx, a);                                         \
    }                                                                                        \
    extern "C" __global__ void maxpool_nhwc_bwd_vec_##sfx(const u8* arg, const D::T* dy,      \
                                                          D::T* dx, POOL_INTS) {             \
        PoolArgs a = POOL_ARGS;                                                              \
        maxpool_nhwc_bwd_body<D, Vec16<D>::N>(arg, dy, dx, a);                               \
    }
INSTANTIATE_STORAGES(MAXPOOL_NHWC)
