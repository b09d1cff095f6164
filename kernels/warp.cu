// rotate and warp_affine on a batch of HW / HWC samples of any sizes (blockIdx.z = sample), the CPU kernel's
// (cpu/warp_ops.py, DALI's CPU warp) float32 steps one for one: the row's first pixel centre is mapped through the
// sample's float32 2x3 matrix (output -> input, pixel centres at +0.5), then d/dx is added once per pixel, the row
// start moving on by 256 * d/dx every 256 pixels. Nearest takes the pixel at floor(position); linear blends as
// DALI's sampler does; cubic (A = -0.75) weighs rows first. Outside the input: the fill value the host converted,
// or the edge pixel repeated. Results are stored rounded half away from zero and saturated (integers).

#include "common.cuh"

#define INTERP_NN 0
#define INTERP_LINEAR 1
#define INTERP_CUBIC 2
#define WARP_TILE 256

struct WarpSample {
  unsigned long long in, out;  // contiguous, interleaved channels
  int in_h, in_w, out_h, out_w, channels;
  int interp, use_fill;
  float fill;  // nearest: in the output type; otherwise in the output type, then the input's (as a float)
  float m[6];
};

// C's (int)floorf on x86: NaN and values outside int range give INT_MIN (the CPU kernel's floor_int)
__device__ __forceinline__ int floor_int(float v) {
  float f = floorf(v);
  return (f >= -2147483648.f && f < 2147483648.f) ? (int)f : (int)(-2147483647 - 1);
}

// DALI's ConvertSat from float: integers round half away from zero (in double, exactly) and saturate, NaN gives 0
template <typename T> __device__ __forceinline__ T warp_store(float v);
template <> __device__ __forceinline__ float warp_store<float>(float v) { return v; }
#define WARP_STORE_INT(T, LO, HI)                                               \
  template <> __device__ __forceinline__ T warp_store<T>(float v) {             \
    if (v != v) return (T)0;                                                    \
    double d = (double)v;                                                       \
    double r = d >= 0 ? floor(d + 0.5) : ceil(d - 0.5);                         \
    if (r <= (double)(LO)) return (T)(LO);                                      \
    if (r >= (double)(HI)) return (T)(HI);                                      \
    return (T)r;                                                                \
  }
WARP_STORE_INT(unsigned char, 0, 255)
WARP_STORE_INT(signed char, -128, 127)
WARP_STORE_INT(unsigned short, 0, 65535)
WARP_STORE_INT(short, -32768, 32767)
WARP_STORE_INT(int, -2147483647 - 1, 2147483647)
#undef WARP_STORE_INT

template <typename InT>
__device__ __forceinline__ float tap(const WarpSample& s, const InT* in, long long y, long long x, int c) {
  if (x < 0 || y < 0 || x >= s.in_w || y >= s.in_h) {
    if (s.use_fill) return s.fill;
    x = x < 0 ? 0 : (x >= s.in_w ? s.in_w - 1 : x);
    y = y < 0 ? 0 : (y >= s.in_h ? s.in_h - 1 : y);
  }
  return (float)in[((size_t)y * s.in_w + x) * s.channels + c];
}

__device__ __forceinline__ void cubic_weights(float t, float* w) {
  const float A = -0.75f;
  float t1 = __fadd_rn(t, 1.f), u = __fsub_rn(1.f, t);
  w[0] = __fsub_rn(__fmul_rn(__fadd_rn(__fmul_rn(__fsub_rn(__fmul_rn(A, t1), 5.f * A), t1), 8.f * A), t1), 4.f * A);
  w[1] = __fadd_rn(__fmul_rn(__fmul_rn(__fsub_rn(__fmul_rn(A + 2.f, t), A + 3.f), t), t), 1.f);
  w[2] = __fadd_rn(__fmul_rn(__fmul_rn(__fsub_rn(__fmul_rn(A + 2.f, u), A + 3.f), u), u), 1.f);
  w[3] = __fsub_rn(__fsub_rn(__fsub_rn(1.f, w[0]), w[1]), w[2]);
}

// the input position of output pixel (ox, oy) as the CPU accumulates it along the row
__device__ __forceinline__ float position(const float* r, int ox, int oy) {
  float s = __fadd_rn(__fadd_rn(r[2], __fmul_rn(r[0], 0.5f)), __fmul_rn(r[1], __fadd_rn((float)oy, 0.5f)));
  float tile = __fmul_rn((float)WARP_TILE, r[0]);
  for (int t = 0; t < ox / WARP_TILE; t++) s = __fadd_rn(s, tile);
  for (int i = 0; i < ox % WARP_TILE; i++) s = __fadd_rn(s, r[0]);
  return s;
}

template <typename InT, typename OutT>
__global__ void warp_affine(const WarpSample* samples) {
  const WarpSample s = samples[blockIdx.z];
  int ox = blockIdx.x * blockDim.x + threadIdx.x;
  int oy = blockIdx.y * blockDim.y + threadIdx.y;
  if (ox >= s.out_w || oy >= s.out_h) return;
  const InT* in = (const InT*)s.in;
  OutT* out = (OutT*)s.out + ((size_t)oy * s.out_w + ox) * s.channels;
  float fx = position(s.m, ox, oy), fy = position(s.m + 3, ox, oy);
  if (s.interp == INTERP_NN) {
    long long x = floor_int(fx), y = floor_int(fy);
    for (int c = 0; c < s.channels; c++) out[c] = warp_store<OutT>(tap(s, in, y, x, c));
    return;
  }
  fx = __fsub_rn(fx, 0.5f);
  fy = __fsub_rn(fy, 0.5f);
  long long x = floor_int(fx), y = floor_int(fy);
  float qx = __fsub_rn(fx, (float)x), qy = __fsub_rn(fy, (float)y);
  if (s.interp == INTERP_LINEAR) {
    float px = __fsub_rn(1.f, qx);
    for (int c = 0; c < s.channels; c++) {
      float top = __fadd_rn(__fmul_rn(tap(s, in, y, x, c), px), __fmul_rn(tap(s, in, y, x + 1, c), qx));
      float bottom = __fadd_rn(__fmul_rn(tap(s, in, y + 1, x, c), px), __fmul_rn(tap(s, in, y + 1, x + 1, c), qx));
      out[c] = warp_store<OutT>(__fadd_rn(top, __fmul_rn(__fsub_rn(bottom, top), qy)));
    }
    return;
  }
  float wx[4], wy[4];
  cubic_weights(qx, wx);
  cubic_weights(qy, wy);
  for (int c = 0; c < s.channels; c++) {
    float acc = 0.f;
    for (int j = 0; j < 4; j++) {
      float row = 0.f;
      for (int k = 0; k < 4; k++) row = __fadd_rn(row, __fmul_rn(tap(s, in, y - 1 + j, x - 1 + k, c), wx[k]));
      acc = __fadd_rn(acc, __fmul_rn(row, wy[j]));
    }
    out[c] = warp_store<OutT>(acc);
  }
}
