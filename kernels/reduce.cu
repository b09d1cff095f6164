// Segmented reductions over a batch of differently shaped samples, in two launches whatever the batch size.
//
// Each sample is described by one ReduceSample record: its data (any strides), the extents and strides of the axes
// it keeps and of those it reduces (adjacent contiguous axes merged on the host), and where its outputs go.
// Pass 1 (reduce_partials): one warp per work item (output element, chunk of at most CHUNK reduced elements) for
// long reductions, or one thread per output element for short ones; each writes one partial in a fixed order
// (shuffle tree), so results do not depend on scheduling. Pass 2 (reduce_finish): one thread per output element
// combines its partials in order and applies the final step (mean, root, degrees of freedom).
// Accumulators: double for floats and for every mean, 64-bit integers for integer sums (as numpy), the data's own
// type for min / max (NaN propagates, as numpy).

#define MAX_DIMS 6
#define CHUNK 2048

struct ReduceSample {
    unsigned long long data;   // element pointer
    unsigned long long mean;   // double means, one per output (variance / std_dev), else 0
    long long out_offset;      // first output element of this sample in the batch's output buffer
    long long outputs;         // number of output elements
    long long count;           // reduced elements per output
    long long chunks;          // work items per output element
    long long work_offset;     // first work item of this sample
    int kept_ndim, red_ndim;
    long long kept_shape[MAX_DIMS], kept_stride[MAX_DIMS];
    long long red_shape[MAX_DIMS], red_stride[MAX_DIMS];
};

enum { OP_SUM = 0, OP_SUMSQ = 1, OP_MIN = 2, OP_MAX = 3, OP_SQDEV = 4 };
enum { FIN_NONE = 0, FIN_MEAN = 1, FIN_ROOT_MEAN = 2 };

__device__ __forceinline__ long long offset_of(long long index, int ndim, const long long* shape,
                                               const long long* stride) {
    long long offset = 0;
    for (int d = ndim - 1; d >= 0; --d) {
        long long extent = shape[d];
        offset += (index % extent) * stride[d];
        index /= extent;
    }
    return offset;
}

template <typename T, typename Acc, int OP>
struct Reducer {
    __device__ __forceinline__ static Acc load(T value, double mean) {
        if (OP == OP_SUMSQ) { double v = (double)value; return (Acc)(v * v); }
        if (OP == OP_SQDEV) { double v = (double)value - mean; return (Acc)(v * v); }
        return (Acc)value;
    }
    __device__ __forceinline__ static Acc combine(Acc a, Acc b) {
        if (OP == OP_MIN) { if (a != a) return a; if (b != b) return b; return b < a ? b : a; }
        if (OP == OP_MAX) { if (a != a) return a; if (b != b) return b; return b > a ? b : a; }
        return a + b;
    }
};

__device__ __forceinline__ int find_sample(const ReduceSample* samples, int n, long long item, bool by_output) {
    int lo = 0, hi = n - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        long long start = by_output ? samples[mid].out_offset : samples[mid].work_offset;
        if (start <= item) lo = mid; else hi = mid - 1;
    }
    return lo;
}

// Long reductions: one warp per (output, chunk); `items` work items in all.
template <typename T, typename Acc, int OP>
__global__ void reduce_warps(const ReduceSample* samples, int n, long long items, Acc* partials) {
    typedef Reducer<T, Acc, OP> R;
    const int lane = threadIdx.x & 31;
    long long warp = ((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    long long warps = ((long long)gridDim.x * blockDim.x) >> 5;
    for (long long item = warp; item < items; item += warps) {
        const ReduceSample& s = samples[find_sample(samples, n, item, false)];
        long long local = item - s.work_offset;
        long long output = local / s.chunks, chunk = local % s.chunks;
        const T* data = (const T*)s.data + offset_of(output, s.kept_ndim, s.kept_shape, s.kept_stride);
        double mean = s.mean ? ((const double*)s.mean)[output] : 0.0;
        long long begin = chunk * CHUNK;
        long long end = min(begin + CHUNK, s.count);
        long long first = begin + lane < end ? begin + lane : begin;
        Acc acc = R::load(data[offset_of(first, s.red_ndim, s.red_shape, s.red_stride)], mean);
        if (OP != OP_MIN && OP != OP_MAX && begin + lane >= end) acc = (Acc)0;
        for (long long r = begin + lane + 32; r < end; r += 32) {
            acc = R::combine(acc, R::load(data[offset_of(r, s.red_ndim, s.red_shape, s.red_stride)], mean));
        }
        for (int step = 16; step > 0; step >>= 1) {
            Acc other = __shfl_down_sync(0xffffffffu, acc, step);
            acc = R::combine(acc, other);
        }
        if (lane == 0) partials[item] = acc;
    }
}

// Short reductions: one thread per output element (chunks == 1 for every sample).
template <typename T, typename Acc, int OP>
__global__ void reduce_threads(const ReduceSample* samples, int n, long long items, Acc* partials) {
    typedef Reducer<T, Acc, OP> R;
    long long stride = (long long)gridDim.x * blockDim.x;
    for (long long item = (long long)blockIdx.x * blockDim.x + threadIdx.x; item < items; item += stride) {
        const ReduceSample& s = samples[find_sample(samples, n, item, false)];
        long long output = item - s.work_offset;
        const T* data = (const T*)s.data + offset_of(output, s.kept_ndim, s.kept_shape, s.kept_stride);
        double mean = s.mean ? ((const double*)s.mean)[output] : 0.0;
        Acc acc = R::load(data[offset_of(0, s.red_ndim, s.red_shape, s.red_stride)], mean);
        for (long long r = 1; r < s.count; ++r) {
            acc = R::combine(acc, R::load(data[offset_of(r, s.red_ndim, s.red_shape, s.red_stride)], mean));
        }
        partials[item] = acc;
    }
}

// Pass 2: partials of each output combined in chunk order, then the final step; `Out` is Acc or double.
template <typename Acc, typename Out, int OP, int FIN>
__global__ void reduce_finish(const ReduceSample* samples, int n, long long outputs, const Acc* partials,
                              Out* out, long long ddof) {
    typedef Reducer<Acc, Acc, OP == OP_MIN || OP == OP_MAX ? OP : OP_SUM> R;
    long long stride = (long long)gridDim.x * blockDim.x;
    for (long long o = (long long)blockIdx.x * blockDim.x + threadIdx.x; o < outputs; o += stride) {
        const ReduceSample& s = samples[find_sample(samples, n, o, true)];
        long long output = o - s.out_offset;
        const Acc* mine = partials + s.work_offset + output * s.chunks;
        Acc acc = mine[0];
        for (long long c = 1; c < s.chunks; ++c) acc = R::combine(acc, mine[c]);
        if (FIN == FIN_NONE) {
            out[o] = (Out)acc;
        } else {
            double value = (double)acc / (double)(s.count - ddof);
            out[o] = (Out)(FIN == FIN_ROOT_MEAN ? sqrt(value) : value);
        }
    }
}
