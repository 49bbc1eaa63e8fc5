/* A driver for a fuzz target without libFuzzer (gcc builds, ctest): each
 * file argument is one input; "--random N SEED" runs N pseudo-random
 * inputs of 1 to 4096 bytes (xorshift: a failure names the seed and the
 * input's index, and "--random N SEED --dump I" writes that input to
 * stdout for the libFuzzer build to replay). */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The next state of a xorshift64 generator. */
static uint64_t xorshift(uint64_t *s)
{
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

static char which[96];   /* "random input I of seed S": what a crash was running */

/* On a crash, say which input it was, then die of the same signal. */
static void on_crash(int sig)
{
  (void)!write(2, which, strlen(which));
  signal(sig, SIG_DFL);
  raise(sig);
}

/* Run n random inputs from seed (or write input dump_at to stdout). */
static int run_random(long n, uint64_t seed, long dump_at)
{
  static uint8_t buf[4096];
  uint64_t s = seed * 0x9E3779B97F4A7C15ULL + 1;
  signal(SIGABRT, on_crash);
  signal(SIGSEGV, on_crash);
  for (long i = 0; i < n; i++) {
    size_t len = 1 + xorshift(&s) % sizeof buf;
    for (size_t k = 0; k < len; k++) buf[k] = (uint8_t)xorshift(&s);
    if (dump_at >= 0) {
      if (i == dump_at) return fwrite(buf, 1, len, stdout) != len;
      continue;
    }
    snprintf(which, sizeof which, "\nfailed on random input %ld of seed %llu (--dump %ld writes it)\n", i,
             (unsigned long long)seed, i);
    LLVMFuzzerTestOneInput(buf, len);
  }
  if (dump_at < 0) printf("%ld random inputs (seed %llu): no failure\n", n, (unsigned long long)seed);
  return 0;
}

/* Run one input file. */
static int run_file(const char *path)
{
  FILE *f = fopen(path, "rb");
  if (!f) { perror(path); return 1; }
  static uint8_t buf[1 << 20];
  size_t len = fread(buf, 1, sizeof buf, f);
  fclose(f);
  LLVMFuzzerTestOneInput(buf, len);
  return 0;
}

/* usage: DRIVER FILE... | DRIVER --random N SEED [--dump I] */
int main(int argc, char **argv)
{
  if ((argc == 4 || (argc == 6 && !strcmp(argv[4], "--dump"))) && !strcmp(argv[1], "--random"))
    return run_random(atol(argv[2]), strtoull(argv[3], NULL, 10), argc == 6 ? atol(argv[5]) : -1);
  int rc = 0;
  for (int i = 1; i < argc; i++) rc |= run_file(argv[i]);
  return rc;
}
