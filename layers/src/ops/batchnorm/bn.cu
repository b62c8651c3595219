// Batch normalisation in training mode on cnnbench's own kernels
// (`--own-bn`), in every storage and in NHWC and NCHW, with what follows it
// fused where the executor's fusion pass hands it over (`--fuse-bn`): the
// ReLU (mode BN_RELU), or the residual add and its ReLU (BN_ADD_RELU,
// y = relu(bn(x) + z)). cuDNN fuses only f16 NHWC, and on an H200 its fused
// batch norm + add + ReLU took 1.20 ms backward at 256x56x56 where its plain
// one took 0.55; this one moves, per element and in units of the tensor:
//   forward:  x (statistics), then x (and z) read and y written;
//   backward: dy (and dy2), x (and y, and dz written) for the gradient
//             sums, then dy or dz, and x, read and dx written.
// The ReLU's mask is x * scale + shift > 0 (what the forward's output was
// made of), so it costs no read; the add's needs y (or z).
//
// The tensor is viewed as [outer][c][inner]: NHWC is outer = N*H*W,
// inner = 1; NCHW is outer = N, inner = H*W. Every statistic is in float.
// Per channel, in three launches each way:
//   1. bn_stats / bn_grads: each block sums a share of the channel's
//      elements into a partial (sum, sum of squares; or sum of g and of
//      g*(x - mean)); partials land in part[2][groups][c], in a fixed
//      order, so the result is the same from run to run (no atomics).
//   2. bn_finalize_fwd / bn_finalize_bwd: one thread per channel (with
//      8 lanes) adds the partials up and derives the coefficients.
//   3. bn_fwd / bn_bwd: one elementwise pass with them.
// The forward sums x - k, k the channel's first element, so that the
// variance E[(x-k)^2] - E[x-k]^2 does not cancel when the mean is large
// against the deviation.
//
// Per channel, st holds 7 rows of c floats: mean, invstd (the saved
// statistics), scale = gamma * invstd, shift = beta - mean * scale (the
// forward's), and the backward's dx = a * g + b * x + c0.

#define BN_THREADS 256
// Channels per finalize block, and the lanes that share each.
#define BN_FIN_CH 32
#define BN_FIN_LANES (BN_THREADS / BN_FIN_CH)

#define BN_PLAIN 0
#define BN_RELU 1
#define BN_ADD_RELU 2

#define ST_MEAN 0
#define ST_INVSTD 1
#define ST_SCALE 2
#define ST_SHIFT 3
#define ST_A 4
#define ST_B 5
#define ST_C0 6

// N elements of storage D as floats: a 16-byte vector (index i in vectors)
// or one element (N = 1, index i in elements).
template <class D, int N>
struct Pk {
    float v[N];
    __device__ __forceinline__ void load(const typename D::T* p, u64 i) {
        if constexpr (N == 1) {
            v[0] = D::load(p, i);
        } else {
            Vec16<D> q = Vec16<D>::load(p, i);
#pragma unroll
            for (int k = 0; k < N; ++k) v[k] = q.get(k);
        }
    }
    __device__ __forceinline__ void store(typename D::T* p, u64 i) const {
        if constexpr (N == 1) {
            D::store(p, i, v[0]);
        } else {
            Vec16<D> q;
#pragma unroll
            for (int k = 0; k < N; ++k) q.set(k, v[k]);
            q.store(p, i);
        }
    }
};

// The statistics' sums: a += x - k, b += (x - k)^2 per slot.
template <class D, int N>
struct StatsOp {
    const typename D::T* x;
    u32 inner;
    float k[N];
    // Slot i holds channel ch0 + i * step for the whole loop.
    __device__ __forceinline__ void init(u32 ch0, u32 step) {
#pragma unroll
        for (int i = 0; i < N; ++i) k[i] = D::load(x, (u64)(ch0 + i * step) * inner);
    }
    __device__ __forceinline__ void add(const Pk<D, N>& p, float* a, float* b) const {
#pragma unroll
        for (int i = 0; i < N; ++i) {
            float d = p.v[i] - k[i];
            a[i] += d;
            b[i] += d * d;
        }
    }
    __device__ __forceinline__ void visit(u64 v, float* a, float* b) const {
        Pk<D, N> p;
        p.load(x, v);
        add(p, a, b);
    }
    // Two vectors, both loaded before either is added.
    __device__ __forceinline__ void visit2(u64 v, u64 w, float* a, float* b) const {
        Pk<D, N> p, q;
        p.load(x, v);
        q.load(x, w);
        add(p, a, b);
        add(q, a, b);
    }
};

