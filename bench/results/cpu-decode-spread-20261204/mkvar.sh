#!/usr/bin/env bash
# usage: mkvar.sh NAME "-DFOO=1 ..."  -> /tmp/var_NAME.so (kernels_avx512.cpp rebuilt with the flags)
set -e
name=$1; flags=$2
cd /work/main/build-h200
cc=$(ninja -t commands flashattn | grep "kernels_avx512.cpp" | head -1)
cc=$(echo "$cc" | sed "s# -MD -MT [^ ]* -MF [^ ]*##; s# -o src/cpu/CMakeFiles/flashattn_cpu.dir/kernels_avx512.cpp.o# -o /tmp/var_$name.o $flags#")
eval "$cc"
ln=$(ninja -t commands flashattn | grep -- "-o src/libflashattn.so.0.1.0" | head -1)
ln=$(echo "$ln" | sed "s#src/cpu/CMakeFiles/flashattn_cpu.dir/kernels_avx512.cpp.o#/tmp/var_$name.o#; s#-o src/libflashattn.so.0.1.0#-o /tmp/var_$name.so#; s#-Wl,-soname,[^ ]*##")
eval "$ln"
ls -la /tmp/var_$name.so
