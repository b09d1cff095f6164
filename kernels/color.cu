// hsv, color_twist and brightness_contrast on a batch of samples of any sizes (blockIdx.y = sample): one affine
// map per sample in float32, written out term by term in the CPU kernel's order and, with --fmad=false, rounded
// the same way; integer outputs round half away from zero in float32 and saturate, as the CPU's round_saturate.

#include "common.cuh"

#define MODE_MATRIX 0  // RGB: out[c] = in . m[c] + offset (hsv, color_twist)
#define MODE_SCALE 1   // any channels: out = in * scale + offset (brightness_contrast)

struct ColorSample {
  unsigned long long in, out;  // contiguous, interleaved channels
  long long pixels;            // pixels (MODE_MATRIX) or elements (MODE_SCALE)
  int mode;
  float m[9];
  float scale, offset;
};

template <typename InT, typename OutT>
__global__ void color_affine(const ColorSample* samples) {
  const ColorSample s = samples[blockIdx.y];
  const InT* in = (const InT*)s.in;
  OutT* out = (OutT*)s.out;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < s.pixels;
       i += (long long)gridDim.x * blockDim.x) {
    if (s.mode == MODE_SCALE) {
      out[i] = round_store<OutT>(__fadd_rn(__fmul_rn((float)in[i], s.scale), s.offset));
      continue;
    }
    float r = (float)in[3 * i], g = (float)in[3 * i + 1], b = (float)in[3 * i + 2];
    for (int c = 0; c < 3; c++) {
      float v = __fadd_rn(__fadd_rn(__fadd_rn(__fmul_rn(r, s.m[3 * c]), __fmul_rn(g, s.m[3 * c + 1])),
                                    __fmul_rn(b, s.m[3 * c + 2])), s.offset);
      out[3 * i + c] = round_store<OutT>(v);
    }
  }
}
