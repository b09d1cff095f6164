// The spectral audio features on a batch of differently sized float32 samples, one launch per step whatever the
// batch size (headrace_kernels.gpu.spectral_ops mirrors the records):
// - spectrogram: extract_windows writes every window of every sample (window * signal, zero-padded to nfft) as one
//   row of a frames matrix, cuFFT (cupy.fft.rfft) transforms all rows in one batched plan, and spectrum_ft /
//   spectrum_tf write |X|^power into each sample's output ("ft" through a shared-memory transpose);
// - mel_filter_bank and mfcc: apply_rows applies a (rows x n) table along one axis of each sample, summing only
//   each row's nonzero band [lo, hi) in order, then an optional per-row scale (the MFCC lifter);
// - to_decibels: sample_inverse_reference (one block per sample: 1 / max(0, max x), NaNs skipped) and decibels.
// Compiled with --fmad=false: products and sums round one at a time, as on the CPU.

struct WindowSample {
  unsigned long long in;   // const float*, the 1D signal
  unsigned long long out;  // float*, (bins, windows) for "ft" or (windows, bins) for "tf"
  long long length;        // samples of the signal
  long long windows;       // windows of this sample
  long long row;           // its first row in the frames / spectrum matrices
};

struct MatrixSample {
  unsigned long long in;      // const float*, (outer, n, inner)
  unsigned long long out;     // float*, (outer, rows, inner)
  unsigned long long table;   // const float*, (rows, n)
  unsigned long long bounds;  // const int*, (rows, 2): each row's nonzero columns [lo, hi)
  unsigned long long scale;   // const float*, (rows,) applied after the sum, or 0 for none
  long long outer, inner;
  int n, rows;
};

struct alignas(8) Complex64 {  // cupy's complex64: (real, imaginary) float32 pairs
  float re, im;
};

struct DecibelSample {
  unsigned long long in;   // const float*
  unsigned long long out;  // float*
  long long size;
};

// DALI's idx_reflect_101: mirror without repeating the edge sample, as often as needed.
__device__ __forceinline__ long long reflect101(long long i, long long length) {
  if (length == 1) return 0;
  long long period = 2 * (length - 1);
  i %= period;
  if (i < 0) i += period;
  return i >= length ? period - i : i;
}

// frames[row + w, t] = window[t] * signal[w * step - offset + t] for t < window_length, 0 up to nfft; outside the
// signal: mirrored (reflect) or 0. grid: (nfft tiles, windows (strided), samples).
extern "C" __global__ void extract_windows(const WindowSample* samples, const float* window, float* frames,
                                           int window_length, int nfft, int step, int offset, int reflect) {
  const WindowSample s = samples[blockIdx.z];
  const float* in = (const float*)s.in;
  for (long long w = blockIdx.y; w < s.windows; w += gridDim.y) {
    float* row = frames + (s.row + w) * (long long)nfft;
    long long start = w * (long long)step - offset;
    for (int t = blockIdx.x * blockDim.x + threadIdx.x; t < nfft; t += gridDim.x * blockDim.x) {
      float v = 0.f;
      if (t < window_length) {
        long long i = start + t;
        if (i >= 0 && i < s.length) {
          v = __fmul_rn(window[t], in[i]);
        } else if (reflect) {
          v = __fmul_rn(window[t], in[reflect101(i, s.length)]);
        }
      }
      row[t] = v;
    }
  }
}

__device__ __forceinline__ float spectrum_value(Complex64 c, int power) {
  float squared = __fadd_rn(__fmul_rn(c.re, c.re), __fmul_rn(c.im, c.im));
  return power == 2 ? squared : __fsqrt_rn(squared);
}

// "ft": out[b, w] of each sample, through 32 x 32 tiles (reads along bins, writes along windows).
// grid: (window tiles, bin tiles (strided), samples), block (32, 8).
extern "C" __global__ void spectrum_ft(const WindowSample* samples, const Complex64* spectrum, int bins, int power) {
  __shared__ float tile[32][33];
  const WindowSample s = samples[blockIdx.z];
  const long long w0 = (long long)blockIdx.x * 32;
  if (w0 >= s.windows) return;  // the whole block: no thread reaches a barrier
  float* out = (float*)s.out;
  for (int b0 = blockIdx.y * 32; b0 < bins; b0 += gridDim.y * 32) {  // uniform over the block
    for (int j = threadIdx.y; j < 32; j += blockDim.y) {
      long long w = w0 + j;
      int b = b0 + threadIdx.x;
      float v = 0.f;
      if (w < s.windows && b < bins) v = spectrum_value(spectrum[(s.row + w) * bins + b], power);
      tile[j][threadIdx.x] = v;
    }
    __syncthreads();
    for (int j = threadIdx.y; j < 32; j += blockDim.y) {
      int b = b0 + j;
      long long w = w0 + threadIdx.x;
      if (b < bins && w < s.windows) out[(long long)b * s.windows + w] = tile[threadIdx.x][j];
    }
    __syncthreads();
  }
}