// The gradient sums: a += g, b += g * (x - mean), g the output gradient
// through the fused ReLU's mask; with the add, g is also written to dz
// (what the add hands on to z). With the add, the output gradient may
// come in two parts (dy2 not null: the block's output read by the next
// block's convolution and by its add), added here instead of in a pass
// of their own.
template <class D, int N, int MODE>
struct GradsOp {
    const typename D::T *x, *dy, *dy2, *y;
    typename D::T* dz;
    const float* st;
    u32 c;
    float mean[N], scale[N], shift[N];
    __device__ __forceinline__ void init(u32 ch0, u32 step) {
#pragma unroll
        for (int i = 0; i < N; ++i) {
            u32 ch = ch0 + i * step;
            mean[i] = st[ST_MEAN * c + ch];
            scale[i] = st[ST_SCALE * c + ch];
            shift[i] = st[ST_SHIFT * c + ch];
        }
    }
    // One vector's loads (y only for the add's mask).
    struct In {
        Pk<D, N> x, g, y;
    };
    __device__ __forceinline__ void load(u64 v, In& in) const {
        in.x.load(x, v);
        in.g.load(dy, v);
        if constexpr (MODE == BN_ADD_RELU) {
            in.y.load(y, v);
            if (dy2) {
                Pk<D, N> g2;
                g2.load(dy2, v);
#pragma unroll
                for (int i = 0; i < N; ++i) in.g.v[i] += g2.v[i];
            }
        }
    }
    __device__ __forceinline__ void visit(u64 v, float* a, float* b) const {
        In in;
        load(v, in);
        add(v, in, a, b);
    }
    // Two vectors, all their loads issued before the first store of dz.
    __device__ __forceinline__ void visit2(u64 v, u64 w, float* a, float* b) const {
        In p, q;
        load(v, p);
        load(w, q);
        add(v, p, a, b);
        add(w, q, a, b);
    }
    __device__ __forceinline__ void add(u64 v, In& in, float* a, float* b) const {
        Pk<D, N>&xv = in.x, &g = in.g;
        if constexpr (MODE == BN_ADD_RELU) {
#pragma unroll
            for (int i = 0; i < N; ++i) g.v[i] = in.y.v[i] > 0.0f ? g.v[i] : 0.0f;
            g.store(dz, v);
        }
#pragma unroll
        for (int i = 0; i < N; ++i) {
            float gi = g.v[i];
            if constexpr (MODE == BN_RELU) {
                gi = fmaf(xv.v[i], scale[i], shift[i]) > 0.0f ? gi : 0.0f;
            }
            a[i] += gi;
            b[i] += gi * (xv.v[i] - mean[i]);
        }
    }
};

