// headrace's image kernels: separable resampling (Pillow's support-scaled filters, OpenCV's sampling filters),
// crop, flip and crop-mirror-normalize, fused into one store pass. Each launch covers a whole batch; every sample
// carries its own sizes in a Sample record (blockIdx.z = sample), so batches of different shapes need no padding.
//
// Compiled by NVRTC through CuPy with --fmad=false: the float32 normalization and the float64 filter weights round
// exactly like the CPU kernels (numpy, Pillow), which use no fused multiply-add either.

#define MAXC 4

// How a sample's resize-output value at (ry, rx) is produced.
#define MODE_COPY 0      // the input pixel itself (crop, flip, crop_mirror_normalize)
#define MODE_PIL 1       // Pillow's separable resampling (antialiased shrink, TRIANGULAR); needs the horizontal pass
#define MODE_LINEAR 2    // OpenCV INTER_LINEAR
#define MODE_CUBIC 3     // OpenCV INTER_CUBIC
#define MODE_LANCZOS 4   // OpenCV INTER_LANCZOS4
#define MODE_NN 5        // OpenCV INTER_NEAREST_EXACT

#define PIL_BILINEAR 1
#define PIL_BICUBIC 2
#define PIL_LANCZOS 3
#define PIL_VERTICAL_FIRST 16  // flag in Sample.filter: Pillow runs the vertical pass first for this shape
#define PRECISION_BITS (32 - 8 - 2)

struct Sample {
  unsigned long long in;    // the input image's first pixel (HWC, interleaved)
  unsigned long long out;   // the output sample's first element
  unsigned long long tmp;   // the horizontal pass's rows (MODE_PIL only)
  int in_h, in_w, in_pitch; // input size and row pitch in elements
  int win_y, win_x, win_h, win_w;  // the input region that is resampled (resize input window)
  int rs_h, rs_w;           // size of the resampled image
  int crop_y, crop_x;       // top-left of the output window in the resampled image (may lie outside: padding)
  int out_h, out_w;         // output size
  int mode, filter;         // MODE_*, PIL_*
  int mirror_x, mirror_y;
  float mean[MAXC], mul[MAXC], fill[MAXC];
  float shift;              // the record is 144 bytes, 8-byte aligned
};

typedef unsigned short half_bits;

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
    int shift = 113 - (int)(absx >> 23) + 13;       // 126 - exp + 13 - 14 + 14
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

template <typename T> __device__ __forceinline__ T store_cast(float v);
template <> __device__ __forceinline__ float store_cast<float>(float v) { return v; }
template <> __device__ __forceinline__ half_bits store_cast<half_bits>(float v) { return float_to_half(v); }
template <> __device__ __forceinline__ unsigned char store_cast<unsigned char>(float v) {
  v = rintf(v); return (unsigned char)fminf(fmaxf(v, 0.f), 255.f);
}
template <> __device__ __forceinline__ signed char store_cast<signed char>(float v) {
  v = rintf(v); return (signed char)fminf(fmaxf(v, -128.f), 127.f);
}
template <> __device__ __forceinline__ short store_cast<short>(float v) {
  v = rintf(v); return (short)fminf(fmaxf(v, -32768.f), 32767.f);
}
template <> __device__ __forceinline__ int store_cast<int>(float v) {
  v = rintf(v);
  if (v >= 2147483647.f) return 2147483647;
  if (v <= -2147483648.f) return (-2147483647 - 1);
  return (int)v;
}

// ---- Pillow's filters and coefficients (libImaging/Resample.c), in float64 like Pillow ----

__device__ __forceinline__ double pil_filter(int filter, double x) {
  if (filter == PIL_BILINEAR) {
    if (x < 0.0) x = -x;
    return x < 1.0 ? 1.0 - x : 0.0;
  }
  if (filter == PIL_BICUBIC) {
    const double a = -0.5;
    if (x < 0.0) x = -x;
    if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0;
    if (x < 2.0) return (((x - 5.0) * x + 8.0) * x - 4.0) * a;
    return 0.0;
  }
  // Lanczos, support 3
  if (-3.0 <= x && x < 3.0) {
    double s1 = 1.0, s3 = 1.0;
    if (x != 0.0) { double t = x * 3.141592653589793; s1 = sin(t) / t; }
    double x3 = x / 3.0;
    if (x3 != 0.0) { double t = x3 * 3.141592653589793; s3 = sin(t) / t; }
    return s1 * s3;
  }
  return 0.0;
}

__device__ __forceinline__ double pil_support(int filter) {
  return filter == PIL_BILINEAR ? 1.0 : (filter == PIL_BICUBIC ? 2.0 : 3.0);
}

// The source span [first, first + count) of output index `i` and what its weights need.
struct PilSpan { int first, count; double center, ss, total; };

