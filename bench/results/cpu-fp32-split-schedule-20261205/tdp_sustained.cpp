#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <cstring>
#include <x86intrin.h>
struct Cfg { uint8_t palette, start; uint8_t res[14]; uint16_t colsb[16]; uint8_t rows[16]; };
static void cfg() { Cfg c; memset(&c,0,sizeof c); c.palette=1; for(int i=0;i<8;++i){c.rows[i]=16;c.colsb[i]=64;} _tile_loadconfig(&c); }
alignas(64) static uint16_t big[8 * 512];
int main(int argc, char** argv) {
  syscall(SYS_arch_prctl, 0x1023, 18); cfg();
  const int zero = atoi(argv[1]);
  for (auto& x : big) x = zero ? 0 : 0x3f80 + (rand() & 0x7f);
  _tile_loadd(4, big, 64); _tile_loadd(5, big + 512, 64); _tile_loadd(6, big + 1024, 64); _tile_loadd(7, big + 1536, 64);
  _tile_zero(0); _tile_zero(1); _tile_zero(2); _tile_zero(3);
  for (int chunk = 0; chunk < 12; ++chunk) {
    const long n = 1L << (6 + chunk);
    uint64_t t0 = __rdtsc();
    for (long i = 0; i < n; ++i) { _tile_dpbf16ps(0, 4, 6); _tile_dpbf16ps(1, 4, 7); _tile_dpbf16ps(2, 5, 6); _tile_dpbf16ps(3, 5, 7); }
    printf("%8ld TDPs: %.1f tsc-core-cycles per TDP\n", 4 * n, double(__rdtsc() - t0) / (4.0 * n) / 0.725);
  }
}
