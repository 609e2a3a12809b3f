#!/bin/bash
# Packs what ppc's CUDA executables need at run time beyond the CUDA
# libraries (cudart, cuBLASLt, NCCL: every GPU machine has them) and the C/C++
# runtime, for a GPU machine that has no ppc build: Open MPI (its libraries,
# plugins and help texts), OpenBLAS, protobuf, the ONNX classes and their
# dependencies, as this machine has them.
#
#   bench/gpu/bundle-deps.sh OUT.tar.xz EXE...
#
# bench/gpu/env.sh unpacks it on the GPU machine, using each library from
# the machine itself where it has one of that soname. See bench/gpu/README.md.
set -euo pipefail
out=$1; shift
[ $# -gt 0 ] || { echo "usage: $0 OUT.tar.xz EXE..." >&2; exit 1; }
ompi=/usr/lib/x86_64-linux-gnu/openmpi
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/lib"
# Everything the executables and Open MPI's plugins load, less what any
# Linux or GPU machine has.
skip='^(linux-vdso|ld-linux|libc|libm|libdl|librt|libpthread|libstdc\+\+|libgcc_s|libcuda|libcudart|libcublas|libcublasLt|libnccl)\.'
for file in "$@" "$ompi"/lib/openmpi3/*.so /usr/lib/x86_64-linux-gnu/libmpi.so.40; do
  ldd "$file" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}'
done | sort -u | while read -r name path; do
  [[ $name =~ $skip ]] || cp -L "$path" "$stage/lib/$name"
done
cp -a "$ompi" "$stage/openmpi"
cp -a /usr/share/openmpi "$stage/share-openmpi"
cp -a /etc/openmpi "$stage/etc-openmpi"
tar -C "$stage" -cJf "$out" .
echo "$out: $(ls "$stage/lib" | wc -l) libraries, $(du -sh "$stage" | cut -f1) unpacked, $(du -h "$out" | cut -f1) packed"
