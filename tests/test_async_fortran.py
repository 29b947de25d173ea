"""libioloom-async's Fortran module (native/async/ioloom_async.f90) under each MPI: a Fortran program writes
through it, by copy and in place (zero copy), the Python reader reads what it wrote, and a wrong-size write and a
commit without alloc return the library's messages; a client learns its block's position in the global domain
(in Fortran order) and the reader assembles the global array."""
from __future__ import annotations

import subprocess

from ioloom import async_io, paths

MODULE = paths.REPO_ROOT / "native" / "async" / "ioloom_async.f90"
PROGRAM = paths.REPO_ROOT / "tests" / "programs" / "async_fortran.f90"


def build(mpi, where):
    """The program compiled with the module's source and linked with the built library, as a user of the module
    builds it (so not by conftest.build_program, which builds one source on its own)."""
    lib = paths.build_dir() / "lib"
    exe = where / f"async_fortran-{mpi.name}"
    subprocess.run([mpi.impl.mpifort, "-O2", "-J", str(where), "-o", str(exe), str(MODULE), str(PROGRAM), f"-L{lib}",
                    f"-lioloom-async-{mpi.name}", f"-Wl,-rpath,{lib}"], check=True, cwd=where)
    return exe


def test_fortran_program_writes_through_the_module(mpi, tmp_path):
    config = tmp_path / "f.yaml"
    config.write_text(f"name: fort\nmode: dedicated-cores\nbuffer: 1MiB\nwriter: {{directory: {tmp_path / 'out'}}}\n"
                      # theta(16, 8, 4), C order; 2 clients side by side along Fortran's first dimension
                      "layouts:\n  grid: {type: float64, dimensions: [4, 8, 16], global: [4, 8, 32], "
                      "position: [0, 0, rank * 16]}\n"
                      "variables:\n  theta: {layout: grid}\nevents: [checkpoint]\n")
    out = mpi.run(3, [build(mpi, tmp_path), config], timeout=120)
    assert "wrong size: 2 variable 'theta': the buffer has 16 bytes but its layout 'grid' needs 4096" in out.stdout
    assert "commit alone: 2 commit of 'theta' without ioloom_async_alloc" in out.stdout
    assert "short offset: 2 ioloom_async_block_position: 'theta' has 3 dimensions, more than offset's 2 values" \
        in out.stdout
    assert "position of 0: 0 0 0" in out.stdout and "position of 1: 16 0 0" in out.stdout, out.stdout
    output = async_io.open(tmp_path / "out")
    assert output.iterations() == list(range(8)) and len(output.events) == 16
    for it in range(8):  # 5 to 7 written in place
        for block in (0, 1):
            theta = output.read("theta", it, block)
            assert theta.shape == (4, 8, 16) and (theta == it + 0.001 * block).all()
        whole = output.global_array("theta", it)
        assert whole.shape == (4, 8, 32) and (whole[..., :16] == it).all() and (whole[..., 16:] == it + 0.001).all()


def test_fortran_configuration_error(mpi, tmp_path):
    config = tmp_path / "f.yaml"
    config.write_text("name: fort\nmode: sideways\n")
    out = mpi.run(2, [build(mpi, tmp_path), config], timeout=120)
    assert out.stdout.count("initialize: rank 0: ") == 2 and "mode must be one of" in out.stdout
