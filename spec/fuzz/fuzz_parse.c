/* libFuzzer target for the PTX parser: the input is PTX text, checked as
 * spec/fuzz/fuzz_common.h says (parse or a positioned error; lossless and
 * canonical round trips; transpile; ptx.raw and ptx.raw_module paths).
 * Build: cmake -S . -B build-fuzz -DLUAPTX_FUZZ=ON -DLUAPTX_TESTS=OFF -DCMAKE_C_COMPILER=clang
 *        cmake --build build-fuzz --target fuzz_parse
 * Run:   see docs/parser.md (Fuzzing). */
#include "fuzz_common.h"

/* One execution: parse, check the round trips, free. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  fuzz_parse_into((const char *)data, size);
  lpx_module_free(fuzz_parse_module((const char *)data, size));
  return 0;
}
