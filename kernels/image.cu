// headrace's image kernels: separable resampling by host-made tap tables, crop, flip and crop-mirror-normalize,
// fused into one store pass; a fused chain may also flip the source (a flip before the resize) and apply colour
// ops between the resize and crop_mirror_normalize (hsv, color_twist, brightness_contrast: kernels/color.cu's
// arithmetic, each stage's value rounded to the type that op would store). Each launch covers a whole batch; every
// sample carries its own sizes in a Sample record (blockIdx.z = sample), so batches of different shapes need no
// padding.
//
// The tap tables (source index and float32 weight of every output row and column) are the CPU kernels' own
// (headrace_kernels.cpu.resampling.triangle_taps, geometry_ops._filter_taps, the nearest-neighbour indices; the
// triangle filter's are made here by `triangle_tables`, with the CPU's arithmetic), and
// the sums run in the CPU's order: vertical pass into float32, then horizontal pass, first tap multiplied, later
// non-zero taps multiplied and added one at a time. Compiled by NVRTC through CuPy with --fmad=false, so every
// multiply and add rounds as the CPU's does and CPU and GPU agree bit for bit.

#include "common.cuh"

#define MAXC 4

#define MODE_COPY 0  // the input pixel itself (crop, flip, crop_mirror_normalize)
#define MODE_TAPS 1  // resampled through the sample's tap tables

#define MAX_COLOUR 2     // colour stages between the resampling and the store
#define COLOUR_MATRIX 0  // RGB: v[c] = v . m[c] + offset (hsv, color_twist), as kernels/color.cu
#define COLOUR_SCALE 1   // any channels: v = v * scale + offset (brightness_contrast)
// the type a colour stage stores (its value is what the next stage reads): float, u8, i8, u16, i16, i32, f16
#define TYPE_FLOAT 0
#define TYPE_U8 1
#define TYPE_I8 2
#define TYPE_U16 3
#define TYPE_I16 4
#define TYPE_I32 5
#define TYPE_F16 6

struct Sample {
  unsigned long long in;       // the input image's first pixel (HWC, interleaved)
  unsigned long long out;      // the output sample's first element
  unsigned long long tmp;      // vertical pass: rs_h x col_n x channels float32 (MODE_TAPS)
  unsigned long long row_idx;  // rs_h x ty int32 source rows (absolute)
  unsigned long long row_w;    // rs_h x ty float32 weights
  unsigned long long col_idx;  // rs_w x tx int32 source columns (absolute)
  unsigned long long col_w;    // rs_w x tx float32 weights
  int in_h, in_w, in_pitch;    // input size and row pitch in elements
  int win_y, win_x;            // MODE_COPY: top-left of the region that is read
  int rs_h, rs_w;              // size of the resampled (or copied) image
  int ty, tx;                  // taps per output row / column
  int col_lo, col_n;           // the source columns the vertical pass covers
  int crop_y, crop_x;          // top-left of the output window in the resampled image (may lie outside: padding)
  int out_h, out_w;            // output size
  int mode, round_u8;          // MODE_*; round_u8: the resampled value is rounded to uint8 levels (resize's type)
  int mirror_x, mirror_y;
  float mean[MAXC], mul[MAXC];
  float fill[MAXC + 1];        // output values of padding (and of the pad_output channel), already in the out type
  float shift;
  int src_flip;                // the source read mirrored (a flip before the resize): bit 0 x, bit 1 y
  int c_mode[MAX_COLOUR];      // colour stages (n_colour of them), in order: COLOUR_*
  int c_type[MAX_COLOUR];      // TYPE_*: the stage's output type
  float c_m[MAX_COLOUR][9];
  float c_scale[MAX_COLOUR], c_offset[MAX_COLOUR];
  int n_colour;
  int pad_;                    // 304 bytes in all, 8-byte aligned
};

// An axis whose triangle-filter tap table the device makes (headrace_kernels.gpu.tap_tables.AXIS).
struct TapAxis {
  unsigned long long index;   // out_size x taps int32 source indices (clamped to the extent, then + shift)
  unsigned long long weight;  // out_size x taps float32 weights
  double lo, hi;              // the source span [lo, hi) resampled onto out_size pixels
  int in_size, out_size, taps, shift;
  int antialias, pad_;        // 56 bytes in all
};

