// SGD with momentum, PyTorch's form, as cnnbench_kernels::eltwise::
// sgd_update: v = momentum*v + g; w -= lr*v. The program is compiled with
// --fmad=false, so the products are rounded before the sums exactly as the
// CPU (Rust never contracts into FMA) does.

extern "C" __global__ void sgd_update_f32(float* w, const float* g, float* v, u64 n,
                                          float lr, float momentum) {
    GRID_STRIDE(i, n) {
        float vi = momentum * v[i] + g[i];
        v[i] = vi;
        w[i] -= lr * vi;
    }
}
