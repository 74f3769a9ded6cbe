// STREAM triad: a = b + s*c, one element per work-item.
__kernel void triad(const uint n, const float s, __global float *a,
                    __global const float *b, __global const float *c)
{
    const uint i = get_global_id(0);
    if (i < n)
        a[i] = b[i] + s * c[i];
}
