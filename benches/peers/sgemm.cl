// Tiled SGEMM, C = A*B, square n x n row-major matrices, n a multiple of TILE.
// Each 16x16 group stages one tile of A and one of B in local memory per step.
#define TILE 16

__kernel __attribute__((reqd_work_group_size(TILE, TILE, 1)))
void sgemm(const uint n, __global const float *A, __global const float *B,
           __global float *C)
{
    __local float As[TILE][TILE];
    __local float Bs[TILE][TILE];
    const uint tx = get_local_id(0), ty = get_local_id(1);
    const uint col = get_global_id(0), row = get_global_id(1);
    float acc = 0.0f;

    for (uint t = 0; t < n; t += TILE) {
        As[ty][tx] = A[row * n + t + tx];
        Bs[ty][tx] = B[(t + ty) * n + col];
        barrier(CLK_LOCAL_MEM_FENCE);

        for (uint k = 0; k < TILE; ++k)
            acc += As[ty][k] * Bs[k][tx];
        barrier(CLK_LOCAL_MEM_FENCE);
    }

    C[row * n + col] = acc;
}