// NHWC: blockIdx.x = group * tiles + tile. A tile is `ct` channel vectors
// (c / N of them in all); its threads are ct columns by 256 / ct rows, each
// thread visiting every (groups * rows per block)-th row from its own.
// Writes the block's partials of its channels.
// `sh` is the kernel's shared array of 2 * BN_THREADS * N floats
// (declared once per kernel: a grads kernel instantiates this per mode, and
// arrays declared here would not share memory, 48 KiB in f16).
template <class D, int N, class Op>
__device__ __forceinline__ void reduce_nhwc(Op& op, u32 rows, u32 c, u32 ct, u32 groups,
                                            float* part, float* sh) {
    float* sq = sh + BN_THREADS * N;
    u32 cvs = c / N, tiles = (cvs + ct - 1) / ct;
    u32 tile = blockIdx.x % tiles, grp = blockIdx.x / tiles;
    u32 col = threadIdx.x % ct, lane = threadIdx.x / ct, rl = BN_THREADS / ct;
    u32 cv = tile * ct + col;
    float a[N], b[N];
#pragma unroll
    for (int i = 0; i < N; ++i) a[i] = b[i] = 0.0f;
    if (lane < rl && cv < cvs) {
        op.init(cv * N, 1);
        // Two rows at a time, all their loads before any store (with the
        // add's mask each visit stores dz, which a row's loads could not
        // pass). On an H200 this left the BN + add + ReLU backward at
        // 1.22 ms at 256x56x56x256 f16 (1.003x the ResNet-50 step): its
        // time also holds the executor's sum of its two gradient parts,
        // which --own-bn=parts removes. Kept: it does no harm and no run
        // measured one row at a time faster.
        u32 step = groups * rl, r = grp * rl + lane;
        for (; r + step < rows; r += 2 * step)
            op.visit2((u64)r * cvs + cv, (u64)(r + step) * cvs + cv, a, b);
        if (r < rows) op.visit((u64)r * cvs + cv, a, b);
    }
#pragma unroll
    for (int i = 0; i < N; ++i) {
        sh[threadIdx.x * N + i] = a[i];
        sq[threadIdx.x * N + i] = b[i];
    }
    __syncthreads();
    // One thread per channel of the tile adds its rows' sums, in order.
    u32 t = threadIdx.x;
    if (t < ct * N && tile * ct + t / N < cvs) {
        u32 cl = t / N, i = t % N;
        float s = 0.0f, q = 0.0f;
        for (u32 l = 0; l < rl; ++l) {
            s += sh[(l * ct + cl) * N + i];
            q += sq[(l * ct + cl) * N + i];
        }
        u32 ch = (tile * ct + cl) * N + i;
        part[grp * c + ch] = s;
        part[(groups + grp) * c + ch] = q;
    }
}

// NCHW: blockIdx.x = group * c + channel; the block's threads stride over
// the channel's n planes of ivs vectors (every slot is the same channel).
// `sh`: the kernel's shared array of 2 * BN_THREADS floats (see
// reduce_nhwc).
template <class D, int N, class Op>
__device__ __forceinline__ void reduce_nchw(Op& op, u32 n, u32 c, u32 ivs, u32 groups,
                                            float* part, float* sh) {
    float* sq = sh + BN_THREADS;
    u32 ch = blockIdx.x % c, grp = blockIdx.x / c;
    float a[N], b[N];
#pragma unroll
    for (int i = 0; i < N; ++i) a[i] = b[i] = 0.0f;
    op.init(ch, 0);
    u32 total = n * ivs;
    for (u32 k = grp * BN_THREADS + threadIdx.x; k < total; k += groups * BN_THREADS) {
        u32 p = k / ivs, s = k - p * ivs;
        op.visit(((u64)p * c + ch) * ivs + s, a, b);
    }
    float s = 0.0f, q = 0.0f;
#pragma unroll
    for (int i = 0; i < N; ++i) {
        s += a[i];
        q += b[i];
    }
    u32 t = threadIdx.x;
    sh[t] = s;
    sq[t] = q;
    __syncthreads();
    for (u32 w = BN_THREADS / 2; w > 0; w >>= 1) {
        if (t < w) {
            sh[t] += sh[t + w];
            sq[t] += sq[t + w];
        }
        __syncthreads();
    }
    if (t == 0) {
        part[grp * c + ch] = sh[0];
        part[(groups + grp) * c + ch] = sq[0];
    }
}

// A reduction over one layout: its kernel's shared array, then
// reduce_nhwc or reduce_nchw (`per` is ct or ivs, `outer` rows or n).
template <class D, int N, bool NHWC, class Op>
__device__ __forceinline__ void reduce(Op& op, u32 outer, u32 c, u32 per, u32 groups, float* part,
                                       float* sh) {
    if constexpr (NHWC) {
        reduce_nhwc<D, N>(op, outer, c, per, groups, part, sh);
    } else {
        reduce_nchw<D, N>(op, outer, c, per, groups, part, sh);
    }
}

template <class D, int N, bool NHWC>
__device__ __forceinline__ void stats(const typename D::T* x, float* part, u32 outer, u32 c,
                                      u32 per, u32 groups) {
    __shared__ float sh[2 * BN_THREADS * (NHWC ? N : 1)];
    StatsOp<D, N> op{x, NHWC ? 1u : per * N};
    reduce<D, N, NHWC>(op, outer, c, per, groups, part, sh);
}

