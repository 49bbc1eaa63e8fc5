/* What spec/c/fake_cuda.c records of the calls made to it, read back by
 * spec/c/test_embed_cuda.c through fake_cuda_record_get(). */
#ifndef FAKE_CUDA_H
#define FAKE_CUDA_H
#include <stddef.h>

typedef struct fake_cuda_record {
  int launches, stream_syncs, ctx_syncs, event_syncs;
  void *last_stream;
  unsigned char last_params[4096];
  size_t last_params_size;
} fake_cuda_record;

#endif
