// Single-pass inclusive prefix sum of int32 with decoupled look-back
// (Merrill & Garland, "Single-pass Parallel Prefix Scan with Decoupled Look-back", NVR-2016-002).
//
// One block per partition of TILE = BLOCK * ITEMS elements. Per block:
//   1. take a partition index from a global counter (atomicAdd): partitions start in launch order,
//      so every partition a block waits on already belongs to a running block (no deadlock even
//      though blocks are not scheduled in blockIdx order);
//   2. load the partition (coalesced int4, staged in padded shared memory), give each thread ITEMS
//      consecutive elements, and scan the per-thread sums across the block (warp shuffles);
//   3. publish the partition's aggregate (flag A), then warp 0 looks back over the descriptors of
//      the preceding partitions, 32 at a time: it adds aggregates (A) until it meets an inclusive
//      prefix (P), waiting only while a descriptor it needs is still invalid (X);
//   4. publish this partition's inclusive prefix (flag P) and write the scanned partition.
// A descriptor is one 64-bit word, flag in the high half and value in the low half, written and
// read with single volatile 64-bit accesses: a reader never sees a flag without its value, so no
// fence is needed between value and flag. The scratch words (counter + descriptors) must be zero
// (all X) at launch. Integer addition wraps, as torch.cumsum's int32 addition does.
// Standalone: compiles with `nvcc -arch=sm_90 -cubin` and with NVRTC (no #include).

#define BLOCK 256
#define ITEMS 16
#define TILE (BLOCK * ITEMS)
#define WARPS (BLOCK / 32)
#define MIN_BLOCKS_PER_SM 6   // 40 registers: 6 x 256 threads per SM; 8 would spill
#define FULL_MASK 0xffffffffu
#define FLAG_X 0u
#define FLAG_A 1u
#define FLAG_P 2u

__device__ __forceinline__ int padded(int i) { return i + (i >> 5); }  // one word per 32

__device__ __forceinline__ unsigned long long pack(unsigned int flag, int value)
{
    return ((unsigned long long)flag << 32) | (unsigned int)value;
}

__device__ __forceinline__ void publish(unsigned long long* desc, unsigned int flag, int value)
{
    *(volatile unsigned long long*)desc = pack(flag, value);
}

// Exclusive prefix of partition `pid` (> 0), computed by all 32 lanes of one warp.
__device__ int look_back(const unsigned long long* desc, long long pid)
{
    const int lane = threadIdx.x & 31;
    int exclusive = 0;
    for (long long end = pid - 1;; end -= 32) {
        const long long idx = end - lane;            // lane 0 is the nearest predecessor
        unsigned long long d;
        unsigned int pmask, upto;
        for (;;) {
            // Partition 0 always publishes P, so lanes before it (idx < 0) are never summed.
            d = idx >= 0 ? *(const volatile unsigned long long*)(desc + idx) : pack(FLAG_P, 0);
            const unsigned int flag = (unsigned int)(d >> 32);
            pmask = __ballot_sync(FULL_MASK, flag == FLAG_P);
            const unsigned int xmask = __ballot_sync(FULL_MASK, flag == FLAG_X);
            // Lanes up to and including the nearest P matter; all 32 if there is none.
            upto = pmask ? (((pmask & (0u - pmask)) << 1) - 1u) : FULL_MASK;
            if ((xmask & upto) == 0) break;
        }
        int v = (upto >> lane) & 1u ? (int)(unsigned int)d : 0;
#pragma unroll
        for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(FULL_MASK, v, offset);
        exclusive += v;
        if (pmask) return exclusive;
    }
}

extern "C" __global__ void __launch_bounds__(BLOCK, MIN_BLOCKS_PER_SM)
scan_lookback_i32(const int* __restrict__ x, int* __restrict__ y, long long n,
                  unsigned long long* __restrict__ scratch, int vector_ok)
{
    __shared__ int tile[TILE + TILE / 32];
    __shared__ int warp_total[WARPS];
    __shared__ int prefix;
    __shared__ long long partition;

    unsigned long long* desc = scratch + 1;
    if (threadIdx.x == 0) partition = atomicAdd((unsigned int*)scratch, 1u);
    __syncthreads();
    const long long pid = partition;
    const long long base = pid * TILE;
    const bool full = vector_ok && base + TILE <= n;

    // 1. Load, striped and coalesced, into padded shared memory.
    if (full) {
        const int4* src = reinterpret_cast<const int4*>(x + base);
#pragma unroll
        for (int k = 0; k < ITEMS / 4; ++k) {
            const int q = k * BLOCK + threadIdx.x;
            const int4 v = __ldcs(src + q);
            tile[padded(4 * q + 0)] = v.x;
            tile[padded(4 * q + 1)] = v.y;
            tile[padded(4 * q + 2)] = v.z;
            tile[padded(4 * q + 3)] = v.w;
        }
    } else {
#pragma unroll
        for (int k = 0; k < ITEMS; ++k) {
            const int i = k * BLOCK + threadIdx.x;
            tile[padded(i)] = base + i < n ? x[base + i] : 0;
        }
    }
    __syncthreads();

    // 2. Thread-local sequential sum over ITEMS consecutive elements, then a block-wide scan.
    int items[ITEMS];
    int thread_sum = 0;
#pragma unroll
    for (int k = 0; k < ITEMS; ++k) {
        items[k] = tile[padded(threadIdx.x * ITEMS + k)];
        thread_sum += items[k];
    }
    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
    int inclusive = thread_sum;
#pragma unroll
    for (int offset = 1; offset < 32; offset <<= 1) {
        const int up = __shfl_up_sync(FULL_MASK, inclusive, offset);
        if (lane >= offset) inclusive += up;
    }
    if (lane == 31) warp_total[warp] = inclusive;
    __syncthreads();
    int warp_prefix = 0, aggregate = 0;
#pragma unroll
    for (int w = 0; w < WARPS; ++w) {
        warp_prefix += w < warp ? warp_total[w] : 0;
        aggregate += warp_total[w];
    }

    // 3. Decoupled look-back, by warp 0.
    if (warp == 0) {
        int exclusive = 0;
        if (pid == 0) {
            if (lane == 0) publish(desc, FLAG_P, aggregate);
        } else {
            if (lane == 0) publish(desc + pid, FLAG_A, aggregate);
            exclusive = look_back(desc, pid);
            if (lane == 0) publish(desc + pid, FLAG_P, exclusive + aggregate);
        }
        if (lane == 0) prefix = exclusive;
    }
    __syncthreads();

    // 4. Scan the thread's items into its own slots of the tile, then store striped.
    int running = prefix + warp_prefix + inclusive - thread_sum;
#pragma unroll
    for (int k = 0; k < ITEMS; ++k) {
        running += items[k];
        tile[padded(threadIdx.x * ITEMS + k)] = running;
    }
    __syncthreads();
    if (full) {
        int4* dst = reinterpret_cast<int4*>(y + base);
#pragma unroll
        for (int k = 0; k < ITEMS / 4; ++k) {
            const int q = k * BLOCK + threadIdx.x;
            const int4 v = make_int4(tile[padded(4 * q + 0)], tile[padded(4 * q + 1)],
                                     tile[padded(4 * q + 2)], tile[padded(4 * q + 3)]);
            __stcs(dst + q, v);
        }
    } else {
#pragma unroll
        for (int k = 0; k < ITEMS; ++k) {
            const int i = k * BLOCK + threadIdx.x;
            if (base + i < n) y[base + i] = tile[padded(i)];
        }
    }
}
