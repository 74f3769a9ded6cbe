// Streaming kernel shapes on one GPU, to find which shape reaches a device copy's bandwidth
// (issue #5's 0.9x DtoD target). Each is saxpy, y = a*x + y, over n floats. Run by shapes.py.

// One element per thread: the shape xpu's IR kernel has (and bench.rs's peer).
extern "C" __global__ void saxpy_1(float *y, const float *x, float a, unsigned n) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}

// One element per thread, streaming cache hints (evict-first) on loads and the store.
extern "C" __global__ void saxpy_cs(float *y, const float *x, float a, unsigned n) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) __stcs(y + i, a * __ldcs(x + i) + __ldcs(y + i));
}

// One element per thread; loads ask L2 to fetch 256-byte blocks (a prefetch of the neighbour line).
__device__ __forceinline__ float ld_l2_256(const float *p) {
    float v;
    asm volatile("ld.global.L2::256B.f32 %0, [%1];" : "=f"(v) : "l"(p));
    return v;
}
extern "C" __global__ void saxpy_l2(float *y, const float *x, float a, unsigned n) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * ld_l2_256(x + i) + ld_l2_256(y + i);
}

// C consecutive blocks' worth of elements per thread (block-strided, so each load is still
// coalesced), every load issued before any store: C times the bytes in flight per thread.
template <int C>
__device__ void saxpy_coarse(float *__restrict__ y, const float *__restrict__ x, float a, unsigned n) {
    unsigned base = blockIdx.x * blockDim.x * C + threadIdx.x;
    float xv[C], yv[C];
#pragma unroll
    for (int c = 0; c < C; ++c) {
        unsigned i = base + c * blockDim.x;
        if (i < n) { xv[c] = x[i]; yv[c] = y[i]; }
    }
#pragma unroll
    for (int c = 0; c < C; ++c) {
        unsigned i = base + c * blockDim.x;
        if (i < n) y[i] = a * xv[c] + yv[c];
    }
}
extern "C" __global__ void saxpy_c2(float *y, const float *x, float a, unsigned n) { saxpy_coarse<2>(y, x, a, n); }
extern "C" __global__ void saxpy_c4(float *y, const float *x, float a, unsigned n) { saxpy_coarse<4>(y, x, a, n); }
extern "C" __global__ void saxpy_c8(float *y, const float *x, float a, unsigned n) { saxpy_coarse<8>(y, x, a, n); }

// Coarsened as the C loop written plainly (no restrict, no hoisting): what a backend gets by
// wrapping the body in a loop without proving independence.
extern "C" __global__ void saxpy_loop4(float *y, const float *x, float a, unsigned n) {
    unsigned base = blockIdx.x * blockDim.x * 4 + threadIdx.x;
    for (int c = 0; c < 4; ++c) {
        unsigned i = base + c * blockDim.x;
        if (i < n) y[i] = a * x[i] + y[i];
    }
}

// 16-byte vectors: 4 consecutive elements per thread (n a multiple of 4 here).
extern "C" __global__ void saxpy_v4(float4 *y, const float4 *x, float a, unsigned n4) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n4) {
        float4 xv = x[i], yv = y[i];
        y[i] = make_float4(a * xv.x + yv.x, a * xv.y + yv.y, a * xv.z + yv.z, a * xv.w + yv.w);
    }
}

// Grid-stride loop over a grid that just fills the machine.
extern "C" __global__ void saxpy_gs(float *__restrict__ y, const float *__restrict__ x, float a, unsigned n) {
    for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        y[i] = a * x[i] + y[i];
}

// Plain copies: one float per thread, and float4 per thread.
extern "C" __global__ void copy_1(float *y, const float *x, unsigned n) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i];
}
extern "C" __global__ void copy_v4(float4 *y, const float4 *x, unsigned n4) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n4) y[i] = x[i];
}
