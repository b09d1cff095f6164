// rotate and warp_affine on a batch of HW / HWC samples of any sizes (blockIdx.z = sample). Each output pixel
// centre maps through the sample's 2x3 matrix (output -> input, pixel centres at integers, as handed to OpenCV's
// warpAffine by the CPU kernel) in float32; nearest rounds half to even, linear and cubic (OpenCV's A = -0.75)
// weigh the neighbours in float32. Outside the input: fill_value, or the border pixel repeated.

#include "common.cuh"

#define INTERP_NN 0
#define INTERP_LINEAR 1
#define INTERP_CUBIC 2

struct WarpSample {
  unsigned long long in, out;  // contiguous, interleaved channels
  int in_h, in_w, out_h, out_w, channels;
  int interp, use_fill;
  float fill;
  float m[6];
};

template <typename InT>
__device__ __forceinline__ float tap(const WarpSample& s, const InT* in, int y, int x, int c) {
  if (x < 0 || y < 0 || x >= s.in_w || y >= s.in_h) {
    if (s.use_fill) return s.fill;
    x = min(max(x, 0), s.in_w - 1);
    y = min(max(y, 0), s.in_h - 1);
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

template <typename InT, typename OutT>
__global__ void warp_affine(const WarpSample* samples) {
  const WarpSample s = samples[blockIdx.z];
  int ox = blockIdx.x * blockDim.x + threadIdx.x;
  int oy = blockIdx.y * blockDim.y + threadIdx.y;
  if (ox >= s.out_w || oy >= s.out_h) return;
  const InT* in = (const InT*)s.in;
  OutT* out = (OutT*)s.out + ((size_t)oy * s.out_w + ox) * s.channels;
  // m0 * x + (m1 * y + m2): the order that agrees best with OpenCV 5 (its nearest ties then match but for ~1e-6)
  float fx = __fadd_rn(__fmul_rn(s.m[0], (float)ox), __fadd_rn(__fmul_rn(s.m[1], (float)oy), s.m[2]));
  float fy = __fadd_rn(__fmul_rn(s.m[3], (float)ox), __fadd_rn(__fmul_rn(s.m[4], (float)oy), s.m[5]));
  if (s.interp == INTERP_NN) {
    int x = (int)rintf(fx), y = (int)rintf(fy);
    for (int c = 0; c < s.channels; c++) out[c] = round_store<OutT>(tap(s, in, y, x, c));
    return;
  }
  float x0 = floorf(fx), y0 = floorf(fy);
  float ax = __fsub_rn(fx, x0), ay = __fsub_rn(fy, y0);
  int x = (int)x0, y = (int)y0;
  if (s.interp == INTERP_LINEAR) {
    float bx = __fsub_rn(1.f, ax), by = __fsub_rn(1.f, ay);
    for (int c = 0; c < s.channels; c++) {
      float top = __fadd_rn(__fmul_rn(tap(s, in, y, x, c), bx), __fmul_rn(tap(s, in, y, x + 1, c), ax));
      float bottom = __fadd_rn(__fmul_rn(tap(s, in, y + 1, x, c), bx), __fmul_rn(tap(s, in, y + 1, x + 1, c), ax));
      out[c] = round_store<OutT>(__fadd_rn(__fmul_rn(top, by), __fmul_rn(bottom, ay)));
    }
    return;
  }
  float wx[4], wy[4];
  cubic_weights(ax, wx);
  cubic_weights(ay, wy);
  for (int c = 0; c < s.channels; c++) {
    float acc = 0.f;
    for (int j = 0; j < 4; j++) {
      float row = 0.f;
      for (int k = 0; k < 4; k++) row = __fadd_rn(row, __fmul_rn(tap(s, in, y - 1 + j, x - 1 + k, c), wx[k]));
      acc = __fadd_rn(acc, __fmul_rn(row, wy[j]));
    }
    out[c] = round_store<OutT>(acc);
  }
}
