/* STREAM copy, triad and saxpy in C with OpenMP: the CPU's bandwidth limit for the streaming
 * kernels of `xpu bench cpu` and `cargo bench --bench cpu` (issue 21).
 *
 * Built by the benchmark with `gcc -O3 -march=native -fopenmp`; run with OMP_NUM_THREADS set to
 * the threads xpu uses. Each kernel runs twice: with plain stores (`"nt": false`) and with
 * non-temporal stores (`"nt": true`, the x86 streaming-store intrinsics, printed only where
 * the compiler targets AVX-512 or AVX).
 *
 * Usage: stream N REPS. Prints one JSON object per kernel and store kind on stdout:
 *   {"peer": "stream", "kernel": "triad", "nt": true, "n": N, "threads": T,
 *    "median_s": ..., "gbps": ...}
 * Bytes moved per element: copy 8, triad 12, saxpy 12 (as STREAM counts: no write-allocate).
 * The arrays are first touched in parallel with the same static schedule as the kernels, so
 * each thread's pages are local to it. */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if defined(__AVX512F__) || defined(__AVX__)
#include <immintrin.h>
#define HAVE_NT 1
#else
#define HAVE_NT 0
#endif

static float *alloc(size_t n) {
  void *p = NULL;
  if (posix_memalign(&p, 64, n * sizeof(float)) != 0) {
    fprintf(stderr, "stream: cannot allocate %zu floats\n", n);
    exit(1);
  }
  return p;
}

/* Each thread's [lo, hi) under a static schedule, split on 16-float (64-byte) lines. */
static void range(size_t n, size_t *lo, size_t *hi) {
  size_t t = (size_t)omp_get_thread_num(), nt = (size_t)omp_get_num_threads();
  size_t lines = (n + 15) / 16;
  size_t per = (lines + nt - 1) / nt;
  *lo = t * per * 16;
  *hi = (t + 1) * per * 16;
  if (*lo > n) *lo = n;
  if (*hi > n) *hi = n;
}

static void copy(float *restrict y, const float *restrict x, size_t n, int nt) {
#pragma omp parallel
  {
    size_t lo, hi, i;
    range(n, &lo, &hi);
    i = lo;
#if HAVE_NT
    if (nt) {
#if defined(__AVX512F__)
      for (; i + 16 <= hi; i += 16) _mm512_stream_ps(y + i, _mm512_load_ps(x + i));
#else
      for (; i + 8 <= hi; i += 8) _mm256_stream_ps(y + i, _mm256_load_ps(x + i));
#endif
    }
#endif
#pragma omp simd
    for (size_t j = i; j < hi; j++) y[j] = x[j];
  }
}

static void triad(float *restrict a, const float *restrict b, const float *restrict c, float s,
                  size_t n, int nt) {
#pragma omp parallel
  {
    size_t lo, hi, i;
    range(n, &lo, &hi);
    i = lo;
#if HAVE_NT
    if (nt) {
#if defined(__AVX512F__)
      __m512 sv = _mm512_set1_ps(s);
      for (; i + 16 <= hi; i += 16)
        _mm512_stream_ps(a + i, _mm512_add_ps(_mm512_load_ps(b + i),
                                              _mm512_mul_ps(sv, _mm512_load_ps(c + i))));
#else
      __m256 sv = _mm256_set1_ps(s);
      for (; i + 8 <= hi; i += 8)
        _mm256_stream_ps(a + i, _mm256_add_ps(_mm256_load_ps(b + i),
                                              _mm256_mul_ps(sv, _mm256_load_ps(c + i))));
#endif
    }
#endif
#pragma omp simd
    for (size_t j = i; j < hi; j++) a[j] = b[j] + s * c[j];
  }
}

static void saxpy(float *restrict y, const float *restrict x, float s, size_t n, int nt) {
#pragma omp parallel
  {
    size_t lo, hi, i;
    range(n, &lo, &hi);
    i = lo;
#if HAVE_NT
    if (nt) {
#if defined(__AVX512F__)
      __m512 sv = _mm512_set1_ps(s);
      for (; i + 16 <= hi; i += 16)
        _mm512_stream_ps(y + i, _mm512_add_ps(_mm512_mul_ps(sv, _mm512_load_ps(x + i)),
                                              _mm512_load_ps(y + i)));
#else
      __m256 sv = _mm256_set1_ps(s);
      for (; i + 8 <= hi; i += 8)
        _mm256_stream_ps(y + i, _mm256_add_ps(_mm256_mul_ps(sv, _mm256_load_ps(x + i)),
                                              _mm256_load_ps(y + i)));
#endif
    }
#endif
#pragma omp simd
    for (size_t j = i; j < hi; j++) y[j] = s * x[j] + y[j];
  }
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int main(int argc, char **argv) {
  size_t n = argc > 1 ? strtoull(argv[1], NULL, 10) : (64u << 20);
  int reps = argc > 2 ? atoi(argv[2]) : 5;
  if (reps < 1) reps = 1;
  float *a = alloc(n), *b = alloc(n), *c = alloc(n);
#pragma omp parallel
  {
    size_t lo, hi;
    range(n, &lo, &hi);
    for (size_t j = lo; j < hi; j++) {
      a[j] = 1.0f;
      b[j] = 2.0f;
      c[j] = 0.5f;
    }
  }
  double *t = malloc(sizeof(double) * (size_t)reps);
  const char *names[3] = {"copy", "triad", "saxpy"};
  const double bytes[3] = {8.0, 12.0, 12.0};
  for (int k = 0; k < 3; k++) {
    for (int nt = 0; nt <= HAVE_NT; nt++) {
      for (int r = -1; r < reps; r++) {
        double t0 = omp_get_wtime();
        if (k == 0) copy(a, b, n, nt);
        else if (k == 1) triad(a, b, c, 3.0f, n, nt);
        else saxpy(a, b, 0.5f, n, nt);
        double dt = omp_get_wtime() - t0;
        if (r >= 0) t[r] = dt;
      }
      qsort(t, (size_t)reps, sizeof(double), cmp);
      double med = t[reps / 2];
      printf("{\"peer\": \"stream\", \"kernel\": \"%s\", \"nt\": %s, \"n\": %zu, \"threads\": %d, "
             "\"median_s\": %.9f, \"gbps\": %.4f}\n",
             names[k], nt ? "true" : "false", n, omp_get_max_threads(), med,
             bytes[k] * (double)n / med / 1e9);
      fflush(stdout);
    }
  }
  /* Keep the results observable. */
  double sum = 0;
  for (size_t j = 0; j < n; j += 4096) sum += a[j];
  fprintf(stderr, "stream: checksum %g\n", sum);
  free(a);
  free(b);
  free(c);
  free(t);
  return 0;
}
