// preemphasis_filter, slice and normalize on a batch of samples of any sizes (blockIdx.y = sample, a grid-stride
// loop over its elements), each sample described by one record that headrace_kernels.gpu.signal_ops mirrors.
// Compiled with --fmad=false: products and sums round one at a time, as the CPU kernels' numpy arithmetic.

#include "common.cuh"

#define MAXD 8


// preemphasis_filter: out[j] = in[j] - coeff * in[j - 1], the element before the first given by `border`.
struct PreemphasisSample {
  unsigned long long in, out;  // T, contiguous
  long long size;
  float coeff;
  int border;  // 0: zero, 1: clamp (in[0]), 2: reflect (in[1])
};

template <typename T>
__global__ void preemphasis(const PreemphasisSample* samples) {
  const PreemphasisSample s = samples[blockIdx.y];
  const T* in = (const T*)s.in;
  T* out = (T*)s.out;
  const T coeff = (T)s.coeff;
  for (long long j = blockIdx.x * (long long)blockDim.x + threadIdx.x; j < s.size;
       j += (long long)gridDim.x * blockDim.x) {
    T x = in[j];
    if (j > 0) out[j] = x - coeff * in[j - 1];
    else if (s.border == 0) out[j] = x;
    else out[j] = x - coeff * (s.border == 2 && s.size > 1 ? in[1] : x);
  }
}

// slice: each output element reads the input element its window position maps to (by the out-of-bounds policy),
// or a fill value, converted as DALI's slice converts (clamp to the output type, uint8 truncates).
struct SliceSample {
  unsigned long long in, out;
  long long size;                  // output elements
  int ndim, policy;                // policy: 0 inside, 1 pad, 2 edge, 3 reflect (1001), 4 reflect_101, 5 wrap
  int in_type, out_type;           // type codes; out_type < 0: copy the input's elements as they are
  int channel_axis, fill_first;    // the fill: fills[fill_first], or + the output index along channel_axis (>= 0)
  long long in_shape[MAXD], out_shape[MAXD], anchor[MAXD];
};

__device__ __forceinline__ int type_size(int t) {
  switch (t) {
    case T_U16: case T_I16: case T_F16: return 2;
    case T_U32: case T_I32: case T_F32: return 4;
    case T_U64: case T_I64: case T_F64: return 8;
    default: return 1;
  }
}

__device__ __forceinline__ float half_bits_to_float(unsigned short h) {
  unsigned int sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
  if (exp == 0) {
    if (mant == 0) return __uint_as_float(sign);
    float v = (float)mant * 5.9604644775390625e-8f;  // subnormal: mant * 2^-24, exact
    return sign ? -v : v;
  }
  if (exp == 31) return __uint_as_float(sign | 0x7f800000u | (mant << 13));
  return __uint_as_float(sign | ((exp + 112) << 23) | (mant << 13));
}

__device__ __forceinline__ bool is_float_type(int t) { return t == T_F16 || t == T_F32 || t == T_F64; }

// The input element as a float (float64 clamped to float's range first), as numpy's astype after clip.
__device__ __forceinline__ float load_float(const void* p, long long i, int t) {
  switch (t) {
    case T_U8: return (float)((const unsigned char*)p)[i];
    case T_U16: return (float)((const unsigned short*)p)[i];
    case T_U32: return (float)((const unsigned int*)p)[i];
    case T_U64: return (float)((const unsigned long long*)p)[i];
    case T_I8: return (float)((const signed char*)p)[i];
    case T_I16: return (float)((const short*)p)[i];
    case T_I32: return (float)((const int*)p)[i];
    case T_I64: return (float)((const long long*)p)[i];
    case T_F16: return half_bits_to_float(((const unsigned short*)p)[i]);
    case T_F32: return ((const float*)p)[i];
    case T_F64: {
      double v = ((const double*)p)[i];
      const double m = 3.4028234663852886e38;
      return (float)(v < -m ? -m : (v > m ? m : v));
    }
    default: return ((const unsigned char*)p)[i] ? 1.f : 0.f;
  }
}

__device__ __forceinline__ unsigned char load_u8(const void* p, long long i, int t) {
  if (is_float_type(t)) {
    double v = t == T_F64 ? ((const double*)p)[i] : (double)load_float(p, i, t);
    if (!(v > 0.0)) return 0;  // NaN and negatives
    return v >= 255.0 ? 255 : (unsigned char)v;  // truncates
  }
  if (t == T_U64) {
    unsigned long long v = ((const unsigned long long*)p)[i];
    return v > 255ull ? 255 : (unsigned char)v;
  }
  long long v;
  switch (t) {
    case T_U8: case T_BOOL: return ((const unsigned char*)p)[i];
    case T_U16: v = ((const unsigned short*)p)[i]; break;
    case T_U32: v = ((const unsigned int*)p)[i]; break;
    case T_I8: v = ((const signed char*)p)[i]; break;
    case T_I16: v = ((const short*)p)[i]; break;
    case T_I32: v = ((const int*)p)[i]; break;
    default: v = ((const long long*)p)[i]; break;
  }
  return v < 0 ? 0 : (v > 255 ? 255 : (unsigned char)v);
}

