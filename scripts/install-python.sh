#!/usr/bin/env bash
# Creates or updates .venv with ioloom (editable: a path entry to python/, see scripts/ioloom_backend.py) and the
# tested set of its dependencies (constraints.txt). A new environment that fails half-way is
# removed, so the next run starts clean; the stamp is written only after a complete install.
set -euo pipefail
venv=${1:-.venv}
python=${PYTHON:-python3}
fresh=0
if [ ! -x "$venv/bin/python" ]; then
  rm -rf "$venv"; fresh=1
  "$python" -m venv "$venv" || { rm -rf "$venv"; fresh=2; }
fi
if [ $fresh -eq 2 ] || ! "$venv/bin/pip" install -q --disable-pip-version-check -c constraints.txt -e '.[test]'; then
  [ $fresh -ge 1 ] && rm -rf "$venv"
  echo "ioloom: could not create the Python environment in $venv." >&2
  echo "It needs $python >= 3.11 with the venv module (Debian: apt-get install python3-venv) and access to PyPI." >&2
  exit 1
fi
touch "$venv/.installed"