// The gradient sums of one mode into `part`, `sh` the caller's shared
// array.
template <class D, int N, bool NHWC, int MODE>
__device__ __forceinline__ void grads_mode(const typename D::T* x, const typename D::T* dy,
                                           const typename D::T* dy2, const typename D::T* y,
                                           typename D::T* dz, const float* st, float* part,
                                           u32 outer, u32 c, u32 per, u32 groups, float* sh) {
    GradsOp<D, N, MODE> op{x, dy, dy2, y, dz, st, c};
    reduce<D, N, NHWC>(op, outer, c, per, groups, part, sh);
}

template <class D, int N, bool NHWC>
__device__ __forceinline__ void grads(const typename D::T* x, const typename D::T* dy,
                                      const typename D::T* dy2, const typename D::T* y,
                                      typename D::T* dz, const float* st, float* part, u32 outer,
                                      u32 c, u32 per, u32 groups, int mode) {
    // One array for the three instances (each its own would not share).
    // Each mode through a template of its own: NVRTC on the H200 refused
    // a generic lambda here as a host function.
    __shared__ float sh[2 * BN_THREADS * (NHWC ? N : 1)];
    if (mode == BN_RELU)
        grads_mode<D, N, NHWC, BN_RELU>(x, dy, dy2, y, dz, st, part, outer, c, per, groups, sh);
    else if (mode == BN_ADD_RELU)
        grads_mode<D, N, NHWC, BN_ADD_RELU>(x, dy, dy2, y, dz, st, part, outer, c, per, groups,
                                            sh);
    else
        grads_mode<D, N, NHWC, BN_PLAIN>(x, dy, dy2, y, dz, st, part, outer, c, per, groups, sh);
}

// The channel of slot 0 of vector v: NHWC rows of `per` vectors (the
// slots are consecutive channels), NCHW planes of `per` vectors (every
// slot the same channel).
template <bool NHWC>
__device__ __forceinline__ u32 channel_of(u32 v, u32 c, u32 per, u32 n_per_vec) {
    if constexpr (NHWC) {
        return (v % per) * n_per_vec;
    } else {
        return (v / per) % c;
    }
}

// Row `row` of st for the N slots from channel ch0: in NHWC N consecutive
// floats, in 16-byte loads where N is a whole number of them (c is then
// a multiple of 4, so every row starts 16-byte aligned); in NCHW one float
// for every slot.
template <int N, bool NHWC>
__device__ __forceinline__ void st_row(const float* st, int row, u32 c, u32 ch0, float* out) {
    const float* p = st + (u64)row * c + ch0;
    if constexpr (NHWC && N % 4 == 0) {
        struct alignas(16) F4 {
            float v[4];
        };
#pragma unroll
        for (int k = 0; k < N / 4; ++k) {
            F4 q = ((const F4*)p)[k];
#pragma unroll
            for (int j = 0; j < 4; ++j) out[4 * k + j] = q.v[j];
        }
    } else if constexpr (NHWC) {
#pragma unroll
        for (int k = 0; k < N; ++k) out[k] = p[k];
    } else {
        float v = p[0];
#pragma unroll
        for (int k = 0; k < N; ++k) out[k] = v;
    }
}

// Slots per run of coefficients the elementwise passes hold at once: a
// 16-byte load's 4 in NHWC vectors (holding a whole vector's 8 rows of
// five coefficients took 64 registers a thread, half the SM's threads).
template <int N, bool NHWC>
struct Chunk {
    static constexpr int Q = (NHWC && N % 4 == 0) ? 4 : N;
};

// y = [relu](x * scale + shift [+ z]) over nv vectors (or elements).
template <class D, int N, bool NHWC>
__device__ __forceinline__ void fwd_body(const typename D::T* x, const typename D::T* z,
                                         typename D::T* y, const float* st, u32 nv, u32 c,
                                         u32 per, int relu_on) {
    constexpr int Q = Chunk<N, NHWC>::Q;
    GRID_STRIDE(v, nv) {
        u32 ch0 = channel_of<NHWC>((u32)v, c, per, N);
        Pk<D, N> xv, zv;
        xv.load(x, v);
        if (z) zv.load(z, v);
#pragma unroll
        for (int q = 0; q < N; q += Q) {
            u32 ch = NHWC ? ch0 + q : ch0;
            float sc[Q], sh[Q];
            st_row<Q, NHWC>(st, ST_SCALE, c, ch, sc);
            st_row<Q, NHWC>(st, ST_SHIFT, c, ch, sh);
#pragma unroll
            for (int i = 0; i < Q; ++i) {
                float o = fmaf(xv.v[q + i], sc[i], sh[i]);
                if (z) o += zv.v[q + i];
                xv.v[q + i] = relu_on ? relu(o) : o;
            }
        }
        xv.store(y, v);
    }
}

