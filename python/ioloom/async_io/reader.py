"""The reader of libioloom-async's outputs (see ioloom.async_io): the global index, each writer's index and data
(a plain file, a logfs container or an HDF5 file, as writer.format said), blocks as read-only numpy arrays."""
from __future__ import annotations

import builtins
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ioloom.async_io import AsyncOutputError

# One record per block (or signalled event, variable = -1 - event) of a writer's .index file (index.c).
INDEX_RECORD = np.dtype([("variable", "<i4"), ("block", "<i4"), ("iteration", "<i8"), ("offset", "<u8"),
                         ("nbytes", "<u8")])
FORMAT = "ioloom-async"
# writer.format: the suffix of each writer's data; the index's offsets are bytes of that file (hdf5: a dataset's
# contiguous data, at the address HDF5 gave it) or of the logfs container's logical file. hdf5-shared: every
# writer's blocks are in one file, <name>.h5, each at its place in its iteration's dataset of the variable.
DATA_SUFFIX = {"files": "data", "hdf5": "h5", "logfs": "data", "hdf5-shared": "h5"}


@dataclass(frozen=True)
class Variable:
    """A variable's layout: each block's shape, and in a global domain its global shape and each block's position
    (offset per dimension, indexed by block: the client's rank among clients)."""
    name: str
    id: int
    dtype: np.dtype
    shape: tuple[int, ...]
    global_shape: tuple[int, ...] | None = None
    positions: tuple[tuple[int, ...], ...] | None = None

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape)) * self.dtype.itemsize

    @property
    def global_nbytes(self) -> int:
        assert self.global_shape is not None, "only a variable in a global domain has a global array"
        return int(np.prod(self.global_shape)) * self.dtype.itemsize

    def place(self, block: int) -> tuple[slice, ...]:
        """Where a block lies in the global array."""
        if self.positions is None or not 0 <= block < len(self.positions):
            raise KeyError(f"variable {self.name!r} has no position for block {block} (its layout gives "
                           f"{'no global extents' if self.positions is None else f'{len(self.positions)} blocks'})")
        return tuple(slice(o, o + n) for o, n in zip(self.positions[block], self.shape))


def _variable(name: str, v: dict) -> Variable:
    positions = v.get("positions")
    return Variable(name, v["id"], np.dtype(v["type"]), tuple(v["dimensions"]),
                    tuple(v["global"]) if "global" in v else None,
                    None if positions is None else tuple(tuple(p) for p in positions))


def _index_path(path: Path) -> Path:
    """The global index named by path: the .json itself, or the only one in a directory."""
    if path.is_dir():
        found = [p for p in sorted(path.glob("*.json")) if _is_index(p)]
        if len(found) != 1:
            raise AsyncOutputError(f"{path}: expected one libioloom-async index (<name>.json) in the directory, "
                                   f"found {len(found)}; name the .json file")
        return found[0]
    if not path.exists():
        raise FileNotFoundError(2, "No such file or directory", str(path))
    return path


def _is_index(path: Path) -> bool:
    try:
        return json.loads(path.read_text()).get("format") == FORMAT
    except (ValueError, AttributeError, OSError):
        return False


class VariableView:
    """out[name]: indexing by iteration gives {block: array}; by (iteration, block), one array."""

    def __init__(self, output: Output, name: str):
        self._output, self._name = output, name

    def __getitem__(self, key):
        if isinstance(key, tuple):
            return self._output.read(self._name, *key)
        return {b: self._output.read(self._name, key, b) for b in self._output.blocks_at(self._name, key)}

    def global_array(self, iteration: int, fill=None) -> np.ndarray:
        return self._output.global_array(self._name, iteration, fill)


