"""What the recorded operations do, by name: which move data in, which move it out. Shared by the run summary
and anything that sums bytes per direction."""
from __future__ import annotations

import re

# POSIX and stdio calls that move bytes (ret_bytes) from a file into memory, or out of memory into a file.
POSIX_READS = {"read", "__read_chk", "pread", "pread64", "__pread_chk", "__pread64_chk", "readv", "preadv", "preadv64",
               "preadv2", "preadv64v2"}
POSIX_WRITES = {"write", "pwrite", "pwrite64", "writev", "pwritev", "pwritev64", "pwritev2", "pwritev64v2"}
STDIO_READS = {"fread", "fread_unlocked", "__fread_chk", "__fread_unlocked_chk", "getc", "fgetc", "getc_unlocked",
               "fgetc_unlocked", "getchar", "getchar_unlocked", "fgets", "fgets_unlocked", "__fgets_chk",
               "__fgets_unlocked_chk", "getline", "getdelim", "__getdelim"}
STDIO_WRITES = {"fwrite", "fwrite_unlocked", "printf", "fprintf", "vprintf", "vfprintf", "__printf_chk",
                "__fprintf_chk", "__vprintf_chk", "__vfprintf_chk", "puts", "fputs", "fputs_unlocked", "putc", "fputc",
                "putc_unlocked", "fputc_unlocked", "putchar", "putchar_unlocked"}
# copy_file_range and sendfile are recorded twice: aux 0 is the source side (a read), aux 1 the destination.
COPIES = {"copy_file_range", "sendfile", "sendfile64"}
# Asynchronous requests move their bytes when aio_return collects them; aux is LIO_READ (0) or LIO_WRITE (1).
AIO_RESULTS = {"aio_return", "aio_return64"}
MPI_DATA = re.compile(r"^MPI_File_i?(read|write)")


def direction(op: str, aux: int = -1) -> str | None:
    """'read', 'write' or None for an operation name (and, for kernel copies, its aux)."""
    if op in POSIX_READS or op in STDIO_READS:
        return "read"
    if op in POSIX_WRITES or op in STDIO_WRITES:
        return "write"
    if op in COPIES:
        return "read" if aux == 0 else "write"
    if op in AIO_RESULTS:
        return {0: "read", 1: "write"}.get(aux)
    match = MPI_DATA.match(op)
    return match.group(1) if match else None
