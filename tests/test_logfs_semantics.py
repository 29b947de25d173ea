"""File semantics through the layer (issue 15): each operation is done on a plain file and on a container under a
mount, and the results compared (the plain file is the oracle)."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

from ioloom.logfs import preload
from ioloom.logfs.format import Container, is_container


def under_layer_and_plain(tmp_path: Path, script: str) -> tuple[Path, Path, str, str]:
    """Runs the bash script in a plain directory and in a mount (the layer preloaded): (plain dir, mount, the
    plain run's stdout, the layer's)."""
    plain, mnt = tmp_path / "plain", tmp_path / "mnt"
    outs = []
    for d, env in ((plain, {}), (mnt, preload.env({mnt: []}))):
        d.mkdir()
        out = subprocess.run(["bash", "-c", script], cwd=d, env={**os.environ, **env}, capture_output=True,
                             text=True, timeout=60)
        assert out.returncode == 0, (d, out.stderr)
        outs.append(out.stdout)
    return plain, mnt, *outs


SHELL_REDIRECTIONS = r"""
set -e
echo hi >> f
echo second >> f
printf '%s\n' third >> f
{ echo a; echo b; } > g
echo replaced > g2; echo again > g2
echo to-stderr 2>> h >&2
read line < f; echo "$line" > i
echo out
"""


def test_shell_builtin_redirections(tmp_path):
    """Today's main: `echo hi >> mnt/f` failed with EBADF (the builtin writes through bash's own stdout FILE)."""
    plain, mnt, plain_out, layer_out = under_layer_and_plain(tmp_path, SHELL_REDIRECTIONS)
    assert layer_out == plain_out == "out\n"
    for name in ("f", "g", "g2", "h", "i"):
        assert is_container(mnt / name), name
        assert Container.open(mnt / name).read() == (plain / name).read_bytes(), name