class Output:
    """One output of libioloom-async: its layouts, blocks, signalled events and every rank's counters."""

    def __init__(self, path: str | Path):
        self.path = _index_path(Path(path))
        try:
            meta = json.loads(self.path.read_text())
        except ValueError as err:
            raise AsyncOutputError(f"{self.path}: not a libioloom-async index ({err})") from None
        if not isinstance(meta, dict) or meta.get("format") != FORMAT:
            raise AsyncOutputError(f"{self.path}: not a libioloom-async index (no \"format\": \"{FORMAT}\")")
        self.meta = meta
        self.name, self.mode, self.events_declared = meta["name"], meta["mode"], list(meta["events"])
        self.variables = {name: _variable(name, v) for name, v in meta["variables"].items()}
        self.ranks = meta["ranks"]
        self.compression = meta.get("compression", "none")
        self.writer_format = meta.get("writer_format", "files")
        if self.writer_format not in DATA_SUFFIX:
            raise AsyncOutputError(f"{self.path}: writer_format {self.writer_format!r} is not one this reader knows "
                                   f"({', '.join(DATA_SUFFIX)}); update ioloom")
        self._by_id = {v.id: v for v in self.variables.values()}
        self._data: dict[int, np.memmap] = {}
        self._containers: dict = {}
        self._blocks: dict[tuple[int, int, int], tuple[int, int, int]] = {}
        self._events: list[tuple[str, int, int]] = []
        for writer in meta["writers"]:
            self._load_writer(int(writer))

    def _file(self, writer: int, suffix: str) -> Path:
        return self.path.parent / f"{self.name}.{writer}.{suffix}"

    def _load_writer(self, writer: int) -> None:
        raw = self._file(writer, "index").read_bytes()
        records = np.frombuffer(raw[:len(raw) - len(raw) % INDEX_RECORD.itemsize], INDEX_RECORD)
        data_size = self._data_size(writer)
        for rec in records.tolist():
            variable, block, iteration, offset, nbytes = rec
            if variable < 0:
                self._events.append((self.events_declared[-1 - variable], iteration, block))
                continue
            var = self._by_id.get(variable)
            stored_ok = nbytes == var.nbytes if var and self.compression == "none" else nbytes > 0
            # of a positioned variable in hdf5-shared, the offset is where the whole global array starts
            extent = var.global_nbytes if var is not None and self._in_global_dataset(var) else nbytes
            if var is None or not stored_ok or offset + extent > data_size:
                raise AsyncOutputError(f"{self._file(writer, 'index')}: a record (variable {variable}, iteration "
                                       f"{iteration}, block {block}) does not match the data file or the layouts; "
                                       "the output is damaged")
            self._blocks[(variable, iteration, block)] = (writer, offset, nbytes)

    def _in_global_dataset(self, var: Variable) -> bool:
        """hdf5-shared writes a positioned variable's blocks into one dataset of its global shape."""
        return self.writer_format == "hdf5-shared" and var.global_shape is not None

    def _data_file(self, writer: int) -> Path:
        if self.writer_format == "hdf5-shared":
            return self.path.parent / f"{self.name}.h5"
        return self._file(writer, DATA_SUFFIX[self.writer_format])

    def _container(self, writer: int):
        if writer not in self._containers:
            from ioloom.logfs.format import Container, FormatError
            try:
                self._containers[writer] = Container.open(self._data_file(writer))
            except (FormatError, OSError) as err:
                raise AsyncOutputError(f"{self._data_file(writer)}: not a readable logfs container ({err})") from None
        return self._containers[writer]

    def _data_size(self, writer: int) -> int:
        if self.writer_format == "logfs":
            return self._container(writer).size
        return self._data_file(writer).stat().st_size

    def _raw(self, writer: int, offset: int, nbytes: int) -> np.ndarray:
        """A block's stored bytes: a view of the data file, or read from the logfs container."""
        if self.writer_format == "logfs":
            return np.frombuffer(self._container(writer).read(offset, nbytes), np.uint8)
        if writer not in self._data:
            self._data[writer] = np.memmap(self._data_file(writer), dtype=np.uint8, mode="r")
        return self._data[writer][offset:offset + nbytes]

    def _variable(self, name: str) -> Variable:
        if name not in self.variables:
            raise KeyError(f"no variable {name!r} in {self.path} (it has {', '.join(self.variables)})")
        return self.variables[name]

    def iterations(self, variable: str | None = None) -> list[int]:
        """Iterations with at least one block (of `variable`, or of any variable)."""
        wanted = None if variable is None else self._variable(variable).id
        return sorted({it for v, it, _ in self._blocks if wanted is None or v == wanted})

    def blocks_at(self, variable: str, iteration: int) -> list[int]:
        """The blocks of a variable written at an iteration."""
        vid = self._variable(variable).id
        return sorted(b for v, it, b in self._blocks if v == vid and it == iteration)

    def read(self, variable: str, iteration: int, block: int) -> np.ndarray:
        """One block as a read-only array viewing the data file (shape and dtype from its layout); of a compressed
        output, the block decompressed (pyarrow's zstd codec); of a logfs output, a read-only copy."""
        var = self._variable(variable)
        where = self._blocks.get((var.id, int(iteration), int(block)))
        if where is None:
            raise KeyError(f"variable {variable!r} has no block {block} at iteration {iteration} in {self.path}")
        writer, offset, nbytes = where
        if self._in_global_dataset(var):
            whole = self._raw(writer, offset, var.global_nbytes)
            return whole.view(var.dtype).reshape(var.global_shape)[var.place(int(block))]
        raw = self._raw(writer, offset, nbytes)
        if self.compression == "zstd":
            import pyarrow as pa
            try:
                raw = np.frombuffer(pa.Codec("zstd").decompress(raw, decompressed_size=var.nbytes), np.uint8)
            except (OSError, ValueError) as err:
                raise AsyncOutputError(f"{self._data_file(writer)}: block {block} of {variable!r} at iteration "
                                       f"{iteration} does not decompress ({err}); the output is damaged") from None
        return raw.view(var.dtype).reshape(var.shape)

    def position(self, variable: str, block: int) -> tuple[int, ...]:
        """A block's offset per dimension in the variable's global array (a layout with global and position)."""
        var = self._variable(variable)
        return tuple(s.start for s in var.place(int(block)))

    def global_array(self, variable: str, iteration: int, fill=None) -> np.ndarray:
        """The variable's whole global array at an iteration, assembled from its blocks at their positions (a new
        array). Where no block was written (a block skipped or lost, or a part of the domain no client has) fill
        is used; without fill, such a gap is an error naming the missing blocks."""
        var = self._variable(variable)
        if var.global_shape is None or var.positions is None:
            raise AsyncOutputError(f"variable {variable!r} has no global extents in {self.path} (its layout gives "
                                   "no global and position); read it per block")
        present = self.blocks_at(variable, iteration)
        # initialize refuses blocks outside the global extents or overlapping, so the present blocks cover exactly
        # their values, and what they leave is a gap
        size = int(np.prod(var.global_shape))
        gap = size - len(present) * int(np.prod(var.shape))
        if gap and fill is None:
            missing = sorted(set(range(len(var.positions))) - set(present))
            raise AsyncOutputError(f"variable {variable!r} at iteration {iteration}: {gap} of {size} values have no "
                                   f"block (blocks missing: "
                                   f"{', '.join(map(str, missing)) or 'none; the blocks do not cover the domain'}"
                                   "); pass fill= to read it with those values filled")
        whole = np.full(var.global_shape, fill, var.dtype) if gap else np.empty(var.global_shape, var.dtype)
        for block in present:
            whole[var.place(block)] = self.read(variable, iteration, block)
        return whole

    def table(self, variable: str):
        """Every block of a variable as a pyarrow Table (iteration, block, values): one row per block, its values a
        fixed-size list viewing the data file (no copy), the layout's shape in the schema's metadata."""
        import pyarrow as pa
        var = self._variable(variable)
        keys = sorted((it, b) for v, it, b in self._blocks if v == var.id)
        size = int(np.prod(var.shape))
        chunks = [pa.FixedSizeListArray.from_arrays(pa.array(self.read(variable, it, b).reshape(-1)), size)
                  for it, b in keys]
        values = pa.chunked_array(chunks, type=pa.list_(pa.from_numpy_dtype(var.dtype), size))
        schema = pa.schema([("iteration", pa.int64()), ("block", pa.int32()), ("values", values.type)],
                           metadata={"variable": variable, "shape": json.dumps(list(var.shape))})
        return pa.Table.from_arrays([pa.array([k[0] for k in keys], pa.int64()),
                                     pa.array([k[1] for k in keys], pa.int32()), values], schema=schema)

    def __getitem__(self, variable: str) -> VariableView:
        self._variable(variable)
        return VariableView(self, variable)

    @property
    def events(self) -> list[tuple[str, int, int]]:
        """Signalled events as (event, iteration, block), in each writer's order."""
        return list(self._events)

    def counters(self) -> dict[str, float]:
        """Every rank's counters summed (role and rank left out)."""
        keys = [k for k in self.ranks[0] if k not in ("rank", "role")]
        return {k: builtins.sum(r[k] for r in self.ranks) for k in keys}
