// color_space_conversion of uint8 images on a batch of samples of any sizes (blockIdx.y = sample), one thread per
// pixel, as the CPU kernel (headrace_kernels.cpu.color_ops, ColorConversion) does it: the same float32 coefficients
// from the host record, each product and sum rounded alone (__fmul_rn / __fadd_rn, and --fmad=false) in the CPU's
// order, and common.cuh's round_store (half away from zero, saturated) into uint8.

#include "common.cuh"

#define CSC_AFFINE 0  // u[j] = in[src[j]] - pre[j] (0 past the input's channels);
                      // v[c] = ((m[c][0] u0 + m[c][1] u1) + m[c][2] u2) + bias[c]; out[k] = round(v[dst[k]])
#define CSC_FIXED 1   // out = (w0 in0 + w1 in1 + w2 in2 + 2^14) >> 15 (OpenCV's RGB -> gray)
#define CSC_COPY 2    // out[k] = in[dst[k]]

struct CscSample {  // mirrored by headrace_kernels.gpu.color_ops.CSC_RECORD (136 bytes)
  unsigned long long in, out;  // contiguous pixels, channels interleaved
  long long pixels;
  int mode, in_channels, out_channels;
  int src[3], dst[3];
  float pre[3], m[9], bias[3];
  int weights[3];
};

extern "C" __global__ void color_space_convert(const CscSample* samples) {
  const CscSample s = samples[blockIdx.y];
  const unsigned char* in = (const unsigned char*)s.in;
  unsigned char* out = (unsigned char*)s.out;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < s.pixels;
       i += (long long)gridDim.x * blockDim.x) {
    const unsigned char* p = in + i * s.in_channels;
    unsigned char* q = out + i * s.out_channels;
    if (s.mode == CSC_COPY) {
      for (int k = 0; k < s.out_channels; k++) q[k] = p[s.dst[k]];
    } else if (s.mode == CSC_FIXED) {
      int v = s.weights[0] * (int)p[0] + s.weights[1] * (int)p[1] + s.weights[2] * (int)p[2] + (1 << 14);
      q[0] = (unsigned char)(v >> 15);
    } else {
      float u[3];
      for (int j = 0; j < 3; j++) u[j] = j < s.in_channels ? __fsub_rn((float)p[s.src[j]], s.pre[j]) : 0.0f;
      float v[3];
      for (int c = 0; c < 3; c++) {
        v[c] = __fadd_rn(__fadd_rn(__fadd_rn(__fmul_rn(s.m[3 * c], u[0]), __fmul_rn(s.m[3 * c + 1], u[1])),
                                   __fmul_rn(s.m[3 * c + 2], u[2])), s.bias[c]);
      }
      for (int k = 0; k < s.out_channels; k++) q[k] = round_store<unsigned char>(v[s.dst[k]]);
    }
  }
}
