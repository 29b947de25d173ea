#!/usr/bin/env bash
# The README's demo: trace a strided MPI-IO program on 4 ranks under MPICH and write the HTML report.
# MPICH is the default because its ROMIO shows data sieving, the thesis's Fig. 4.9 story.
set -euo pipefail
cd "$(dirname "$0")/.."
impl=${IOLOOM_DEMO_MPI:-mpich}
out=${IOLOOM_DEMO_DIR:-$PWD/ioloom-demo}
exe=build/demo/strided_mpiio-$impl
mkdir -p build/demo "$out"
[ "$exe" -nt examples/strided_mpiio.c ] || "mpicc.$impl" -O2 -o "$exe" examples/strided_mpiio.c
if [ "$impl" = openmpi ]; then
  launch=(mpiexec.openmpi -n 4 --oversubscribe --mca btl_tcp_if_include lo)
  [ "$(id -u)" -ne 0 ] || export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
else
  launch=(mpiexec.mpich -n 4)
fi
rm -rf "$out/trace" "$out/strided.dat"
.venv/bin/ioloom run -o "$out/trace" -- "${launch[@]}" "$exe" "$out/strided.dat" 64 4096
.venv/bin/ioloom report "$out/trace" -o "$out/report.html"
echo "Report written: $out/report.html"
