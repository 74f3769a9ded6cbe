// Local-memory tree reduction: each group of 256 work-items sums its 256
// elements and writes one partial sum; the host adds the partial sums.
#define GROUP_SIZE 256

__kernel __attribute__((reqd_work_group_size(GROUP_SIZE, 1, 1)))
void reduce(const uint n, __global const float *in, __global float *partial)
{
    __local float scratch[GROUP_SIZE];
    const uint lid = get_local_id(0);
    const uint i = get_global_id(0);

    scratch[lid] = i < n ? in[i] : 0.0f;
    barrier(CLK_LOCAL_MEM_FENCE);

    for (uint stride = GROUP_SIZE / 2; stride > 0; stride >>= 1) {
        if (lid < stride)
            scratch[lid] += scratch[lid + stride];
        barrier(CLK_LOCAL_MEM_FENCE);
    }

    if (lid == 0)
        partial[get_group_id(0)] = scratch[0];
}
