"""Driver for the logfs property tests, run under LD_PRELOAD=libioloom-logfs.so: reads one JSON operation
sequence per line from stdin, applies it with os.* calls (they go through libc's PLT, so the layer sees them) to
a plain file and to a container, and prints one JSON line: each target's observations (read data, offsets,
sizes, errors) and final content, in hex."""
import json
import os
import sys


def apply(path: str, ops: list) -> list:
    seen = []
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        for op, *args in ops:
            try:
                if op == "write":
                    seen.append(os.write(fd, bytes.fromhex(args[0])))
                elif op == "pwrite":
                    seen.append(os.pwrite(fd, bytes.fromhex(args[1]), args[0]))
                elif op == "writev":
                    seen.append(os.writev(fd, [bytes.fromhex(part) for part in args[0]]))
                elif op == "preadv":
                    bufs = [bytearray(n) for n in args[1]]
                    got = os.preadv(fd, bufs, args[0])
                    seen.append([got, b"".join(bufs).hex()])
                elif op == "read":
                    seen.append(os.read(fd, args[0]).hex())
                elif op == "pread":
                    seen.append(os.pread(fd, args[1], args[0]).hex())
                elif op == "seek":
                    seen.append(os.lseek(fd, args[0], args[1]))
                elif op == "truncate":
                    os.ftruncate(fd, args[0])
                elif op == "fsync":
                    os.fsync(fd)
                elif op == "reopen":
                    os.close(fd)
                    fd = os.open(path, os.O_RDWR | (os.O_APPEND if args[0] else 0))
                seen.append(os.fstat(fd).st_size)
            except OSError as e:
                seen.append(f"errno {e.errno}")
        os.lseek(fd, 0, os.SEEK_SET)
        content = b""
        while chunk := os.read(fd, 1 << 16):
            content += chunk
        seen.append(content.hex())
    finally:
        os.close(fd)
    return seen


for line in sys.stdin:
    plain, container, ops = json.loads(line)
    print(json.dumps([apply(plain, ops), apply(container, ops)]), flush=True)