__device__ __forceinline__ void store_converted(void* out, long long o, int out_type, const void* in, long long i,
                                                int in_type) {
  if (out_type == T_U8) {
    ((unsigned char*)out)[o] = load_u8(in, i, in_type);
  } else if (out_type == T_F16) {
    const float m = 65504.f;
    float v;
    if (in_type == T_F64) {
      double d = ((const double*)in)[i];
      v = (float)(d < -65504.0 ? -65504.0 : (d > 65504.0 ? 65504.0 : d));
    } else {
      v = load_float(in, i, in_type);
    }
    v = v < -m ? -m : (v > m ? m : v);  // NaN stays NaN
    ((half_bits*)out)[o] = float_to_half(v);
  } else {
    ((float*)out)[o] = load_float(in, i, in_type);
  }
}

__device__ __forceinline__ void copy_element(void* out, long long o, const void* in, long long i, int size) {
  switch (size) {
    case 8: ((unsigned long long*)out)[o] = ((const unsigned long long*)in)[i]; break;
    case 4: ((unsigned int*)out)[o] = ((const unsigned int*)in)[i]; break;
    case 2: ((unsigned short*)out)[o] = ((const unsigned short*)in)[i]; break;
    default: ((unsigned char*)out)[o] = ((const unsigned char*)in)[i]; break;
  }
}

__device__ __forceinline__ long long positive_mod(long long a, long long n) {
  long long r = a % n;
  return r < 0 ? r + n : r;
}

__global__ void slice_any(const SliceSample* samples, const unsigned char* fills) {
  const SliceSample s = samples[blockIdx.y];
  const int out_size = s.out_type < 0 ? type_size(s.in_type) : type_size(s.out_type);
  for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < s.size;
       e += (long long)gridDim.x * blockDim.x) {
    long long rest = e, source = 0, stride = 1, channel = 0;
    bool fill = false;
    for (int d = s.ndim - 1; d >= 0; d--) {
      long long index = rest % s.out_shape[d];
      rest /= s.out_shape[d];
      if (d == s.channel_axis) channel = index;
      long long p = index + s.anchor[d], n = s.in_shape[d];
      if (p < 0 || p >= n) {
        switch (s.policy) {
          case 2: p = p < 0 ? 0 : n - 1; break;
          case 3: p = positive_mod(p, 2 * n); if (p >= n) p = 2 * n - 1 - p; break;
          case 4:
            if (n == 1) p = 0;
            else { p = positive_mod(p, 2 * n - 2); if (p >= n) p = 2 * n - 2 - p; }
            break;
          case 5: p = positive_mod(p, n); break;
          default: fill = true; p = 0; break;
        }
      }
      source += p * stride;
      stride *= n;
    }
    if (fill) {
      long long f = s.fill_first + (s.channel_axis >= 0 ? channel : 0);
      copy_element((void*)s.out, e, fills, f, out_size);
    } else if (s.out_type < 0) {
      copy_element((void*)s.out, e, (const void*)s.in, source, out_size);
    } else {
      store_converted((void*)s.out, e, s.out_type, (const void*)s.in, source, s.in_type);
    }
  }
}

// normalize: out = (in - mean) * inv_stddev + shift, the parameters broadcast along the reduced axes (stride 0).
struct NormalizeSample {
  unsigned long long in, out, mean, inv;  // T, contiguous
  long long size;
  int ndim, pad;
  long long shape[MAXD], mean_stride[MAXD], inv_stride[MAXD];
};

template <typename T>
__global__ void normalize_apply(const NormalizeSample* samples, T shift) {
  const NormalizeSample s = samples[blockIdx.y];
  const T* in = (const T*)s.in;
  const T* mean = (const T*)s.mean;
  const T* inv = (const T*)s.inv;
  T* out = (T*)s.out;
  for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < s.size;
       e += (long long)gridDim.x * blockDim.x) {
    long long rest = e, m = 0, k = 0;
    for (int d = s.ndim - 1; d >= 0; d--) {
      long long index = rest % s.shape[d];
      rest /= s.shape[d];
      m += index * s.mean_stride[d];
      k += index * s.inv_stride[d];
    }
    out[e] = (in[e] - mean[m]) * inv[k] + shift;
  }
}