// dx = a * g + b * x + c0, g read from gsrc (dz with the add: already
// masked) and masked here with the fused ReLU alone.
template <class D, int N, bool NHWC>
__device__ __forceinline__ void bwd_body(const typename D::T* x, const typename D::T* gsrc,
                                         typename D::T* dx, const float* st, u32 nv, u32 c,
                                         u32 per, int relu_mask) {
    constexpr int Q = Chunk<N, NHWC>::Q;
    GRID_STRIDE(v, nv) {
        u32 ch0 = channel_of<NHWC>((u32)v, c, per, N);
        Pk<D, N> xv, g;
        xv.load(x, v);
        g.load(gsrc, v);
#pragma unroll
        for (int q = 0; q < N; q += Q) {
            u32 ch = NHWC ? ch0 + q : ch0;
            float a[Q], b[Q], c0[Q];
            st_row<Q, NHWC>(st, ST_A, c, ch, a);
            st_row<Q, NHWC>(st, ST_B, c, ch, b);
            st_row<Q, NHWC>(st, ST_C0, c, ch, c0);
            if (relu_mask) {
                float sc[Q], sh[Q];
                st_row<Q, NHWC>(st, ST_SCALE, c, ch, sc);
                st_row<Q, NHWC>(st, ST_SHIFT, c, ch, sh);
#pragma unroll
                for (int i = 0; i < Q; ++i)
                    if (!(fmaf(xv.v[q + i], sc[i], sh[i]) > 0.0f)) g.v[q + i] = 0.0f;
            }
#pragma unroll
            for (int i = 0; i < Q; ++i)
                xv.v[q + i] = fmaf(a[i], g.v[q + i], fmaf(b[i], xv.v[q + i], c0[i]));
        }
        xv.store(dx, v);
    }
}

// The partials of channel blockIdx.x * BN_FIN_CH + t % BN_FIN_CH, added
// in order by its lanes, then across them; true in the thread (lane 0)
// that holds the sums.
__device__ __forceinline__ bool finalize_sums(const float* part, u32 groups, u32 c, u32* ch,
                                              float* s, float* q) {
    __shared__ float sh[2][BN_THREADS];
    u32 t = threadIdx.x, col = t % BN_FIN_CH, lane = t / BN_FIN_CH;
    *ch = blockIdx.x * BN_FIN_CH + col;
    float a = 0.0f, b = 0.0f;
    if (*ch < c) {
        for (u32 g = lane; g < groups; g += BN_FIN_LANES) {
            a += part[g * c + *ch];
            b += part[(groups + g) * c + *ch];
        }
    }
    sh[0][t] = a;
    sh[1][t] = b;
    __syncthreads();
    if (lane != 0 || *ch >= c) return false;
    for (u32 l = 1; l < BN_FIN_LANES; ++l) {
        a += sh[0][l * BN_FIN_CH + col];
        b += sh[1][l * BN_FIN_CH + col];
    }
    *s = a;
    *q = b;
    return true;
}

// Mean and inverse deviation from the shifted sums, the running averages
// updated as PyTorch does (unbiased variance, `momentum` on the new
// batch), and the forward's scale and shift.
template <class D>
__device__ __forceinline__ void finalize_fwd_body(const typename D::T* x, const float* part,
                                                  u32 groups, u32 c, u64 inner, float count,
                                                  float eps, float momentum, const float* gamma,
                                                  const float* beta, float* run_mean,
                                                  float* run_var, float* st) {
    u32 ch;
    float s, q;
    if (!finalize_sums(part, groups, c, &ch, &s, &q)) return;
    float k = D::load(x, (u64)ch * inner);
    float md = s / count;
    float var = fmaxf(q / count - md * md, 0.0f);
    float mean = k + md;
    float invstd = 1.0f / sqrtf(var + eps);
    float unbias = count / fmaxf(count - 1.0f, 1.0f);
    run_mean[ch] = (1.0f - momentum) * run_mean[ch] + momentum * mean;
    run_var[ch] = (1.0f - momentum) * run_var[ch] + momentum * var * unbias;
    float scale = gamma[ch] * invstd;
    st[ST_MEAN * c + ch] = mean;
    st[ST_INVSTD * c + ch] = invstd;
    st[ST_SCALE * c + ch] = scale;
    st[ST_SHIFT * c + ch] = beta[ch] - mean * scale;
}

