// The decode access pattern with throughput-bound work (bench/NOTES.md, "CPU decode: prefetches
// spread over P V too"): K and V [65536 rows][4 heads][128 bf16], 1 KB rows, six copies rotated,
// two threads each take half the rows; WORK independent FMAs on 8 accumulators per 64-byte line
// (16: the library's warm bf16 decode rate, ~55 GB/s; 2: a decode without GQA). Six orders:
// MODE 0: each 64-row tile head by head (256 B of each 1 KB row, K then V per head); 1: row by row
// (whole 1 KB rows); 2: K row by row, V head by head; 3: as 0 with V in four 64 B column passes
// (the library's P V order); 4: head by head within 8-row sub-blocks; 5: as 0 with the next tile
// prefetched head by head too (the demand order) instead of row by row. PF 1: the next tile
// prefetched one line per line visited; 2 (MODE 0): two per K line, none during V (all of them
// during the "scores", the library before the thirty-fourth session); 0: none.
// gcc -O2 -mavx512f -fopenmp -DWORK=N access_order.c -o a && OMP_NUM_THREADS=2 ./a MODE PF
#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <omp.h>
#define ROWS 65536
#define RB 1024
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
#define W8(x) x(0) x(1) x(2) x(3) x(4) x(5) x(6) x(7)
#ifndef WORK
#define WORK 0
#endif
#define work_line(p,acc,work) do{ __m512 d=_mm512_castsi512_ps(_mm512_loadu_si512(p)); \
  _Pragma("GCC unroll 64") for(int w=0;w<WORK;w++){ acc[w&7]=_mm512_fmadd_ps(d,cst,acc[w&7]); } a0=_mm512_add_ps(a0,d);}while(0)
int main(int argc,char**argv){
  int mode=atoi(argv[1]); int pf = argc>2?atoi(argv[2]):1; int work=WORK;
  size_t nb=(size_t)ROWS*RB; int ncopy=6;
  char* K[8]; char* V[8];
  for(int c=0;c<ncopy;c++){K[c]=aligned_alloc(4096,nb);V[c]=aligned_alloc(4096,nb);memset(K[c],1,nb);memset(V[c],1,nb);}
  double tot=0; int reps=18; double ts[32]; int nts=0;
  float sink=0;
  for(int r=0;r<reps;r++){
    int c=r%ncopy; double t0=now();
    #pragma omp parallel reduction(+:sink)
    {
      int nt=omp_get_num_threads(), id=omp_get_thread_num();
      size_t r0=(size_t)ROWS*id/nt, r1=(size_t)ROWS*(id+1)/nt;
      __m512 acc[8]; __m512 cst=_mm512_set1_ps(0.999f); __m512 a0=_mm512_setzero_ps(); for(int i=0;i<8;i++) acc[i]=_mm512_set1_ps(0.5f);
      const char*k=K[c],*v=V[c];
      for(size_t t=r0;t<r1;t+=64){
        // prefetch next tile: spread: 2*64*16 lines = 2048 lines over the tile's 2048 line visits
        const char* pk=k+(t+64)*RB; const char* pv=v+(t+64)*RB; size_t pi=0, pn=(pf && t+64<r1)?2*64*RB:0;
#define PFH() if(pi<pn){ size_t li=pi/64, hh=li/(2*64*4), rem=li%(2*64*4), kv=rem/(64*4), rr=(rem%(64*4))/4, ll=rem%4; const char* base=kv?pv:pk; __builtin_prefetch(base+rr*RB+hh*256+ll*64,0,3); pi+=64; }
#define PF() if(pi<pn){ __builtin_prefetch(pi<64*RB? pk+pi : pv+pi-64*RB,0,3); pi+=64; }
        if(mode==0){ // head-major (current)
          for(int h=0;h<4;h++){
            for(size_t j=t;j<t+64;j++){ const char* row=k+j*RB+h*256; for(int l=0;l<4;l++){work_line(row+64*l,acc,work); PF() if(pf==2){PF()}} }
            for(size_t j=t;j<t+64;j++){ const char* row=v+j*RB+h*256; for(int l=0;l<4;l++){work_line(row+64*l,acc,work); if(pf!=2){PF()}} }
          }
        } else if(mode==2) { // K row-major, V head-major
          for(size_t j=t;j<t+64;j++){ const char* row=k+j*RB; for(int l=0;l<16;l++){work_line(row+64*l,acc,work); PF()} }
          for(int h=0;h<4;h++){
            for(size_t j=t;j<t+64;j++){ const char* row=v+j*RB+h*256; for(int l=0;l<4;l++){work_line(row+64*l,acc,work); PF()} }
          }
        } else if(mode==3) { // per head: K then V, V in 4 column passes (the library's P V order)
          for(int h=0;h<4;h++){
            for(size_t j=t;j<t+64;j++){ const char* row=k+j*RB+h*256; for(int l=0;l<4;l++){work_line(row+64*l,acc,work); PF()} }
            for(int l=0;l<4;l++) for(size_t j=t;j<t+64;j++){ const char* row=v+j*RB+h*256; work_line(row+64*l,acc,work); PF() }
          }
        } else if(mode==4) { // sub-blocks of 8 rows, head by head within each (K), then same for V
          for(size_t b=t;b<t+64;b+=8) for(int h=0;h<4;h++) for(size_t j=b;j<b+8;j++){ const char* row=k+j*RB+h*256; for(int l=0;l<4;l++){work_line(row+64*l,acc,work); PF()} }
          for(size_t b=t;b<t+64;b+=8) for(int h=0;h<4;h++) for(size_t j=b;j<b+8;j++){ const char* row=v+j*RB+h*256; for(int l=0;l<4;l++){work_line(row+64*l,acc,work); PF()} }
        } else if(mode==5) { // head-major demand, head-major prefetch order (the next tile's head h K then V)
          for(int h=0;h<4;h++){
            for(size_t j=t;j<t+64;j++){ const char* row=k+j*RB+h*256; for(int l=0;l<4;l++){work_line(row+64*l,acc,work); PFH()} }
            for(size_t j=t;j<t+64;j++){ const char* row=v+j*RB+h*256; for(int l=0;l<4;l++){work_line(row+64*l,acc,work); PFH()} }
          }
        } else { // row-major
          for(size_t j=t;j<t+64;j++){ const char* row=k+j*RB; for(int l=0;l<16;l++){work_line(row+64*l,acc,work); PF()} }
          for(size_t j=t;j<t+64;j++){ const char* row=v+j*RB; for(int l=0;l<16;l++){work_line(row+64*l,acc,work); PF()} }
        }
      }
      for(int i=1;i<8;i++) acc[0]=_mm512_add_ps(acc[0],acc[i]);
      sink+=acc[0][0]+a0[1];
    }
    double dt=now()-t0; if(r>=ncopy){ts[nts++]=dt;}
  }
  // median
  for(int i=0;i<nts;i++)for(int j=i+1;j<nts;j++)if(ts[j]<ts[i]){double x=ts[i];ts[i]=ts[j];ts[j]=x;}
  printf("mode %d pf %d work %2d: median %.1f GB/s best %.1f (%g)\n",mode,pf,work,2*nb/ts[nts/2]/1e9, 2*nb/ts[0]/1e9, sink);
}
