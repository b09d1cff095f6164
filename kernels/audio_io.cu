// audio_resample on a batch of float32 (samples, channels) signals of any lengths (blockIdx.y = sample): DALI's CPU
// resampler, one thread per output value (frame, channel), every step in the CPU kernel's float32 order
// (headrace_kernels.cpu.audio_io_ops._resample): the input position restarts from a float64 product every 256
// output frames and adds the float32 step frame by frame; a mono signal sums its taps in four lanes combined as
// (l0 + l2) + (l1 + l3), then the rest one by one; more channels sum their taps in order. The window's weight of a
// tap at distance x is the lookup table interpolated at x * wscale + wcenter. Compiled with --fmad=false, so each
// product and sum rounds as on the CPU: the results equal the CPU kernel's.

struct ResampleSample {
  unsigned long long in;   // float, n_in x channels, contiguous
  unsigned long long out;  // float, n_out x channels, contiguous
  long long n_in, n_out;
  double scale;            // in_rate / out_rate
  int channels, pad;
};

__device__ __forceinline__ float window_weight(const float* table, float wscale, float wcenter, float x) {
  float fi = x * wscale + wcenter;
  float below = floorf(fi);
  int i = (int)below;
  float di = fi - below;
  return table[i] + di * (table[i + 1] - table[i]);
}

extern "C" __global__ void resample(const ResampleSample* samples, const float* table, int lobes, float wscale,
                                    float wcenter) {
  const ResampleSample s = samples[blockIdx.y];
  const long long total = s.n_out * s.channels;
  const float* in = (const float*)s.in;
  float* out = (float*)s.out;
  const float fscale = (float)s.scale;
  for (long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x; e < total;
       e += (long long)gridDim.x * blockDim.x) {
    const long long frame = e / s.channels;
    const int c = (int)(e - frame * s.channels);
    const long long block = frame - frame % 256;
    const double in_block_f = (double)block * s.scale;
    const long long base = (long long)floor(in_block_f);
    float in_pos = (float)(in_block_f - (double)base);
    for (long long k = block; k < frame; ++k) in_pos = in_pos + fscale;
    const long long xc = (long long)ceilf(in_pos);
    long long i0 = xc - lobes, i1 = xc + lobes;
    if (i0 < -base) i0 = -base;
    if (i1 > s.n_in - base) i1 = s.n_in - base;
    float result;
    if (s.channels == 1) {
      float f0 = 0.f, f1 = 0.f, f2 = 0.f, f3 = 0.f;
      long long i = i0;
      float x0 = (float)i - in_pos, x1 = (float)(i + 1) - in_pos;
      float x2 = (float)(i + 2) - in_pos, x3 = (float)(i + 3) - in_pos;
      for (; i + 3 < i1; i += 4) {
        const float* p = in + base + i;
        f0 = f0 + p[0] * window_weight(table, wscale, wcenter, x0);
        f1 = f1 + p[1] * window_weight(table, wscale, wcenter, x1);
        f2 = f2 + p[2] * window_weight(table, wscale, wcenter, x2);
        f3 = f3 + p[3] * window_weight(table, wscale, wcenter, x3);
        x0 = x0 + 4.f;
        x1 = x1 + 4.f;
        x2 = x2 + 4.f;
        x3 = x3 + 4.f;
      }
      result = (f0 + f2) + (f1 + f3);
      float x = (float)i - in_pos;
      for (; i < i1; ++i) {
        result = result + in[base + i] * window_weight(table, wscale, wcenter, x);
        x = x + 1.f;
      }
    } else {
      result = 0.f;
      float x = (float)i0 - in_pos;
      for (long long i = i0; i < i1; ++i) {
        result = result + in[(base + i) * s.channels + c] * window_weight(table, wscale, wcenter, x);
        x = x + 1.f;
      }
    }
    out[e] = result;
  }
}
