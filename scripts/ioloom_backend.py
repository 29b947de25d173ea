"""ioloom's PEP 517 build backend: two well-kept backends, each for what it does best.

- Wheels and sdists (`pip install .`, `pip install ioloom-X.tar.gz`): scikit-build-core. It runs native/CMakeLists.txt
  and puts the native libraries and programs inside the package (see [tool.scikit-build] in pyproject.toml).
- The editable install of a source tree (scripts/install-python.sh, `pip install -e .`): hatchling. Its editable
  wheel is a plain path entry to python/, appended to sys.path, and builds nothing: `make` builds native/ into
  build/native, where the package looks in a source tree. scikit-build-core's editable install would put an
  import hook in front of sys.path instead, so that PYTHONPATH=<another worktree>/python could no longer choose
  which tree's code runs.
"""
from hatchling.build import build_editable, get_requires_for_build_editable
from scikit_build_core.build import (
    build_sdist,
    build_wheel,
    get_requires_for_build_sdist,
    get_requires_for_build_wheel,
    prepare_metadata_for_build_wheel,
)

__all__ = ["build_editable", "build_sdist", "build_wheel", "get_requires_for_build_editable",
           "get_requires_for_build_sdist", "get_requires_for_build_wheel", "prepare_metadata_for_build_wheel"]
