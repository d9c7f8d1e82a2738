// The decode access pattern without the kernels (bench/NOTES.md, "CPU decode: bf16 on VDPBF16PS"):
// gcc -O2 -mavx512f -fopenmp access_pattern.c -o ap && OMP_NUM_THREADS=2 ./ap MODE [PF_LINES] [WORK]
// MODE 0: K then V rows of each 64-row tile in order; 1: four heads one after another per tile;
// 2: as 1 with PF_LINES software prefetches of the next tile per two rows; WORK: dependent FMAs per (row, head).
#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <omp.h>
// decode-like read patterns over K and V [rows][4 heads][128 bf16] (1 KB rows)
#define ROWS 65536
#define RB 1024
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
static inline __m512 touch(const char* p, __m512 a){ return _mm512_add_ps(a, _mm512_castsi512_ps(_mm512_loadu_si512(p))); }
int main(int argc,char**argv){
  int mode=atoi(argv[1]); int pfl = argc>2?atoi(argv[2]):16; int work = argc>3?atoi(argv[3]):0;
  size_t nb=(size_t)ROWS*RB; int ncopy=8;
  char* K[8]; char* V[8];
  for(int c=0;c<ncopy;c++){K[c]=aligned_alloc(4096,nb);V[c]=aligned_alloc(4096,nb);memset(K[c],1,nb);memset(V[c],1,nb);}
  double best=1e9; double tot=0; int reps=16;
  float sink=0;
  for(int r=0;r<reps;r++){
    int c=r%ncopy; double t0=now();
    #pragma omp parallel reduction(+:sink)
    {
      int nt=omp_get_num_threads(), id=omp_get_thread_num();
      size_t r0=(size_t)ROWS*id/nt, r1=(size_t)ROWS*(id+1)/nt;
      __m512 a=_mm512_setzero_ps();
      const char*k=K[c],*v=V[c];
      if(mode==0){ // sequential: K rows then V rows per 64-row tile
        for(size_t t=r0;t<r1;t+=64){ for(size_t i=t*RB;i<(t+64)*RB;i+=64){a=touch(k+i,a);} for(size_t i=t*RB;i<(t+64)*RB;i+=64){a=touch(v+i,a);} 
          for(int w=0;w<work;w++) a=_mm512_fmadd_ps(a,a,a);}
      } else { // head by head within a tile, SW prefetch next tile spread (pfl lines per 2 rows)
        for(size_t t=r0;t<r1;t+=64){
          const char* pk=k+(t+64)*RB; const char* pv=v+(t+64)*RB; size_t pi=0, pn = (t+64<r1)? 64*RB*2:0;
          for(int h=0;h<4;h++){
            for(size_t j=t;j<t+64;j++){ const char* row=k+j*RB+h*256; a=touch(row,a);a=touch(row+64,a);a=touch(row+128,a);a=touch(row+192,a);
              if(mode==2 && (j&1)) for(int q=0;q<pfl && pi<pn;q++,pi+=64){ __builtin_prefetch(pi<64*RB? pk+pi : pv+pi-64*RB,0,3);} 
              for(int w=0;w<work;w++) a=_mm512_fmadd_ps(a,a,a);}
            for(size_t j=t;j<t+64;j++){ const char* row=v+j*RB+h*256; a=touch(row,a);a=touch(row+64,a);a=touch(row+128,a);a=touch(row+192,a);
              for(int w=0;w<work;w++) a=_mm512_fmadd_ps(a,a,a);}
          }
        }
      }
      sink+=a[0];
    }
    double dt=now()-t0; if(r>=ncopy){tot+=dt; if(dt<best)best=dt;}
  }
  printf("mode %d pfl %d work %d: best %.1f GB/s avg %.1f GB/s (%g)\n",mode,pfl,work,2*nb/best/1e9, 2*nb*(reps-ncopy)/tot/1e9, sink);
}