// dbeta = sum g, dgamma = sum g * (x - mean) * invstd (written, not
// added), and the backward's coefficients: with xh = (x - mean) * invstd,
// dx = gamma * invstd * (g - dbeta / M - xh * dgamma / M).
extern "C" __global__ void bn_finalize_bwd(const float* part, u32 groups, u32 c, float count,
                                           const float* gamma, float* st, float* dgamma,
                                           float* dbeta) {
    u32 ch;
    float s, q;
    if (!finalize_sums(part, groups, c, &ch, &s, &q)) return;
    float invstd = st[ST_INVSTD * c + ch], mean = st[ST_MEAN * c + ch];
    dbeta[ch] = s;
    dgamma[ch] = q * invstd;
    float a = gamma[ch] * invstd;
    float b = -a * invstd * invstd * q / count;
    st[ST_A * c + ch] = a;
    st[ST_B * c + ch] = b;
    st[ST_C0 * c + ch] = -b * mean - a * s / count;
}

// Per storage, a vector (_vec: 16-byte loads, c or H*W a whole number of
// vectors, every buffer 16-byte aligned) and an element variant of each
// pass; the modes are run-time arguments of one kernel.
#define BN_LAYOUT(sfx, D, vsfx, N, lay, NHWC)                                                      \
    extern "C" __global__ void bn_stats_##lay##vsfx##_##sfx(const D::T* x, float* part, u32 outer, \
                                                           u32 c, u32 per, u32 groups) {          \
        stats<D, N, NHWC>(x, part, outer, c, per, groups);                                        \
    }                                                                                             \
    extern "C" __global__ void bn_grads_##lay##vsfx##_##sfx(                                      \
        const D::T* __restrict__ x, const D::T* __restrict__ dy, const D::T* __restrict__ dy2,    \
        const D::T* __restrict__ y, D::T* __restrict__ dz, const float* st, float* part,          \
        u32 outer, u32 c, u32 per, u32 groups, int mode) {                                        \
        grads<D, N, NHWC>(x, dy, dy2, y, dz, st, part, outer, c, per, groups, mode);              \
    }                                                                                             \
    extern "C" __global__ void bn_fwd_##lay##vsfx##_##sfx(const D::T* x, const D::T* z, D::T* y,  \
                                                         const float* st, u32 nv, u32 c, u32 per, \
                                                         int relu_on) {                           \
        fwd_body<D, N, NHWC>(x, z, y, st, nv, c, per, relu_on);                                   \
    }                                                                                             \
    extern "C" __global__ void bn_bwd_##lay##vsfx##_##sfx(const D::T* x, const D::T* g, D::T* dx, \
                                                         const float* st, u32 nv, u32 c, u32 per, \
                                                         int relu_mask) {                         \
        bwd_body<D, N, NHWC>(x, g, dx, st, nv, c, per, relu_mask);                                \
    }

#define BN_VARIANT(sfx, D, vsfx, N)                                                               \
    BN_LAYOUT(sfx, D, vsfx, N, nhwc, true)                                                        \
    BN_LAYOUT(sfx, D, vsfx, N, nchw, false)

#define BN(sfx, D)                                                                               \
    BN_VARIANT(sfx, D, _vec, Vec16<D>::N)                                                        \
    BN_VARIANT(sfx, D, , 1)                                                                      \
    extern "C" __global__ void bn_finalize_fwd_##sfx(                                            \
        const D::T* x, const float* part, u32 groups, u32 c, u64 inner, float count, float eps,  \
        float momentum, const float* gamma, const float* beta, float* run_mean, float* run_var,  \
        float* st) {                                                                             \
        finalize_fwd_body<D>(x, part, groups, c, inner, count, eps, momentum, gamma, beta,       \
                             run_mean, run_var, st);                                             \
    }
INSTANTIATE_STORAGES(BN)
