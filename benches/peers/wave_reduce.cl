// Sub-group ("wave"/"warp") reduction: each sub-group reduces its values with
// sub_group_reduce_add, sub-group 0 combines the per-sub-group sums, and the
// group writes one partial sum. Same interface as reduce.cl.
//
// Sub-groups come from the cl_khr_subgroups extension or, on OpenCL C 3.0
// (build with -cl-std=CL3.0), the __opencl_c_subgroups feature. Where the
// device has neither (PoCL 3.1's CPU device, Oclgrind) the kernel falls back to
// the plain local-memory tree of reduce.cl.
#define GROUP_SIZE 256

#if defined(cl_khr_subgroups) || defined(__opencl_c_subgroups)
#define HAVE_SUBGROUPS
#endif
#ifdef cl_khr_subgroups
#pragma OPENCL EXTENSION cl_khr_subgroups : enable
#endif

__kernel __attribute__((reqd_work_group_size(GROUP_SIZE, 1, 1)))
void wave_reduce(const uint n, __global const float *in, __global float *partial)
{
    const uint i = get_global_id(0);
    float v = i < n ? in[i] : 0.0f;

#ifdef HAVE_SUBGROUPS
    __local float sums[GROUP_SIZE]; // one slot per sub-group
    const uint lane = get_sub_group_local_id();

    v = sub_group_reduce_add(v);
    if (lane == 0)
        sums[get_sub_group_id()] = v;
    barrier(CLK_LOCAL_MEM_FENCE);

    if (get_sub_group_id() == 0) {
        float t = 0.0f;
        for (uint s = lane; s < get_num_sub_groups(); s += get_sub_group_size())
            t += sums[s];
        t = sub_group_reduce_add(t);
        if (lane == 0)
            partial[get_group_id(0)] = t;
    }
#else
    __local float scratch[GROUP_SIZE];
    const uint lid = get_local_id(0);

    scratch[lid] = v;
    barrier(CLK_LOCAL_MEM_FENCE);

    for (uint stride = GROUP_SIZE / 2; stride > 0; stride >>= 1) {
        if (lid < stride)
            scratch[lid] += scratch[lid + stride];
        barrier(CLK_LOCAL_MEM_FENCE);
    }

    if (lid == 0)
        partial[get_group_id(0)] = scratch[0];
#endif
}
