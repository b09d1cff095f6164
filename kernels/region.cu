// erase and paste on a batch of samples of any sizes: element copies of T (an unsigned type of the data's element
// size, so every element type is handled bit for bit), with fill values the host already converted to the type.

#define MAXD 8

struct EraseSample {
  unsigned long long in, out;
  long long size;          // elements
  int ndim;
  int shape[MAXD];
  int box_first, box_count;     // boxes: [begin, end) per dimension (2 * MAXD ints each), in the boxes array
  int fill_first, fill_count;   // fill values in the fills array: 1, or one per index of channel_axis
  int channel_axis;
};

template <typename T>
__global__ void erase_regions(const EraseSample* samples, const int* boxes, const T* fills) {
  const EraseSample s = samples[blockIdx.y];
  const T* in = (const T*)s.in;
  T* out = (T*)s.out;
  for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < s.size;
       e += (long long)gridDim.x * blockDim.x) {
    int index[MAXD];
    long long rest = e;
    for (int d = s.ndim - 1; d >= 0; d--) {
      index[d] = (int)(rest % s.shape[d]);
      rest /= s.shape[d];
    }
    bool inside = false;
    for (int b = 0; b < s.box_count && !inside; b++) {
      const int* box = boxes + (size_t)(s.box_first + b) * 2 * MAXD;
      inside = true;
      for (int d = 0; d < s.ndim; d++) {
        if (index[d] < box[2 * d] || index[d] >= box[2 * d + 1]) { inside = false; break; }
      }
    }
    if (inside) out[e] = fills[s.fill_first + (s.fill_count == 1 ? 0 : index[s.channel_axis])];
    else out[e] = in[e];
  }
}

struct PasteSample {
  unsigned long long in, out;
  int h, w, channels, out_h, out_w, top, left;
  int fill_first;               // `channels` fill values in the fills array
};

template <typename T>
__global__ void paste_canvas(const PasteSample* samples, const T* fills) {
  const PasteSample s = samples[blockIdx.z];
  int e = blockIdx.x * blockDim.x + threadIdx.x;  // x * channels + c
  int y = blockIdx.y * blockDim.y + threadIdx.y;
  if (e >= s.out_w * s.channels || y >= s.out_h) return;
  int x = e / s.channels, c = e - x * s.channels;
  int iy = y - s.top, ix = x - s.left;
  T v;
  if (iy >= 0 && ix >= 0 && iy < s.h && ix < s.w) v = ((const T*)s.in)[((size_t)iy * s.w + ix) * s.channels + c];
  else v = fills[s.fill_first + c];
  ((T*)s.out)[(size_t)y * s.out_w * s.channels + e] = v;
}
