// Mandelbrot: one pixel per work-item; writes the escape iteration count
// (max_iter for points that never escape). Pixel (px, py) maps to the point
// (x0 + px*dx, y0 + py*dy).
__kernel void mandelbrot(const uint width, const uint height,
                         const float x0, const float y0,
                         const float dx, const float dy,
                         const uint max_iter, __global uint *out)
{
    const uint px = get_global_id(0), py = get_global_id(1);
    if (px >= width || py >= height)
        return;

    const float cr = x0 + px * dx, ci = y0 + py * dy;
    float zr = 0.0f, zi = 0.0f;
    uint it = 0;
    while (it < max_iter && zr * zr + zi * zi <= 4.0f) {
        const float t = zr * zr - zi * zi + cr;
        zi = 2.0f * zr * zi + ci;
        zr = t;
        ++it;
    }
    out[py * width + px] = it;
}
