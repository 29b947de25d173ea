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


SYMLINKS = r"""
set -e
echo data > f
ln -s f l
stat -c '%F %s' l
stat -L -c '%F %s' l
readlink l
cat l
python3 -c "import os; print(os.path.islink('l'), os.path.isfile('l'), os.lstat('l').st_size)"
tar -cf ../$(basename $PWD).tar f l
tar -tvf ../$(basename $PWD).tar | awk '{print $1, $6, $7, $8}'
cp -a l l2
stat -c %F l2
mv l2 l3
stat -c %F l3
echo other > g
ln -s g l4
mv l4 l3
readlink l3
cat g
rm l3 l
ls
cat f
"""


def test_symbolic_links_to_containers_stay_links(tmp_path):
    """Today's main: lstat followed a link to a container and said 'regular file', so tar stored the link as a
    file and cp -a copied the data; rm of the link went for the container."""
    plain, mnt, plain_out, layer_out = under_layer_and_plain(tmp_path, SYMLINKS)
    assert layer_out == plain_out
    assert "symbolic link 1" in layer_out and "lrwxrwxrwx l -> f" in layer_out
    assert Container.open(mnt / "f").read() == (plain / "f").read_bytes() == b"data\n"
    assert not (mnt / "l").exists() and not (mnt / "l").is_symlink()
