#!/usr/bin/env bash
# Installs the Debian packages ioloom builds and tests with, or says exactly what is missing and how to get it.
# Fast when everything is there (one dpkg-query), so `make demo` and `make test` can call it every time.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config gfortran   # compilers and build tools
  openmpi-bin libopenmpi-dev                               # Open MPI with headers
  mpich libmpich-dev                                       # MPICH with headers
  libhdf5-mpich-dev hdf5-tools                             # parallel HDF5 (built against MPICH)
  python3 python3-venv                                     # the Python package and its virtual environment
  python3-mpi4py                                           # an mpi4py program in the tracer's tests (Open MPI)
  chromium                                                 # renders the HTML report in tests
  valgrind                                                 # ioloom bench overhead --instructions (callgrind)
  libsimgrid-dev                                           # ioloom sim's engine (SimGrid's S4U, C++)
  libyaml-dev libxml2-dev libzstd-dev                      # libioloom-async: configurations (YAML, XML), zstd
  libpython3-dev                                           # libioloom-async-python: Python plugins (embedded)
  lammps                                                   # a real application for ioloom bench predict (Open MPI)
  rsync                                                    # tests: rsync into and out of a logfs mount, twice
)

missing=()
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
  [ "$status" = "installed" ] || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

install_cmd="apt-get update && apt-get install -y --no-install-recommends ${missing[*]}"
if [ "$(id -u)" -eq 0 ]; then sudo=""; elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then sudo="sudo"; else
  echo "ioloom needs these Debian packages, which are not installed: ${missing[*]}" >&2
  echo "Install them as root, then run the command again:" >&2
  echo "  sudo sh -c '$install_cmd'" >&2
  exit 1
fi

echo "ioloom: installing Debian packages: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
# apt-get installs all or nothing, so a failure here leaves no half-installed set behind.
if ! { $sudo apt-get update -qq && $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null; }; then
  echo "ioloom: could not install: ${missing[*]}" >&2
  echo "Check that this is Debian 12 (or newer) with a working package source, then run as root:" >&2
  echo "  $install_cmd" >&2
  exit 1
fi