// headrace_kernels.cpu.resampling.triangle_taps for many axes at once: one thread per output pixel, grid
// (ceil(longest out_size / 128), min(axes, 65535)). The same float64 operations in the same order (no FMA), so
// the same indices and weights; taps past the last positive one repeat its index with weight 0.
extern "C" __global__ void triangle_tables(const TapAxis* axes, int count) {
  for (int i = blockIdx.y; i < count; i += gridDim.y) {
    const TapAxis& a = axes[i];
    int o = blockIdx.x * blockDim.x + threadIdx.x;
    if (o >= a.out_size) continue;
    double scale = (a.hi - a.lo) / (double)a.out_size;
    double stretch = a.antialias ? fmax(1.0, fabs(scale)) : 1.0;
    double centre = a.lo + ((double)o + 0.5) * scale - 0.5;
    int first = (int)floor(centre - stretch) + 1, last = (int)ceil(centre + stretch) - 1;
    double total = 0.0;
    for (int t = first; t <= last; t++) {
      double w = 1.0 - fabs((double)t - centre) / stretch;
      if (w > 0.0) total += w;
    }
    int* index = (int*)a.index + (size_t)o * a.taps;
    float* weight = (float*)a.weight + (size_t)o * a.taps;
    int n = 0, at = a.shift;
    for (int t = first; t <= last && n < a.taps; t++) {
      double w = 1.0 - fabs((double)t - centre) / stretch;
      if (w > 0.0) {
        at = min(max(t, 0), a.in_size - 1) + a.shift;
        index[n] = at;
        weight[n] = (float)(w / total);
        n++;
      }
    }
    for (; n < a.taps; n++) {
      index[n] = at;
      weight[n] = 0.f;
    }
  }
}

// Into the output type as DALI's ConvertSat (the CPU's saturate_cast): integers round half away from zero
// (roundf) and saturate, NaN gives 0; float16 rounds to nearest even.
template <typename T> __device__ __forceinline__ T store_cast(float v);
template <> __device__ __forceinline__ float store_cast<float>(float v) { return v; }
template <> __device__ __forceinline__ half_bits store_cast<half_bits>(float v) { return float_to_half(v); }
template <> __device__ __forceinline__ unsigned char store_cast<unsigned char>(float v) {
  if (v != v) return 0;
  v = roundf(v); return (unsigned char)fminf(fmaxf(v, 0.f), 255.f);
}
template <> __device__ __forceinline__ signed char store_cast<signed char>(float v) {
  if (v != v) return 0;
  v = roundf(v); return (signed char)fminf(fmaxf(v, -128.f), 127.f);
}
template <> __device__ __forceinline__ short store_cast<short>(float v) {
  if (v != v) return 0;
  v = roundf(v); return (short)fminf(fmaxf(v, -32768.f), 32767.f);
}
template <> __device__ __forceinline__ int store_cast<int>(float v) {
  if (v != v) return 0;
  v = roundf(v);
  if (v >= 2147483647.f) return 2147483647;
  if (v <= -2147483648.f) return (-2147483647 - 1);
  return (int)v;
}

// float16 bits -> float (exact).
__device__ __forceinline__ float half_to_float(half_bits h) {
  unsigned int sign = (unsigned int)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
  if (exp == 0x1fu) return __uint_as_float(sign | 0x7f800000u | (mant << 13));
  if (exp == 0u) {
    float v = __fmul_rn((float)mant, 5.9604644775390625e-8f);  // subnormal: mant * 2^-24
    return sign ? -v : v;
  }
  return __uint_as_float(sign | ((exp + 112u) << 23) | (mant << 13));
}

// A colour stage's float32 result as the next op reads it back from that stage's output type.
__device__ __forceinline__ float stored_as(float v, int type) {
  switch (type) {
    case TYPE_U8: return (float)round_store<unsigned char>(v);
    case TYPE_I8: return (float)round_store<signed char>(v);
    case TYPE_U16: return (float)round_store<unsigned short>(v);
    case TYPE_I16: return (float)round_store<short>(v);
    case TYPE_I32: return (float)round_store<int>(v);
    case TYPE_F16: return half_to_float(float_to_half(v));
    default: return v;
  }
}

// The sample's colour stages on one pixel, in kernels/color.cu's order of operations.
__device__ __forceinline__ void apply_colour(const Sample& s, int channels, float* v) {
  for (int k = 0; k < s.n_colour; k++) {
    if (s.c_mode[k] == COLOUR_SCALE) {
      for (int c = 0; c < channels; c++)
        v[c] = stored_as(__fadd_rn(__fmul_rn(v[c], s.c_scale[k]), s.c_offset[k]), s.c_type[k]);
      continue;
    }
    const float* m = s.c_m[k];
    float r = v[0], g = v[1], b = v[2];
    for (int c = 0; c < 3; c++)
      v[c] = stored_as(__fadd_rn(__fadd_rn(__fadd_rn(__fmul_rn(r, m[3 * c]), __fmul_rn(g, m[3 * c + 1])),
                                           __fmul_rn(b, m[3 * c + 2])), s.c_offset[k]), s.c_type[k]);
  }
}

