// Device helpers that several of headrace's kernels share. A kernel file takes them with #include "common.cuh";
// headrace_kernels.gpu.runtime.kernel_source pastes this text in its place before NVRTC compiles the file.

#ifndef HEADRACE_COMMON_CUH
#define HEADRACE_COMMON_CUH

typedef unsigned short half_bits;  // a float16 element (numpy's float16), as its bits

// float -> IEEE half, round to nearest even (as numpy's astype(float16)).
__device__ __forceinline__ half_bits float_to_half(float f) {
  unsigned int x = __float_as_uint(f);
  unsigned int sign = (x >> 16) & 0x8000u;
  unsigned int absx = x & 0x7fffffffu;
  if (absx >= 0x7f800000u) return sign | 0x7c00u | (absx > 0x7f800000u ? 0x200u : 0u);
  if (absx >= 0x477ff000u) return sign | 0x7c00u;  // rounds to >= 65520: infinity
  if (absx < 0x38800000u) {                         // subnormal half (or zero)
    if (absx < 0x33000000u) return sign;            // below half the smallest subnormal
    unsigned int mant = (absx & 0x7fffffu) | 0x800000u;
    int shift = 113 - (int)(absx >> 23) + 13;
    unsigned int q = mant >> shift;
    unsigned int rem = mant & ((1u << shift) - 1u);
    unsigned int half_point = 1u << (shift - 1);
    if (rem > half_point || (rem == half_point && (q & 1u))) q++;
    return sign | q;
  }
  unsigned int q = absx - 0x38000000u;  // rebias 127 -> 15
  unsigned int rem = q & 0x1fffu;
  q >>= 13;
  if (rem > 0x1000u || (rem == 0x1000u && (q & 1u))) q++;
  return sign | q;
}

// A float32 result into the output type T as the CPU's round_saturate: integers round half away from zero in
// float32 (the + 0.5 rounded once) and saturate, NaN gives 0; float stays.
template <typename T> __device__ __forceinline__ T round_store(float v);
template <> __device__ __forceinline__ float round_store<float>(float v) { return v; }
#define ROUND_INT(T, LO, HI)                                                       \
  template <> __device__ __forceinline__ T round_store<T>(float v) {               \
    if (v != v) return (T)0;                                                       \
    double r = (double)truncf(__fadd_rn(v, copysignf(0.5f, v)));                  \
    if (r <= (double)(LO)) return (T)(LO);                                         \
    if (r >= (double)(HI)) return (T)(HI);                                         \
    return (T)r;                                                                   \
  }
ROUND_INT(unsigned char, 0, 255)
ROUND_INT(signed char, -128, 127)
ROUND_INT(unsigned short, 0, 65535)
ROUND_INT(short, -32768, 32767)
ROUND_INT(int, -2147483647 - 1, 2147483647)
#undef ROUND_INT

// DALI's data type numbers (headrace_kernels.dtypes.NUMPY_TYPES), as kernels that switch on a type take them
#define T_U8 0
#define T_U16 1
#define T_U32 2
#define T_U64 3
#define T_I8 4
#define T_I16 5
#define T_I32 6
#define T_I64 7
#define T_F16 8
#define T_F32 9
#define T_F64 10
#define T_BOOL 11

#endif  // HEADRACE_COMMON_CUH
