// The peers of `xpu bench cuda`, in CUDA C++: the same saxpy, triad and tiled sgemm (64x64
// tiles, 16x16 threads, 4x4 outputs per thread) as src/cli/bench.rs, compiled by nvcc.
extern "C" __global__ void saxpy(float *y, const float *x, float a, unsigned n) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}

extern "C" __global__ void triad(float *a, const float *b, const float *c, float s, unsigned n) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) a[i] = b[i] + s * c[i];
}

extern "C" __global__ void __launch_bounds__(256) sgemm(float *c, const float *a, const float *b, unsigned n) {
    __shared__ float ta[1024];
    __shared__ float tb[1024];
    unsigned tx = threadIdx.x, ty = threadIdx.y, tid = ty * 16 + tx;
    float acc[16] = {0};
    for (unsigned t = 0; t < n; t += 16) {
        for (unsigned l = 0; l < 4; ++l) {
            unsigned e = tid + l * 256;
            ta[e] = a[(blockIdx.y * 64 + e / 16) * n + t + e % 16];
            tb[e] = b[(t + e / 64) * n + blockIdx.x * 64 + e % 64];
        }
        __syncthreads();
        for (unsigned kk = 0; kk < 16; ++kk)
            for (unsigned i = 0; i < 4; ++i) {
                float av = ta[(ty * 4 + i) * 16 + kk];
                for (unsigned j = 0; j < 4; ++j) acc[i * 4 + j] += av * tb[kk * 64 + tx * 4 + j];
            }
        __syncthreads();
    }
    for (unsigned i = 0; i < 4; ++i)
        for (unsigned j = 0; j < 4; ++j)
            c[(blockIdx.y * 64 + ty * 4 + i) * n + blockIdx.x * 64 + tx * 4 + j] = acc[i * 4 + j];
}

// The same sgemm with the multiply-add written out as fmaf(): built with -fmad=false it is
// fused exactly where written, so beside nvcc's default build of `sgemm` (which contracts
// `acc += av * b` on its own) it shows what explicit fma() in the kernel text reaches.
extern "C" __global__ void __launch_bounds__(256) sgemm_fma(float *c, const float *a, const float *b, unsigned n) {
    __shared__ float ta[1024];
    __shared__ float tb[1024];
    unsigned tx = threadIdx.x, ty = threadIdx.y, tid = ty * 16 + tx;
    float acc[16] = {0};
    for (unsigned t = 0; t < n; t += 16) {
        for (unsigned l = 0; l < 4; ++l) {
            unsigned e = tid + l * 256;
            ta[e] = a[(blockIdx.y * 64 + e / 16) * n + t + e % 16];
            tb[e] = b[(t + e / 64) * n + blockIdx.x * 64 + e % 64];
        }
        __syncthreads();
        for (unsigned kk = 0; kk < 16; ++kk)
            for (unsigned i = 0; i < 4; ++i) {
                float av = ta[(ty * 4 + i) * 16 + kk];
                for (unsigned j = 0; j < 4; ++j)
                    acc[i * 4 + j] = fmaf(av, tb[kk * 64 + tx * 4 + j], acc[i * 4 + j]);
            }
        __syncthreads();
    }
    for (unsigned i = 0; i < 4; ++i)
        for (unsigned j = 0; j < 4; ++j)
            c[(blockIdx.y * 64 + ty * 4 + i) * n + blockIdx.x * 64 + tx * 4 + j] = acc[i * 4 + j];
}