__device__ PilSpan pil_span(int i, int in_size, int out_size, int filter) {
  PilSpan s;
  double scale = (double)in_size / (double)out_size;
  double filterscale = scale < 1.0 ? 1.0 : scale;
  double support = pil_support(filter) * filterscale;
  s.center = (i + 0.5) * scale;
  s.ss = 1.0 / filterscale;
  int xmin = (int)(s.center - support + 0.5);
  if (xmin < 0) xmin = 0;
  int xmax = (int)(s.center + support + 0.5);
  if (xmax > in_size) xmax = in_size;
  s.first = xmin;
  s.count = xmax - xmin;
  double ww = 0.0;
  for (int x = 0; x < s.count; x++) ww += pil_filter(filter, (x + xmin - s.center + 0.5) * s.ss);
  s.total = ww;
  return s;
}

__device__ __forceinline__ double pil_weight(const PilSpan& s, int filter, int x) {
  double w = pil_filter(filter, (x + s.first - s.center + 0.5) * s.ss);
  return s.total != 0.0 ? w / s.total : w;
}

__device__ __forceinline__ int pil_fixed(double k) {
  return k < 0.0 ? (int)(-0.5 + k * (1 << PRECISION_BITS)) : (int)(0.5 + k * (1 << PRECISION_BITS));
}

__device__ __forceinline__ unsigned char clip8(int v) {
  if (v >= (1 << PRECISION_BITS << 8)) return 255;
  if (v <= 0) return 0;
  return (unsigned char)(v >> PRECISION_BITS);
}

// First pass of MODE_PIL samples into tmp (uint8 when FIXED: 8-bit fixed point as Pillow does for uint8 L/RGB/RGBA
// images; otherwise float64 sums stored as float32, Pillow's "F"). Horizontal first: tmp[row][x] for every row of
// the window (win_h x rs_w). Vertical first (PIL_VERTICAL_FIRST): tmp[y][col] for every column (rs_h x win_w).
template <typename InT, bool FIXED>
__device__ void pil_first_pass(const Sample& s, int channels) {
  int x = blockIdx.x * blockDim.x + threadIdx.x;
  int y = blockIdx.y * blockDim.y + threadIdx.y;
  if (s.mode != MODE_PIL) return;
  int filter = s.filter & 15;
  bool vertical = (s.filter & PIL_VERTICAL_FIRST) != 0;
  int width = vertical ? s.win_w : s.rs_w, height = vertical ? s.rs_h : s.win_h;
  if (x >= width || y >= height) return;
  const InT* base = (const InT*)s.in + (size_t)s.win_y * s.in_pitch + (size_t)s.win_x * channels;
  PilSpan span = vertical ? pil_span(y, s.win_h, s.rs_h, filter) : pil_span(x, s.win_w, s.rs_w, filter);
  size_t step = vertical ? (size_t)s.in_pitch : (size_t)channels;
  const InT* first = vertical ? base + (size_t)span.first * s.in_pitch + (size_t)x * channels
                              : base + (size_t)y * s.in_pitch + (size_t)span.first * channels;
  size_t o = ((size_t)y * width + x) * channels;
  if (FIXED) {
    int acc[MAXC];
    for (int c = 0; c < channels; c++) acc[c] = 1 << (PRECISION_BITS - 1);
    for (int j = 0; j < span.count; j++) {
      int k = pil_fixed(pil_weight(span, filter, j));
      const InT* p = first + j * step;
      for (int c = 0; c < channels; c++) acc[c] += (int)p[c] * k;
    }
    unsigned char* tmp = (unsigned char*)s.tmp;
    for (int c = 0; c < channels; c++) tmp[o + c] = clip8(acc[c]);
  } else {
    double acc[MAXC];
    for (int c = 0; c < channels; c++) acc[c] = 0.0;
    for (int j = 0; j < span.count; j++) {
      double k = pil_weight(span, filter, j);
      const InT* p = first + j * step;
      for (int c = 0; c < channels; c++) acc[c] += (double)(float)p[c] * k;
    }
    float* tmp = (float*)s.tmp;
    for (int c = 0; c < channels; c++) tmp[o + c] = (float)acc[c];
  }
}

template <typename InT, bool FIXED>
__global__ void resize_horizontal(const Sample* samples, int channels) {
  pil_first_pass<InT, FIXED>(samples[blockIdx.z], channels);
}

