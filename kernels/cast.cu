// headrace's cast: any numeric element type to any other as DALI's ConvertSat does (the CPU kernel's
// saturate_cast): float to integer rounds half away from zero and saturates (NaN gives 0), integer to integer
// saturates, to bool is != 0 after rounding a float. One kernel with the types as run-time codes (headrace's
// DALIDataType numbers), so NVRTC compiles one function instead of every pair.

#include "common.cuh"


__device__ __forceinline__ float half_to_float(unsigned short h) {
  unsigned int sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
  unsigned int bits;
  if (exp == 0) {
    if (mant == 0) bits = sign;
    else {  // subnormal: normalize
      int e = -1;
      do { mant <<= 1; e++; } while (!(mant & 0x400u));
      bits = sign | ((unsigned int)(112 - e) << 23) | ((mant & 0x3ffu) << 13);
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 112) << 23) | (mant << 13);
  }
  return __uint_as_float(bits);
}

__device__ __forceinline__ unsigned short double_to_half(double d) {
  // Through float: exact for every value a float can hold; a float64 input may round twice (last half ulp).
  return float_to_half((float)d);
}

__device__ __forceinline__ bool is_float(int t) { return t == T_F16 || t == T_F32 || t == T_F64; }

__device__ __forceinline__ double load_f(const void* p, size_t i, int t) {
  switch (t) {
    case T_U8: return ((const unsigned char*)p)[i];
    case T_U16: return ((const unsigned short*)p)[i];
    case T_U32: return ((const unsigned int*)p)[i];
    case T_U64: return (double)((const unsigned long long*)p)[i];
    case T_I8: return ((const signed char*)p)[i];
    case T_I16: return ((const short*)p)[i];
    case T_I32: return ((const int*)p)[i];
    case T_I64: return (double)((const long long*)p)[i];
    case T_F16: return half_to_float(((const unsigned short*)p)[i]);
    case T_F32: return ((const float*)p)[i];
    case T_F64: return ((const double*)p)[i];
    default: return ((const unsigned char*)p)[i] ? 1.0 : 0.0;
  }
}

__device__ __forceinline__ long long load_i(const void* p, size_t i, int t) {
  switch (t) {
    case T_U8: return ((const unsigned char*)p)[i];
    case T_U16: return ((const unsigned short*)p)[i];
    case T_U32: return ((const unsigned int*)p)[i];
    case T_U64: return (long long)((const unsigned long long*)p)[i];
    case T_I8: return ((const signed char*)p)[i];
    case T_I16: return ((const short*)p)[i];
    case T_I32: return ((const int*)p)[i];
    case T_I64: return ((const long long*)p)[i];
    default: return ((const unsigned char*)p)[i] ? 1 : 0;
  }
}

// Integer bounds of an integer type code.
__device__ __forceinline__ void int_bounds(int t, double& lo, double& hi) {
  switch (t) {
    case T_U8: lo = 0; hi = 255; break;
    case T_U16: lo = 0; hi = 65535; break;
    case T_U32: lo = 0; hi = 4294967295.0; break;
    case T_U64: lo = 0; hi = 18446744073709551615.0; break;
    case T_I8: lo = -128; hi = 127; break;
    case T_I16: lo = -32768; hi = 32767; break;
    case T_I32: lo = -2147483648.0; hi = 2147483647.0; break;
    case T_I64: lo = -9223372036854775808.0; hi = 9223372036854775807.0; break;
    default: lo = 0; hi = 1; break;
  }
}

__device__ __forceinline__ void store_i(void* p, size_t i, int t, long long v) {
  switch (t) {
    case T_U8: ((unsigned char*)p)[i] = (unsigned char)v; break;
    case T_U16: ((unsigned short*)p)[i] = (unsigned short)v; break;
    case T_U32: ((unsigned int*)p)[i] = (unsigned int)v; break;
    case T_U64: ((unsigned long long*)p)[i] = (unsigned long long)v; break;
    case T_I8: ((signed char*)p)[i] = (signed char)v; break;
    case T_I16: ((short*)p)[i] = (short)v; break;
    case T_I32: ((int*)p)[i] = (int)v; break;
    case T_I64: ((long long*)p)[i] = v; break;
    default: ((unsigned char*)p)[i] = v != 0; break;
  }
}

extern "C" __global__ void cast_any(const void* in, int in_type, void* out, int out_type, unsigned long long n) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    if (is_float(out_type)) {
      double v = load_f(in, i, in_type);
      if (out_type == T_F16) ((unsigned short*)out)[i] = double_to_half(v);
      else if (out_type == T_F32) ((float*)out)[i] = (float)v;
      else ((double*)out)[i] = v;
    } else if (out_type == T_BOOL) {
      double v = load_f(in, i, in_type);
      ((unsigned char*)out)[i] = (is_float(in_type) ? round(v) : v) != 0.0;
    } else if (is_float(in_type)) {
      double v = load_f(in, i, in_type);
      if (v != v) { store_i(out, i, out_type, 0); continue; }
      double lo, hi;
      int_bounds(out_type, lo, hi);
      v = round(v);
      if (v <= lo) v = lo;
      if (v >= hi) { store_i(out, i, out_type, out_type == T_U64 ? -1LL : (long long)hi); continue; }
      store_i(out, i, out_type, out_type == T_U64 ? (long long)(unsigned long long)v : (long long)v);
    } else if (in_type == T_U64) {
      // integer to integer saturates; uint64 sources compare unsigned
      unsigned long long u = ((const unsigned long long*)in)[i];
      double lo, hi;
      int_bounds(out_type, lo, hi);
      unsigned long long top = out_type == T_U64 ? ~0ULL : (out_type == T_I64 ? 9223372036854775807ULL
                                                                             : (unsigned long long)hi);
      store_i(out, i, out_type, (long long)(u > top ? top : u));
    } else {
      long long v = load_i(in, i, in_type);
      double lo, hi;
      int_bounds(out_type, lo, hi);
      if (out_type == T_U64) store_i(out, i, out_type, v < 0 ? 0 : v);
      else if (out_type == T_I64) store_i(out, i, out_type, v);
      else store_i(out, i, out_type, v < (long long)lo ? (long long)lo : (v > (long long)hi ? (long long)hi : v));
    }
  }
}
