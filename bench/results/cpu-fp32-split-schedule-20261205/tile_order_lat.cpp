#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <cstring>
#include <x86intrin.h>
#include <initializer_list>
struct Cfg { uint8_t palette, start; uint8_t res[14]; uint16_t colsb[16]; uint8_t rows[16]; };
static void cfg() { Cfg c; memset(&c,0,sizeof c); c.palette=1; for(int i=0;i<8;++i){c.rows[i]=16;c.colsb[i]=64;} _tile_loadconfig(&c); }
alignas(64) static uint16_t big[16 * 1024 * 2];  // 64 KB
#define T(name, n, body) { uint64_t t0 = __rdtsc(); for (int i = 0; i < 4000; ++i) { body } printf("%-50s %.1f core cycles per TDP\n", name, double(__rdtsc() - t0) / 4000 / 0.725 / n); }
int main() {
  syscall(SYS_arch_prctl, 0x1023, 18); cfg(); for (auto& x : big) x = 0x3f80 + (rand() & 0x7f); _tile_loadd(4, big, 64); _tile_loadd(5, big+512, 64); _tile_loadd(6, big+1024, 64); _tile_loadd(7, big+2048, 64);
  for (int w = 0; w < 200000; ++w) _tile_dpbf16ps(0, 4, 6);
  for (int S : {64, 128, 256, 768, 1024, 1536}) {
    char name[64];
    snprintf(name, sizeof name, "stride %d: 0,2,L6,1,3,L7", S);
    const uint16_t* p = big; const uint16_t* q = big + 32 * S / 2 / 2;  // second tile elsewhere
    T(name, 4, _tile_dpbf16ps(0, 4, 6); _tile_dpbf16ps(2, 5, 6); _tile_loadd(6, p, S); _tile_dpbf16ps(1, 4, 7); _tile_dpbf16ps(3, 5, 7); _tile_loadd(7, q, S);)
    snprintf(name, sizeof name, "stride %d: 4 loads per 4 TDP", S);
    T(name, 4, _tile_dpbf16ps(0, 4, 6); _tile_dpbf16ps(2, 5, 6); _tile_loadd(6, p, S); _tile_dpbf16ps(1, 4, 7); _tile_dpbf16ps(3, 5, 7); _tile_loadd(7, q, S); _tile_loadd(4, p + 32, S); _tile_loadd(5, q + 32, S);)
    snprintf(name, sizeof name, "stride %d: dot then 4 loads", S);
    T(name, 4, _tile_dpbf16ps(0, 4, 6); _tile_dpbf16ps(1, 4, 7); _tile_dpbf16ps(2, 5, 6); _tile_dpbf16ps(3, 5, 7); _tile_loadd(4, p + 32, S); _tile_loadd(5, q + 32, S); _tile_loadd(6, p, S); _tile_loadd(7, q, S);)
  }
  {
    const uint16_t* p = big; const uint16_t* q = big + 4096; int S = 64;
    T("A change 0,1,L4,2,3,L5", 4, _tile_dpbf16ps(0, 4, 6); _tile_dpbf16ps(1, 4, 7); _tile_loadd(4, p, S); _tile_dpbf16ps(2, 5, 6); _tile_dpbf16ps(3, 5, 7); _tile_loadd(5, q, S);)
    T("B change 0,2,L6,1,3,L7", 4, _tile_dpbf16ps(0, 4, 6); _tile_dpbf16ps(2, 5, 6); _tile_loadd(6, p, S); _tile_dpbf16ps(1, 4, 7); _tile_dpbf16ps(3, 5, 7); _tile_loadd(7, q, S);)
    T("B then A change alternating", 8, _tile_dpbf16ps(0, 4, 6); _tile_dpbf16ps(2, 5, 6); _tile_loadd(6, p, S); _tile_dpbf16ps(1, 4, 7); _tile_dpbf16ps(3, 5, 7); _tile_loadd(7, q, S);
       _tile_dpbf16ps(0, 4, 6); _tile_dpbf16ps(1, 4, 7); _tile_loadd(4, p, S); _tile_dpbf16ps(2, 5, 6); _tile_dpbf16ps(3, 5, 7); _tile_loadd(5, q, S);)
    T("both change 0,1,L4,2,L6,3,L5,L7", 4, _tile_dpbf16ps(0, 4, 6); _tile_dpbf16ps(1, 4, 7); _tile_loadd(4, p, S); _tile_dpbf16ps(2, 5, 6); _tile_loadd(6, p+512, S); _tile_dpbf16ps(3, 5, 7); _tile_loadd(5, q, S); _tile_loadd(7, q+512, S);)
    T("B change, loaded tile used next (0,2,L6 -> 0 uses 6 first)", 4, _tile_dpbf16ps(0, 4, 6); _tile_dpbf16ps(2, 5, 6); _tile_loadd(6, p, S); _tile_dpbf16ps(1, 4, 7); _tile_dpbf16ps(3, 5, 7);)
    T("A change only via tmm4 each iter: 0,1,L4,2,3", 4, _tile_dpbf16ps(0, 4, 6); _tile_dpbf16ps(1, 4, 7); _tile_loadd(4, p, S); _tile_dpbf16ps(2, 5, 6); _tile_dpbf16ps(3, 5, 7);)
  }
}
