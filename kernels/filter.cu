// gaussian_blur on a batch of HW / HWC samples of any sizes (blockIdx.z = sample): a row pass into a float32
// buffer, then a column pass into the output, both over reflect-101 borders (repeated for windows larger than the
// image), as OpenCV's sepFilter2D on float32 data, which the CPU kernel uses. Every channel is filtered on its own.
// Compiled with --fmad=false: float32 products and sums round one at a time, as on the CPU.

struct BlurSample {
  unsigned long long in;   // InT, contiguous HW(C)
  unsigned long long out;  // OutT, contiguous HW(C)
  unsigned long long tmp;  // float, the row pass's result (h x w*channels)
  int h, w, channels;
  int window_y, window_x;  // odd window sizes
  int weights_y, weights_x;  // offsets of the two windows in the weights array
};

__device__ __forceinline__ int reflect101(int p, int len) {
  if (len == 1) return 0;
  while ((unsigned)p >= (unsigned)len) p = p < 0 ? -p : 2 * len - 2 - p;
  return p;
}

// Rounding as saturate_cast on the CPU: integers round half away from zero (in float64) and saturate.
template <typename T> __device__ __forceinline__ T saturate_store(float v);
template <> __device__ __forceinline__ float saturate_store<float>(float v) { return v; }
#define SATURATE_INT(T, LO, HI)                                                    \
  template <> __device__ __forceinline__ T saturate_store<T>(float f) {            \
    double v = (double)f;                                                          \
    if (v != v) return (T)0;                                                       \
    v = v >= 0.0 ? floor(v + 0.5) : ceil(v - 0.5);                                 \
    if (v <= (double)(LO)) return (T)(LO);                                         \
    if (v >= (double)(HI)) return (T)(HI);                                         \
    return (T)v;                                                                   \
  }
SATURATE_INT(unsigned char, 0, 255)
SATURATE_INT(signed char, -128, 127)
SATURATE_INT(unsigned short, 0, 65535)
SATURATE_INT(short, -32768, 32767)
SATURATE_INT(int, -2147483647 - 1, 2147483647)

template <typename InT>
__global__ void blur_rows(const BlurSample* samples, const float* weights) {
  const BlurSample s = samples[blockIdx.z];
  int e = blockIdx.x * blockDim.x + threadIdx.x;  // element in the row: x * channels + c
  int y = blockIdx.y * blockDim.y + threadIdx.y;
  int row = s.w * s.channels;
  if (e >= row || y >= s.h) return;
  int x = e / s.channels, c = e - x * s.channels;
  const InT* in = (const InT*)s.in + (size_t)y * row + c;
  const float* k = weights + s.weights_x;
  int radius = s.window_x / 2;
  float acc = 0.f;
  for (int j = 0; j < s.window_x; j++) {
    int sx = reflect101(x + j - radius, s.w);
    acc = __fadd_rn(acc, __fmul_rn((float)in[(size_t)sx * s.channels], k[j]));
  }
  ((float*)s.tmp)[(size_t)y * row + e] = acc;
}

template <typename OutT>
__global__ void blur_columns(const BlurSample* samples, const float* weights) {
  const BlurSample s = samples[blockIdx.z];
  int e = blockIdx.x * blockDim.x + threadIdx.x;
  int y = blockIdx.y * blockDim.y + threadIdx.y;
  int row = s.w * s.channels;
  if (e >= row || y >= s.h) return;
  const float* tmp = (const float*)s.tmp + e;
  const float* k = weights + s.weights_y;
  int radius = s.window_y / 2;
  float acc = 0.f;
  for (int j = 0; j < s.window_y; j++) {
    int sy = reflect101(y + j - radius, s.h);
    acc = __fadd_rn(acc, __fmul_rn(tmp[(size_t)sy * row], k[j]));
  }
  ((OutT*)s.out)[(size_t)y * row + e] = saturate_store<OutT>(acc);
}