// Second pass of MODE_PIL: the value of every channel at (ry, rx) of the resampled image, from tmp.
template <bool FIXED>
__device__ void pil_second_pass(const Sample& s, int channels, int ry, int rx, float* v) {
  int filter = s.filter & 15;
  bool vertical_first = (s.filter & PIL_VERTICAL_FIRST) != 0;
  // vertical first: tmp is rs_h x win_w and this pass is horizontal; else tmp is win_h x rs_w and this is vertical
  PilSpan span = vertical_first ? pil_span(rx, s.win_w, s.rs_w, filter) : pil_span(ry, s.win_h, s.rs_h, filter);
  size_t start = vertical_first ? ((size_t)ry * s.win_w + span.first) * channels
                                : ((size_t)span.first * s.rs_w + rx) * channels;
  size_t step = vertical_first ? (size_t)channels : (size_t)s.rs_w * channels;
  if (FIXED) {
    const unsigned char* tmp = (const unsigned char*)s.tmp + start;
    int acc[MAXC];
    for (int c = 0; c < channels; c++) acc[c] = 1 << (PRECISION_BITS - 1);
    for (int j = 0; j < span.count; j++) {
      int k = pil_fixed(pil_weight(span, filter, j));
      const unsigned char* p = tmp + j * step;
      for (int c = 0; c < channels; c++) acc[c] += (int)p[c] * k;
    }
    for (int c = 0; c < channels; c++) v[c] = (float)clip8(acc[c]);
  } else {
    const float* tmp = (const float*)s.tmp + start;
    double acc[MAXC];
    for (int c = 0; c < channels; c++) acc[c] = 0.0;
    for (int j = 0; j < span.count; j++) {
      double k = pil_weight(span, filter, j);
      const float* p = tmp + j * step;
      for (int c = 0; c < channels; c++) acc[c] += (double)p[c] * k;
    }
    for (int c = 0; c < channels; c++) v[c] = (float)acc[c];
  }
}

// ---- OpenCV's sampling filters (imgproc/src/resize.cpp) ----

// Source position and fraction of output index `i` (cv::resize's mapping).
__device__ __forceinline__ void cv_position(int i, int in_size, int out_size, int& sx, float& fx) {
  double scale = 1.0 / ((double)out_size / (double)in_size);
  float f = (float)((i + 0.5) * scale - 0.5);
  sx = (int)floorf(f);
  fx = f - sx;
}

__device__ __forceinline__ int clampi(int v, int lo, int hi) { return v < lo ? lo : (v > hi ? hi : v); }

// Taps (up to 8) of one axis: source indices and weights, as OpenCV computes them.
__device__ int cv_taps(int mode, int i, int in_size, int out_size, int* idx, float* w) {
  int sx; float fx;
  cv_position(i, in_size, out_size, sx, fx);
  if (mode == MODE_LINEAR) {
    if (sx < 0) { fx = 0.f; sx = 0; }
    if (sx >= in_size - 1) { fx = 0.f; sx = in_size - 1; }
    idx[0] = sx; idx[1] = clampi(sx + 1, 0, in_size - 1);
    w[0] = 1.f - fx; w[1] = fx;
    return 2;
  }
  if (mode == MODE_CUBIC) {
    const float A = -0.75f;
    float x = fx;
    w[0] = ((A * (x + 1) - 5 * A) * (x + 1) + 8 * A) * (x + 1) - 4 * A;
    w[1] = ((A + 2) * x - (A + 3)) * x * x + 1;
    w[2] = ((A + 2) * (1 - x) - (A + 3)) * (1 - x) * (1 - x) + 1;
    w[3] = 1.f - w[0] - w[1] - w[2];
    for (int k = 0; k < 4; k++) idx[k] = clampi(sx - 1 + k, 0, in_size - 1);
    return 4;
  }
  // Lanczos4: 8 taps of sinc(t) * sinc(t / 4), normalized
  float sum = 0.f;
  for (int k = 0; k < 8; k++) {
    double t = (double)(fx + 3 - k);
    double v = 1.0;
    if (fabs(t) >= 1.1920929e-07) {
      double y = t * 3.141592653589793 * 0.25;
      v = 4.0 * sin(y * 4.0) * sin(y) / (16.0 * y * y);
    }
    w[k] = (float)v;
    sum += w[k];
    idx[k] = clampi(sx - 3 + k, 0, in_size - 1);
  }
  for (int k = 0; k < 8; k++) w[k] *= 1.f / sum;
  return 8;
}

