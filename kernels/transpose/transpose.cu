// Matrix transpose of 32-bit words: out[c][r] = in[r][c], in is rows x cols (row-major).
//
// Both kernels use the same launch geometry (after Harris, "An Efficient Matrix Transpose in
// CUDA C/C++"): one 32x32 tile per block, 32x8 threads, each thread moving 4 elements.
// They differ only in how the tile reaches global memory:
//   transpose_naive_32x8   reads rows (coalesced), writes columns: a warp's store touches 32
//                          rows of `out`, i.e. 32 separate 32-byte sectors for 128 useful bytes.
//   transpose_tiled_32x33  stages the tile in shared memory so that both the load and the store
//                          walk along rows; the tile is padded to 33 columns so that reading a
//                          tile column hits 32 different banks (address 33*i + j, bank (i + j) % 32).
// Elements are treated as opaque 32-bit words, so float32 and int32 share the code.
// Standalone: compiles with `nvcc -arch=sm_90 -cubin` and with NVRTC (no #include).

#define TILE 32
#define BLOCK_ROWS 8

extern "C" __global__ void __launch_bounds__(TILE * BLOCK_ROWS)
transpose_tiled_32x33(const unsigned int* __restrict__ in, unsigned int* __restrict__ out,
                      int rows, int cols)
{
    __shared__ unsigned int tile[TILE][TILE + 1];

    // Load: thread (tx, ty) reads in[y + j][x] for j = 0, 8, 16, 24; x runs along a row.
    int x = blockIdx.x * TILE + threadIdx.x;  // input column
    int y = blockIdx.y * TILE + threadIdx.y;  // input row
#pragma unroll
    for (int j = 0; j < TILE; j += BLOCK_ROWS) {
        if (x < cols && y + j < rows) {
            tile[threadIdx.y + j][threadIdx.x] = in[(long long)(y + j) * cols + x];
        }
    }
    __syncthreads();

    // Store: the block's output tile sits at (blockIdx.x, blockIdx.y) swapped; x again runs
    // along a row, now of `out`, and the tile is read down a column (conflict-free thanks to +1).
    x = blockIdx.y * TILE + threadIdx.x;  // output column == input row
    y = blockIdx.x * TILE + threadIdx.y;  // output row == input column
#pragma unroll
    for (int j = 0; j < TILE; j += BLOCK_ROWS) {
        if (x < rows && y + j < cols) {
            out[(long long)(y + j) * rows + x] = tile[threadIdx.x][threadIdx.y + j];
        }
    }
}

extern "C" __global__ void __launch_bounds__(TILE * BLOCK_ROWS)
transpose_naive_32x8(const unsigned int* __restrict__ in, unsigned int* __restrict__ out,
                     int rows, int cols)
{
    int x = blockIdx.x * TILE + threadIdx.x;  // input column == output row
    int y = blockIdx.y * TILE + threadIdx.y;  // input row == output column
#pragma unroll
    for (int j = 0; j < TILE; j += BLOCK_ROWS) {
        if (x < cols && y + j < rows) {
            out[(long long)x * rows + (y + j)] = in[(long long)(y + j) * cols + x];
        }
    }
}
