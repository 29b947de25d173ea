"""`ioloom run` under an MPI launcher: every IOLOOM_* variable reaches ranks started on another host.

The other host is this machine reached through a stand-in for ssh that, as a remote login does, starts the MPI
daemon with a clean environment: what the ranks see is what the launcher forwarded, nothing inherited."""
from __future__ import annotations

import os
import stat
import subprocess

import pytest

from ioloom.trace import open_trace

# Leading options (ssh's), then the host name, then the command: run it here with nothing of the caller's
# environment, as a login on another node would.
FAKE_SSH = """#!/bin/sh
while [ $# -gt 0 ]; do case "$1" in -*) shift;; *) break;; esac; done
shift
exec env -i PATH=/usr/bin:/bin HOME="$HOME" /bin/sh -c "$*"
"""

USER_SETTINGS = {"IOLOOM_TSC": "0", "IOLOOM_CLOCK_SYNC": "every-rank", "IOLOOM_NOT_KNOWN_TO_RUN_PY": "seen"}


def remote_launch(mpi, nranks: int, argv: list[str], fake_ssh) -> list[str]:
    """The fixture's launch command, with its ranks placed on a host reached through fake_ssh."""
    if mpi.name == "openmpi":
        remote = ["--host", f"farhost:{nranks}", "--mca", "plm_rsh_agent", str(fake_ssh)]
    else:  # Hydra passes the whole environment unless told not to, as a site's launcher may be configured
        remote = ["-launcher", "ssh", "-launcher-exec", str(fake_ssh), "-hosts", "farhost", "-genvnone"]
    launcher, *rest = mpi.command(nranks, argv)
    return [launcher, *remote, *rest]


@pytest.fixture
def fake_ssh(tmp_path):
    script = tmp_path / "fake-ssh"
    script.write_text(FAKE_SSH)
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return script


def rank_command(mpi, fake_ssh) -> list[str]:
    """Two ranks on the other host, each printing the settings it sees."""
    show = " ".join(f"{name}=${name}" for name in USER_SETTINGS)
    return remote_launch(mpi, 2, ["/bin/sh", "-c", f'echo "{show}"'], fake_ssh)


def test_user_settings_reach_remote_ranks(mpi, ioloom_cli, fake_ssh, tmp_path):
    out = ioloom_cli("run", "-o", tmp_path / "trace", "--layers", "posix", "--", *rank_command(mpi, fake_ssh),
                     env=mpi.env(USER_SETTINGS), timeout=120)
    expected = " ".join(f"{name}={value}" for name, value in USER_SETTINGS.items())
    assert out.stdout.splitlines() == [expected] * 2, out.stdout + out.stderr
    # The preload and ioloom's own settings arrived too: both ranks wrote their stream into the trace directory
    # (beside the stand-in for ssh, started by the traced launcher, as a real ssh would be).
    ranks = [s for s in open_trace(tmp_path / "trace").streams if s.info["argv"].startswith("/bin/sh\x1f-c\x1fecho")]
    assert len(ranks) == 2 and {s.info["layers"] for s in ranks} == {"posix"}


def test_launched_directly_remote_ranks_see_none(mpi, fake_ssh):
    """The stand-in hides the caller's environment as another host would: without ioloom naming the settings
    to the launcher, the ranks see none of them."""
    out = subprocess.run(rank_command(mpi, fake_ssh), env={**os.environ, **mpi.impl.launch_env(2, USER_SETTINGS)},
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [" ".join(f"{name}=" for name in USER_SETTINGS)] * 2, out.stdout
