/* The CPU compute kernels of `cargo bench --bench cpu` / `xpu bench cpu` in C with OpenMP, the
 * gcc peer (issue 21): built with `gcc -O3 -march=native -fopenmp`, run with OMP_NUM_THREADS
 * set to the threads xpu uses.
 *
 * - sgemm: C = A*B, square row-major n x n, the same 16x16 tiling as the xpu kernel (a tile of
 *   C per task, k in steps of 16 through 16x16 tiles of A and B copied to a local buffer), the
 *   inner loop over the tile's 16 columns `#pragma omp simd`;
 * - wave_reduce: partial[g] = the sum of inp[g*W .. g*W+W) in lane order of a W-wide tree
 *   (W = the xpu wave, an argument), over `#pragma omp parallel for simd`;
 * - mandelbrot: the escape count of each pixel of a width x height grid over [-2,1]x[-1.5,1.5],
 *   at most max_iter iterations, rows over threads, `#pragma omp simd` over a row.
 *
 * gcc's defaults apply: no -ffast-math (so the reduction is not reassociated beyond what is
 * written), and GNU C's -ffp-contract=fast (a*b+c may become an FMA).
 *
 * Usage: compute KERNEL SIZE REPS [W]   (KERNEL sgemm: SIZE = n; wave_reduce: SIZE = elements;
 * mandelbrot: SIZE = width = height). Prints one JSON object on stdout:
 *   {"peer": "gcc", "kernel": ..., "n": ..., "threads": T, "median_s": ..., "gflops" |
 *    "gbps" | "mpixels": ...}
 */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void *alloc(size_t bytes) {
  void *p = NULL;
  if (posix_memalign(&p, 64, bytes) != 0) {
    fprintf(stderr, "compute: cannot allocate %zu bytes\n", bytes);
    exit(1);
  }
  return p;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static void sgemm(unsigned n, const float *restrict a, const float *restrict b,
                  float *restrict c) {
  unsigned tiles = n / 16;
#pragma omp parallel for schedule(static)
  for (unsigned t = 0; t < tiles * tiles; t++) {
    unsigned by = t / tiles, bx = t % tiles;
    float ta[16][16], tb[16][16], acc[16][16];
    memset(acc, 0, sizeof acc);
    for (unsigned kt = 0; kt < tiles; kt++) {
      for (unsigned y = 0; y < 16; y++)
        for (unsigned x = 0; x < 16; x++) {
          ta[y][x] = a[(size_t)(by * 16 + y) * n + kt * 16 + x];
          tb[y][x] = b[(size_t)(kt * 16 + y) * n + bx * 16 + x];
        }
      for (unsigned y = 0; y < 16; y++)
        for (unsigned k = 0; k < 16; k++) {
          float av = ta[y][k];
#pragma omp simd
          for (unsigned x = 0; x < 16; x++) acc[y][x] = acc[y][x] + av * tb[k][x];
        }
    }
    for (unsigned y = 0; y < 16; y++)
      for (unsigned x = 0; x < 16; x++) c[(size_t)(by * 16 + y) * n + bx * 16 + x] = acc[y][x];
  }
}

static void wave_reduce(size_t n, unsigned w, const float *restrict inp, float *restrict partial) {
  size_t groups = (n + w - 1) / w;
#pragma omp parallel for simd schedule(static)
  for (size_t g = 0; g < groups; g++) {
    float s = 0.0f;
    for (unsigned l = 0; l < w; l++) {
      size_t i = g * w + l;
      s += i < n ? inp[i] : 0.0f;
    }
    partial[g] = s;
  }
}

static void mandelbrot(unsigned width, unsigned height, unsigned max_iter, unsigned *out) {
#pragma omp parallel for schedule(dynamic, 4)
  for (unsigned py = 0; py < height; py++) {
#pragma omp simd
    for (unsigned px = 0; px < width; px++) {
      float cr = -2.0f + 3.0f * (float)px / (float)width;
      float ci = -1.5f + 3.0f * (float)py / (float)height;
      float zr = 0.0f, zi = 0.0f;
      unsigned it = 0;
      while (it < max_iter && zr * zr + zi * zi <= 4.0f) {
        float t = zr * zr - zi * zi + cr;
        zi = 2.0f * zr * zi + ci;
        zr = t;
        it++;
      }
      out[(size_t)py * width + px] = it;
    }
  }
}

int main(int argc, char **argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: compute sgemm|wave_reduce|mandelbrot SIZE REPS [W]\n");
    return 2;
  }
  const char *k = argv[1];
  size_t size = strtoull(argv[2], NULL, 10);
  int reps = atoi(argv[3]);
  unsigned w = argc > 4 ? (unsigned)atoi(argv[4]) : 16;
  if (reps < 1) reps = 1;
  if (w < 1) w = 1;
  double *t = malloc(sizeof(double) * (size_t)reps);
  double check = 0, work = 0;
  const char *unit = "";
  if (strcmp(k, "sgemm") == 0) {
    unsigned n = (unsigned)size - (unsigned)size % 16;
    float *a = alloc((size_t)n * n * 4), *b = alloc((size_t)n * n * 4), *c = alloc((size_t)n * n * 4);
    for (size_t i = 0; i < (size_t)n * n; i++) {
      a[i] = (float)((i * 7) % 5) - 2.0f;
      b[i] = (float)((i * 3) % 7) - 3.0f;
    }
    for (int r = -1; r < reps; r++) {
      double t0 = omp_get_wtime();
      sgemm(n, a, b, c);
      if (r >= 0) t[r] = omp_get_wtime() - t0;
    }
    check = c[(size_t)n * n / 2 + n / 3];
    work = 2.0 * n * n * (double)n / 1e9;
    unit = "gflops";
    size = n;
    free(a), free(b), free(c);
  } else if (strcmp(k, "wave_reduce") == 0) {
    float *inp = alloc(size * 4), *partial = alloc(((size + w - 1) / w) * 4);
    for (size_t i = 0; i < size; i++) inp[i] = (float)(i % 17) * 0.25f;
    for (int r = -1; r < reps; r++) {
      double t0 = omp_get_wtime();
      wave_reduce(size, w, inp, partial);
      if (r >= 0) t[r] = omp_get_wtime() - t0;
    }
    check = partial[0];
    work = 4.0 * (double)size / 1e9;
    unit = "gbps";
    free(inp), free(partial);
  } else if (strcmp(k, "mandelbrot") == 0) {
    unsigned wh = (unsigned)size;
    unsigned *out = alloc((size_t)wh * wh * 4);
    for (int r = -1; r < reps; r++) {
      double t0 = omp_get_wtime();
      mandelbrot(wh, wh, 256, out);
      if (r >= 0) t[r] = omp_get_wtime() - t0;
    }
    check = out[(size_t)wh * wh / 2 + wh / 2];
    work = (double)wh * wh / 1e6;
    unit = "mpixels";
    free(out);
  } else {
    fprintf(stderr, "compute: unknown kernel %s\n", k);
    return 2;
  }
  qsort(t, (size_t)reps, sizeof(double), cmp);
  double med = t[reps / 2];
  printf("{\"peer\": \"gcc\", \"kernel\": \"%s\", \"n\": %zu, \"threads\": %d, \"median_s\": %.9f, "
         "\"%s\": %.4f}\n",
         k, size, omp_get_max_threads(), med, unit, work / med);
  fprintf(stderr, "compute: %s checksum %g\n", k, check);
  free(t);
  return 0;
}
