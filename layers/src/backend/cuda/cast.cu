// Conversions between f32 master copies and half-precision storage (the
// weights a mixed-precision step computes with, and its gradients back).
// Rounding is to nearest even, as half's from_f32.

extern "C" __global__ void cast_f32_to_f16(const float* x, u16* y, u64 n) {
    GRID_STRIDE(i, n) { y[i] = f32_to_f16(x[i]); }
}

extern "C" __global__ void cast_f32_to_bf16(const float* x, u16* y, u64 n) {
    GRID_STRIDE(i, n) { y[i] = f32_to_bf16(x[i]); }
}

extern "C" __global__ void cast_f16_to_f32(const u16* x, float* y, u64 n) {
    GRID_STRIDE(i, n) { y[i] = f16_to_f32(x[i]); }
}

extern "C" __global__ void cast_bf16_to_f32(const u16* x, float* y, u64 n) {
    GRID_STRIDE(i, n) { y[i] = bf16_to_f32(x[i]); }
}
