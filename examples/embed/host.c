/* A complete C host embedding luaptx: it loads the RMS norm kernel script,
 * launches it on its own buffers through DLPack, and checks every output
 * element against a double-precision reference computed here.
 *
 *   usage: embed_host <repo-root> [device]      (device: auto, emu, cuda)
 */
#include <luaptx.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { B = 8, N = 1024 };

/* A DLTensor over a host float buffer of shape (rows, cols). */
static DLTensor host_tensor(float *data, int64_t *shape, int ndim)
{
  DLTensor t;
  memset(&t, 0, sizeof t);
  t.data = data;
  t.device.device_type = kDLCPU;
  t.ndim = ndim;
  t.dtype.code = kDLFloat;
  t.dtype.bits = 32;
  t.dtype.lanes = 1;
  t.shape = shape;
  return t;
}

/* Fill with deterministic non-zero values in [-1, 1). */
static void fill(float *p, int n, unsigned seed)
{
  for (int i = 0; i < n; i++) {
    seed = seed * 1664525u + 1013904223u;
    p[i] = (float)((seed >> 8) / 16777216.0 * 2.0 - 1.0);
    if (p[i] == 0.0f) p[i] = 0.5f;
  }
}

/* Count elements of y that differ from the reference beyond tolerance. */
static int check(const float *x, const float *w, const float *y, double *max_err)
{
  int bad = 0;
  *max_err = 0;
  for (int b = 0; b < B; b++) {
    double ss = 0;
    for (int i = 0; i < N; i++) ss += (double)x[b * N + i] * x[b * N + i];
    double rstd = 1.0 / sqrt(ss / N + 1e-6);
    for (int i = 0; i < N; i++) {
      double want = x[b * N + i] * rstd * w[i], err = fabs(y[b * N + i] - want);
      if (err > *max_err) *max_err = err;
      if (!(err <= 1e-4 + 1e-4 * fabs(want))) bad++;
    }
  }
  return bad;
}

int main(int argc, char **argv)
{
  const char *root = argc > 1 ? argv[1] : ".";
  char path[4096];
  snprintf(path, sizeof path, "%s/?.lua", root);
  luaptx_options opts = { argc > 2 ? argv[2] : "auto", NULL, path, 0 };
  luaptx_state *S = luaptx_open(&opts);
  if (!S) { fprintf(stderr, "embed_host: out of memory\n"); return 1; }
  if (luaptx_load_string(S, "return require('examples.hopper.rms_norm').build(8, 1024)", "=rms_norm setup")) {
    fprintf(stderr, "embed_host: %s\n", luaptx_error(S));
    return 1;
  }
  luaptx_kernel *k = luaptx_kernel_get(S, "rms_norm", NULL);
  if (!k) { fprintf(stderr, "embed_host: %s\n", luaptx_error(S)); return 1; }
  static float x[B * N], w[N], y[B * N];
  fill(x, B * N, 1);
  fill(w, N, 2);
  for (int i = 0; i < B * N; i++) y[i] = NAN;   /* poisoned: every element must be written */
  int64_t xs[2] = { B, N }, ws[1] = { N }, ys[2] = { B, N };
  DLTensor tx = host_tensor(x, xs, 2), tw = host_tensor(w, ws, 1), ty = host_tensor(y, ys, 2);
  DLTensor *args[] = { &tx, &tw, &ty };
  if (luaptx_launch_dlpack(k, args, 3, NULL)) { fprintf(stderr, "embed_host: %s\n", luaptx_error(S)); return 1; }
  double max_err;
  int bad = check(x, w, y, &max_err);
  printf("embed_host: rms_norm %dx%d on %s: %d of %d elements wrong, max abs error %.3g\n",
         B, N, luaptx_device(S), bad, B * N, max_err);
  luaptx_close(S);
  return bad != 0;
}