// "tf": out[w, b]. grid: (bin tiles, window tiles (strided), samples), block (32, 8).
extern "C" __global__ void spectrum_tf(const WindowSample* samples, const Complex64* spectrum, int bins, int power) {
  const WindowSample s = samples[blockIdx.z];
  int b = blockIdx.x * blockDim.x + threadIdx.x;
  if (b >= bins) return;
  float* out = (float*)s.out;
  for (long long w = (long long)blockIdx.y * blockDim.y + threadIdx.y; w < s.windows;
       w += (long long)gridDim.y * blockDim.y) {
    out[w * bins + b] = spectrum_value(spectrum[(s.row + w) * bins + b], power);
  }
}

// out[o, r, i] = scale[r] * sum_{lo[r] <= k < hi[r]} table[r, k] * in[o, k, i], k ascending.
// grid: (element blocks (strided), samples).
extern "C" __global__ void apply_rows(const MatrixSample* samples) {
  const MatrixSample s = samples[blockIdx.y];
  const long long total = s.outer * s.rows * s.inner;
  const float* in = (const float*)s.in;
  const float* table = (const float*)s.table;
  const int* bounds = (const int*)s.bounds;
  const float* scale = (const float*)s.scale;
  float* out = (float*)s.out;
  for (long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x; e < total;
       e += (long long)gridDim.x * blockDim.x) {
    long long i = e % s.inner;
    long long q = e / s.inner;
    int r = (int)(q % s.rows);
    long long o = q / s.rows;
    const float* w = table + (long long)r * s.n;
    const float* x = in + o * s.n * s.inner + i;
    float acc = 0.f;
    for (int k = bounds[2 * r], hi = bounds[2 * r + 1]; k < hi; k++) {
      acc = __fadd_rn(acc, __fmul_rn(w[k], x[(long long)k * s.inner]));
    }
    if (scale) acc = __fmul_rn(acc, scale[r]);
    out[e] = acc;
  }
}

// inverse[i] = 1 / max(0, max of sample i) as DALI rounds it (double division, exactly 1 for 1); a block per
// sample, blockDim.x == 256.
extern "C" __global__ void sample_inverse_reference(const DecibelSample* samples, float* inverse) {
  __shared__ float part[256];
  const DecibelSample s = samples[blockIdx.x];
  const float* in = (const float*)s.in;
  float m = 0.f;
  for (long long e = threadIdx.x; e < s.size; e += blockDim.x) {
    float v = in[e];
    if (v > m) m = v;  // false for NaN: skipped
  }
  part[threadIdx.x] = m;
  __syncthreads();
  for (int half = blockDim.x / 2; half > 0; half >>= 1) {
    if (threadIdx.x < half) part[threadIdx.x] = fmaxf(part[threadIdx.x], part[threadIdx.x + half]);
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    float r = part[0];
    inverse[blockIdx.x] = r == 1.f ? 1.f : (float)(1.0 / (double)r);
  }
}

// out = scale * log2(max(min_ratio, x * inverse)); a NaN ratio (0 * inf) gives min_ratio, as std::max in DALI.
// grid: (element blocks (strided), samples).
extern "C" __global__ void decibels(const DecibelSample* samples, const float* inverse, float scale,
                                    float min_ratio) {
  const DecibelSample s = samples[blockIdx.y];
  const float inv = inverse[blockIdx.y];
  const float* in = (const float*)s.in;
  float* out = (float*)s.out;
  for (long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x; e < s.size;
       e += (long long)gridDim.x * blockDim.x) {
    float ratio = __fmul_rn(in[e], inv);
    out[e] = __fmul_rn(scale, log2f(fmaxf(min_ratio, ratio)));
  }
}
