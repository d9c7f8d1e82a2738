#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <omp.h>
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
int main(int argc,char**argv){
  size_t mb=atoi(argv[1]); size_t n=mb<<20; char* b=aligned_alloc(4096,n); memset(b,1,n);
  int reps=atoi(argv[2]); float sink=0;
  for(int w=0;w<2;w++){
  double t0=now();
  for(int r=0;r<reps;r++){
    #pragma omp parallel reduction(+:sink)
    { int nt=omp_get_num_threads(),id=omp_get_thread_num(); size_t a=n*id/nt,e=n*(id+1)/nt;
      __m512 s0=_mm512_setzero_ps(),s1=s0,s2=s0,s3=s0;
      for(size_t i=a;i<e;i+=256){ s0=_mm512_add_ps(s0,_mm512_load_ps((float*)(b+i))); s1=_mm512_add_ps(s1,_mm512_load_ps((float*)(b+i+64))); s2=_mm512_add_ps(s2,_mm512_load_ps((float*)(b+i+128))); s3=_mm512_add_ps(s3,_mm512_load_ps((float*)(b+i+192)));}
      s0=_mm512_add_ps(_mm512_add_ps(s0,s1),_mm512_add_ps(s2,s3)); sink+=s0[0]; }
  }
  double dt=now()-t0; if(w) printf("%zu MB x %d: %.1f GB/s (%g)\n",mb,reps,n*(double)reps/dt/1e9,sink);}
}
