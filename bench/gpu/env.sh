# Sourced on a GPU machine without a ppc build (bench/gpu/README.md):
#   source bench/gpu/env.sh DEPS.tar.xz
# unpacks bundle-deps.sh's archive into /opt/ppc-deps, puts Open MPI's plugin
# tree where its libraries look for it (unless the machine has Open MPI), and
# sets PPC_EXE_ENV: the environment ppc's executables need there (the carried
# libraries the machine lacks, the machine's CUDA libraries, Open MPI as a
# singleton with no mpirun). Use it as `env $PPC_EXE_ENV ./train ...`: it is
# not exported, so Python and PyTorch keep the machine's own libraries.
ppc_deps=/opt/ppc-deps
rm -rf "$ppc_deps" && mkdir -p "$ppc_deps/use"
tar -C "$ppc_deps" -xJf "$1"
for ppc_lib in "$ppc_deps"/lib/*; do
  ldconfig -p | grep -q "^\s*$(basename "$ppc_lib") " || ln -s "$ppc_lib" "$ppc_deps/use/"
done
ppc_ompi=/usr/lib/x86_64-linux-gnu/openmpi
[ -e "$ppc_ompi" ] || { mkdir -p "$(dirname "$ppc_ompi")"; ln -s "$ppc_deps/openmpi" "$ppc_ompi"; }
[ -e /usr/share/openmpi ] || ln -s "$ppc_deps/share-openmpi" /usr/share/openmpi
[ -e /etc/openmpi ] || ln -s "$ppc_deps/etc-openmpi" /etc/openmpi
ppc_cuda_dirs=$(find /usr/local /usr/lib /opt \( -name 'libcudart.so.13' \
  -o -name 'libcublasLt.so.13' -o -name 'libnccl.so.2' \) 2>/dev/null |
  xargs -r -n1 dirname | sort -u | tr '\n' ':')
PPC_EXE_ENV="LD_LIBRARY_PATH=$ppc_deps/use:$ppc_cuda_dirs OMPI_MCA_ess_singleton_isolated=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1"
echo "carried libraries used: $(ls "$ppc_deps/use" | tr '\n' ' ')"
echo "CUDA libraries from: $ppc_cuda_dirs"
