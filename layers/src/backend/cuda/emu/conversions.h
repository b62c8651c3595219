// prelude.cuh's device conversions on the host: emu.rs puts these in their
// place. F16 goes through _Float16 and BF16 rounds in integer arithmetic
// (prelude.cuh's own pre-sm_80 path), both to nearest even, as on the
// device.
inline float f16_to_f32(u16 h) {
    _Float16 v;
    std::memcpy(&v, &h, 2);
    return (float)v;
}
inline u16 f32_to_f16(float f) {
    _Float16 v = (_Float16)f;
    u16 h;
    std::memcpy(&h, &v, 2);
    return h;
}
inline float bf16_to_f32(u16 b) { return __uint_as_float(((u32)b) << 16); }
inline u16 f32_to_bf16(float f) {
    u32 u = __float_as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (u16)((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (u16)(u >> 16);
}

