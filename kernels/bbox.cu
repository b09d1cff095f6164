// box_encoder on a whole batch: the samples' boxes packed into one [R, 4] ltrb array, `offsets` [N + 1] saying
// where each sample's rows start. The CPU kernel's matching (cpu/bbox_ops.py, _match_and_encode) in its float32
// operations and, with --fmad=false, its rounding: each box's best anchor (the last on ties) gets IoU 2, then each
// anchor takes its sample's best box (the last on ties) when that IoU is above `criteria`.

__device__ __forceinline__ float box_anchor_iou(const float* b, float box_area, const float* a) {
  float width = fminf(b[2], a[2]) - fmaxf(b[0], a[0]);
  float height = fminf(b[3], a[3]) - fmaxf(b[1], a[1]);
  if (!(width > 0.0f && height > 0.0f)) return 0.0f;
  float inter = width * height;
  float anchor_area = (a[2] - a[0]) * (a[3] - a[1]);
  return inter / ((box_area + anchor_area) - inter);
}

// One block per packed box: its best anchor (largest IoU, the last on ties).
extern "C" __global__ void box_best_anchor(const float* boxes, const float* anchors, int anchor_count,
                                           int* best_anchor) {
  __shared__ float values[256];
  __shared__ int at[256];
  const float* b = boxes + 4 * (long long)blockIdx.x;
  float box_area = (b[2] - b[0]) * (b[3] - b[1]);
  float best = -1.0f;
  int best_at = 0;
  for (int m = threadIdx.x; m < anchor_count; m += blockDim.x) {
    float value = box_anchor_iou(b, box_area, anchors + 4 * m);
    if (value >= best) {  // m grows: the last on ties
      best = value;
      best_at = m;
    }
  }
  values[threadIdx.x] = best;
  at[threadIdx.x] = best_at;
  __syncthreads();
  for (int step = blockDim.x / 2; step > 0; step /= 2) {
    if (threadIdx.x < step) {
      float other = values[threadIdx.x + step];
      int other_at = at[threadIdx.x + step];
      if (other > values[threadIdx.x] || (other == values[threadIdx.x] && other_at > at[threadIdx.x])) {
        values[threadIdx.x] = other;
        at[threadIdx.x] = other_at;
      }
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) best_anchor[blockIdx.x] = at[0];
}

// One thread per (anchor, sample = blockIdx.y): the anchor's best box of the sample, then its encoding. With
// `offset` the extents are log(be / ae) (logf: within the last bit of the CPU's numpy log).
extern "C" __global__ void box_match_encode(const float* boxes, const int* labels, const long long* offsets,
                                            const int* best_anchor, const float* anchors, int anchor_count,
                                            float criteria, int offset, float scale, const float* means,
                                            const float* stds, float* out, int* out_labels) {
  int m = blockIdx.x * blockDim.x + threadIdx.x;
  if (m >= anchor_count) return;
  int s = blockIdx.y;
  const float* a = anchors + 4 * m;
  float best = -1.0f;
  long long best_at = -1;
  for (long long n = offsets[s]; n < offsets[s + 1]; n++) {
    const float* b = boxes + 4 * n;
    float value = best_anchor[n] == m ? 2.0f : box_anchor_iou(b, (b[2] - b[0]) * (b[3] - b[1]), a);
    if (value >= best) {
      best = value;
      best_at = n;
    }
  }
  long long o = (long long)s * anchor_count + m;
  float* r = out + 4 * o;
  const float half = 0.5f;
  float ac0 = (a[0] + a[2]) * half, ac1 = (a[1] + a[3]) * half;
  if (best_at < 0 || !(best > criteria)) {
    out_labels[o] = 0;
    if (offset) {
      r[0] = r[1] = r[2] = r[3] = 0.0f;
    } else {
      r[0] = ac0;
      r[1] = ac1;
      r[2] = a[2] - a[0];
      r[3] = a[3] - a[1];
    }
    return;
  }
  const float* b = boxes + 4 * best_at;
  out_labels[o] = labels[best_at];
  float bc0 = (b[0] + b[2]) * half, bc1 = (b[1] + b[3]) * half;
  float be0 = b[2] - b[0], be1 = b[3] - b[1];
  if (!offset) {
    r[0] = bc0;
    r[1] = bc1;
    r[2] = be0;
    r[3] = be1;
    return;
  }
  float ae0 = (a[2] - a[0]) * scale, ae1 = (a[3] - a[1]) * scale;
  r[0] = ((bc0 * scale - ac0 * scale) / ae0 - means[0]) / stds[0];
  r[1] = ((bc1 * scale - ac1 * scale) / ae1 - means[1]) / stds[1];
  r[2] = (logf((be0 * scale) / ae0) - means[2]) / stds[2];
  r[3] = (logf((be1 * scale) / ae1) - means[3]) / stds[3];
}

// bb_flip of packed [R, 4] rows: flips[r] bit 0 mirrors row r horizontally, bit 1 vertically; on a flipped axis
// lo' = 1 - hi, hi' = 1 - lo. xyWH rows go through their corners, extents included ((y + h) - y is written back
// for h), as the CPU kernel's flip_boxes: every row, flipped or not.
extern "C" __global__ void bb_flip_rows(const float* rows, const unsigned char* flips, int ltrb, float* out,
                                        long long count) {
  long long r = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (r >= count) return;
  const float* b = rows + 4 * r;
  float lo[2] = {b[0], b[1]}, hi[2];
  if (ltrb) {
    hi[0] = b[2];
    hi[1] = b[3];
  } else {
    hi[0] = lo[0] + b[2];
    hi[1] = lo[1] + b[3];
  }
  unsigned char f = flips[r];
  for (int a = 0; a < 2; a++) {
    if (f & (1 << a)) {
      float l = lo[a];
      lo[a] = 1.0f - hi[a];
      hi[a] = 1.0f - l;
    }
  }
  float* o = out + 4 * r;
  o[0] = lo[0];
  o[1] = lo[1];
  o[2] = ltrb ? hi[0] : hi[0] - lo[0];
  o[3] = ltrb ? hi[1] : hi[1] - lo[1];
}