// OpenCV's value at (ry, rx): separable taps; uint8 goes through 11-bit fixed-point weights as OpenCV does.
template <typename InT>
__device__ void cv_sample(const Sample& s, int channels, int ry, int rx, float* v) {
  const InT* in = (const InT*)s.in;
  if (s.mode == MODE_NN) {
    // Pillow's NEAREST (and OpenCV 5's INTER_NEAREST_EXACT): pixel centres stepped by a float64 scale, summed
    // one step at a time as Pillow's affine scaler does, so ties round the same way.
    double scale_x = (double)s.win_w / s.rs_w, scale_y = (double)s.win_h / s.rs_h;
    double xo = scale_x * 0.5, yo = scale_y * 0.5;
    for (int k = 0; k < rx; k++) xo += scale_x;
    for (int k = 0; k < ry; k++) yo += scale_y;
    int sx = min((int)xo, s.win_w - 1), sy = min((int)yo, s.win_h - 1);
    const InT* p = in + (size_t)(s.win_y + sy) * s.in_pitch + (size_t)(s.win_x + sx) * channels;
    for (int c = 0; c < channels; c++) v[c] = (float)p[c];
    return;
  }
  int xi[8], yi[8];
  float xw[8], yw[8];
  int nx = cv_taps(s.mode, rx, s.win_w, s.rs_w, xi, xw);
  int ny = cv_taps(s.mode, ry, s.win_h, s.rs_h, yi, yw);
  bool fixed = sizeof(InT) == 1;
  if (fixed) {
    int ax[8], ay[8];
    for (int k = 0; k < nx; k++) ax[k] = __float2int_rn(xw[k] * 2048.f);
    for (int k = 0; k < ny; k++) ay[k] = __float2int_rn(yw[k] * 2048.f);
    for (int c = 0; c < channels; c++) {
      long long acc = 0;
      for (int j = 0; j < ny; j++) {
        const InT* row = in + (size_t)(s.win_y + yi[j]) * s.in_pitch + (size_t)s.win_x * channels + c;
        int h = 0;
        for (int k = 0; k < nx; k++) h += (int)row[(size_t)xi[k] * channels] * ax[k];
        acc += (long long)h * ay[j];
      }
      float r = (float)((acc + (1 << 21)) >> 22);
      v[c] = fminf(fmaxf(r, 0.f), 255.f);
    }
  } else {
    for (int c = 0; c < channels; c++) {
      float acc = 0.f;
      for (int j = 0; j < ny; j++) {
        const InT* row = in + (size_t)(s.win_y + yi[j]) * s.in_pitch + (size_t)s.win_x * channels + c;
        float h = 0.f;
        for (int k = 0; k < nx; k++) h = __fadd_rn(h, __fmul_rn((float)row[(size_t)xi[k] * channels], xw[k]));
        acc = __fadd_rn(acc, __fmul_rn(h, yw[j]));
      }
      v[c] = acc;
    }
  }
}

// The store pass: every output element of every sample. For output (oy, ox) it takes the resampled image's value
// at (crop_y + oy, crop_x + ox) (mirrored as asked, `fill` outside), optionally rounds it to uint8 (the resize
// op's own output type, when a fused resize feeds crop_mirror_normalize), normalizes it as
// (v - mean) * mul + shift in float32 without FMA, and stores it as OutT in CHW or HWC.
template <typename InT, typename OutT>
__global__ void image_store(const Sample* samples, int channels, int out_channels, int chw, int quantize_u8,
                            int normalize) {
  const Sample s = samples[blockIdx.z];
  int ox = blockIdx.x * blockDim.x + threadIdx.x;
  int oy = blockIdx.y * blockDim.y + threadIdx.y;
  if (ox >= s.out_w || oy >= s.out_h) return;
  int ry = s.crop_y + (s.mirror_y ? s.out_h - 1 - oy : oy);
  int rx = s.crop_x + (s.mirror_x ? s.out_w - 1 - ox : ox);
  float v[MAXC];
  bool inside = ry >= 0 && rx >= 0 && ry < s.rs_h && rx < s.rs_w;
  if (!inside) {
    for (int c = 0; c < channels; c++) v[c] = s.fill[c];
  } else if (s.mode == MODE_COPY) {
    const InT* p = (const InT*)s.in + (size_t)(s.win_y + ry) * s.in_pitch + (size_t)(s.win_x + rx) * channels;
    for (int c = 0; c < channels; c++) v[c] = (float)p[c];
  } else if (s.mode == MODE_PIL) {
    if (sizeof(InT) == 1 && (channels == 1 || channels == 3 || channels == 4)) pil_second_pass<true>(s, channels, ry, rx, v);
    else pil_second_pass<false>(s, channels, ry, rx, v);
  } else {
    cv_sample<InT>(s, channels, ry, rx, v);
  }
  if (inside && quantize_u8) {
    for (int c = 0; c < channels; c++) v[c] = fminf(fmaxf(rintf(v[c]), 0.f), 255.f);
  }
  OutT* out = (OutT*)s.out;
  size_t plane = (size_t)s.out_h * s.out_w;
  size_t pixel = (size_t)oy * s.out_w + ox;
  for (int c = 0; c < out_channels; c++) {
    float r;
    if (c >= channels) r = 0.f;
    else if (normalize) r = __fadd_rn(__fmul_rn(__fsub_rn(v[c], s.mean[c]), s.mul[c]), s.shift);
    else r = v[c];
    OutT o = store_cast<OutT>(r);
    if (chw) out[c * plane + pixel] = o;
    else out[pixel * out_channels + c] = o;
  }
}