// Vertical pass of MODE_TAPS samples: tmp[oy][x][c] = sum_k row_w[oy][k] * in[row_idx[oy][k]][col_lo + x][c].
// One thread per (x, c) of a row: grid (ceil(col_n * channels / 128), min(rs_h, 65535), samples).
// A launch's in_base, out_base and tmp_base are added to its records' in, out and tmp: 0 where the records hold
// addresses; a recurring batch of shapes keeps its records on the device with offsets and passes its buffers here.
template <typename InT>
__global__ void resample_vertical(const Sample* samples, int channels, unsigned long long in_base,
                                  unsigned long long tmp_base) {
  const Sample& s = samples[blockIdx.z];
  if (s.mode != MODE_TAPS) return;
  int j = blockIdx.x * blockDim.x + threadIdx.x;
  int width = s.col_n * channels;
  if (j >= width) return;
  const InT* in = (const InT*)(s.in + in_base);
  const InT* base = in + (size_t)s.col_lo * channels + j;
  if (s.src_flip & 1) {  // column col_lo + x of the flipped source is column in_w - 1 - (col_lo + x)
    int x = j / channels;
    base = in + (size_t)(s.in_w - 1 - s.col_lo - x) * channels + (j - x * channels);
  }
  const int flip_y = s.src_flip & 2, last_row = s.in_h - 1;
  for (int oy = blockIdx.y; oy < s.rs_h; oy += gridDim.y) {  // gridDim.y is capped at 65535
    const int* idx = (const int*)s.row_idx + (size_t)oy * s.ty;
    const float* w = (const float*)s.row_w + (size_t)oy * s.ty;
    int row = flip_y ? last_row - idx[0] : idx[0];
    float acc = __fmul_rn(w[0], (float)base[(size_t)row * s.in_pitch]);
    for (int k = 1; k < s.ty; k++) {
      float wk = w[k];
      if (wk != 0.f) {
        row = flip_y ? last_row - idx[k] : idx[k];
        acc = __fadd_rn(acc, __fmul_rn(wk, (float)base[(size_t)row * s.in_pitch]));
      }
    }
    ((float*)(s.tmp + tmp_base))[(size_t)oy * width + j] = acc;
  }
}

// The horizontal pass at (ry, rx) of the resampled image, from tmp; rounded as the CPU's uint8 output when asked.
__device__ __forceinline__ void resample_horizontal(const Sample& s, const float* tmp, int channels, int ry, int rx,
                                                    float* v) {
  const int* idx = (const int*)s.col_idx + (size_t)rx * s.tx;
  const float* w = (const float*)s.col_w + (size_t)rx * s.tx;
  const float* row = tmp + (size_t)ry * s.col_n * channels;
  for (int c = 0; c < channels; c++) {
    float acc = __fmul_rn(w[0], row[(size_t)(idx[0] - s.col_lo) * channels + c]);
    for (int k = 1; k < s.tx; k++) {
      float wk = w[k];
      if (wk != 0.f) acc = __fadd_rn(acc, __fmul_rn(wk, row[(size_t)(idx[k] - s.col_lo) * channels + c]));
    }
    if (s.round_u8) acc = truncf(fminf(fmaxf(__fadd_rn(acc, 0.5f), 0.f), 255.f));  // + 0.5, truncated
    v[c] = acc;
  }
}

// The store pass: every output element of every sample. For output (oy, ox) it takes the resampled image's value
// at (crop_y + oy, crop_x + ox) (mirrored as asked; outside it, the fill, already an output value), applies the
// colour stages, normalizes it as (v - mean) * mul + shift in float32 without FMA when asked, and stores it as OutT
// in CHW or HWC.
template <typename InT, typename OutT>
__global__ void image_store(const Sample* samples, int channels, int out_channels, int chw, int normalize,
                            unsigned long long in_base, unsigned long long out_base, unsigned long long tmp_base) {
  const Sample& s = samples[blockIdx.z];
  int ox = blockIdx.x * blockDim.x + threadIdx.x;
  int oy = blockIdx.y * blockDim.y + threadIdx.y;
  if (ox >= s.out_w || oy >= s.out_h) return;
  int ry = s.crop_y + (s.mirror_y ? s.out_h - 1 - oy : oy);
  int rx = s.crop_x + (s.mirror_x ? s.out_w - 1 - ox : ox);
  bool inside = ry >= 0 && rx >= 0 && ry < s.rs_h && rx < s.rs_w;
  float v[MAXC];
  if (inside) {
    if (s.mode == MODE_COPY) {
      int sy = s.win_y + ry, sx = s.win_x + rx;
      if (s.src_flip & 2) sy = s.in_h - 1 - sy;
      if (s.src_flip & 1) sx = s.in_w - 1 - sx;
      const InT* p = (const InT*)(s.in + in_base) + (size_t)sy * s.in_pitch + (size_t)sx * channels;
      for (int c = 0; c < channels; c++) v[c] = (float)p[c];
    } else {
      resample_horizontal(s, (const float*)(s.tmp + tmp_base), channels, ry, rx, v);
    }
    if (s.n_colour) apply_colour(s, channels, v);
  }
  OutT* out = (OutT*)(s.out + out_base);
  size_t plane = (size_t)s.out_h * s.out_w;
  size_t pixel = (size_t)oy * s.out_w + ox;
  for (int c = 0; c < out_channels; c++) {
    OutT o;
    if (!inside || c >= channels) o = store_cast<OutT>(s.fill[c]);
    else if (normalize) o = store_cast<OutT>(__fadd_rn(__fmul_rn(__fsub_rn(v[c], s.mean[c]), s.mul[c]), s.shift));
    else o = store_cast<OutT>(v[c]);
    if (chw) out[c * plane + pixel] = o;
    else out[pixel * out_channels + c] = o;
  }
}
