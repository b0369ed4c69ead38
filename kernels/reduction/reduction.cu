// Sum of a float32 vector in one launch, deterministic (no floating-point atomics).
//
// After Harris, "Optimizing Parallel Reduction in CUDA": many elements per thread (grid-stride),
// warp shuffles instead of shared-memory trees with __syncthreads, and a second pass over the
// block partials. The second pass runs in the last block to finish (an integer ticket taken with
// atomicAdd after a __threadfence), so the whole sum is one launch and the addition order is fixed
// by the grid size: bitwise the same on every call.
//
// Loads: the 16-byte-aligned body is read as float4 with the streaming hint (__ldcs: each byte is
// read once), UNROLL independent loads in flight per thread. The at most 3 unaligned head elements
// and 3 tail elements are added by the first threads.
// Standalone: compiles with `nvcc -arch=sm_90 -cubin` and with NVRTC (no #include).
// The Python emulation in reduction.py mirrors every addition below, in the same order.

#define BLOCK 256
#define UNROLL 4
#define MIN_BLOCKS_PER_SM 8
#define FULL_MASK 0xffffffffu

__device__ __forceinline__ float warp_sum(float v)
{
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) {
        v += __shfl_down_sync(FULL_MASK, v, offset);
    }
    return v;  // complete in lane 0 only
}

// Sum over the block, valid in thread 0. `scratch` holds BLOCK / 32 floats.
__device__ __forceinline__ float block_sum(float v, float* scratch)
{
    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
    v = warp_sum(v);
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = lane < BLOCK / 32 ? scratch[lane] : 0.0f;
        v = warp_sum(v);
    }
    return v;
}

extern "C" __global__ void __launch_bounds__(BLOCK, MIN_BLOCKS_PER_SM)
reduce_sum_f32(const float* __restrict__ x, long long n, int head,
               float* __restrict__ partials, unsigned int* __restrict__ ticket,
               float* __restrict__ out)
{
    __shared__ float scratch[BLOCK / 32];
    __shared__ bool is_last;

    const long long n4 = (n - head) / 4;            // float4s in the aligned body
    const long long tail0 = head + 4 * n4;          // first tail element
    const int tail = (int)(n - tail0);              // 0..3
    const float4* __restrict__ body = reinterpret_cast<const float4*>(x + head);
    const long long stride = (long long)gridDim.x * BLOCK;
    const long long gtid = (long long)blockIdx.x * BLOCK + threadIdx.x;

    float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    for (long long base = gtid; base < n4; base += UNROLL * stride) {
        float4 v[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
            const long long i = base + u * stride;
            v[u] = i < n4 ? __ldcs(body + i) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        }
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
            acc.x += v[u].x;
            acc.y += v[u].y;
            acc.z += v[u].z;
            acc.w += v[u].w;
        }
    }
    float s = (acc.x + acc.y) + (acc.z + acc.w);
    if (gtid < head) s += x[gtid];
    if (gtid < tail) s += x[tail0 + gtid];

    s = block_sum(s, scratch);
    if (threadIdx.x == 0) {
        partials[blockIdx.x] = s;
        __threadfence();                             // partial visible before the ticket
        is_last = atomicAdd(ticket, 1u) == gridDim.x - 1;
    }
    __syncthreads();
    if (!is_last) return;

    // Second pass, in the last block only: fixed order over the partials.
    __threadfence();
    const volatile float* p = partials;
    float t = 0.0f;
    for (unsigned int i = threadIdx.x; i < gridDim.x; i += BLOCK) t += p[i];
    t = block_sum(t, scratch);
    if (threadIdx.x == 0) out[0] = t;
}
