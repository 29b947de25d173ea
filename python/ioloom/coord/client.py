"""The coordinator's line protocol from Python (docs/coord.md): used by tests and by `ioloom coord status`.
Applications use the C client (native/coord/ioloom_coord.h)."""
from __future__ import annotations

import json
import socket

from ioloom.coord.service import PROTOCOL, socket_path, tcp_endpoint


class CoordError(RuntimeError):
    """The coordinator refused a request (its ERR line) or could not be reached."""


class Client:
    """One connection to a coordinator, as application `name` running on `cores` cores."""

    def __init__(self, address: str, name: str = "python", cores: int = 1, timeout: float = 30.0) -> None:
        endpoint = tcp_endpoint(address)
        try:
            if endpoint:
                self.sock = socket.create_connection(endpoint, timeout)
            else:
                self.sock = socket.socket(socket.AF_UNIX)
                self.sock.settimeout(timeout)
                self.sock.connect(socket_path(address))
        except OSError as err:
            if not endpoint:
                self.sock.close()
            raise CoordError(f"no coordinator at {address} ({err.strerror}); start one with "
                             f"`ioloom coord serve --address {address}`") from None
        self.lines = self.sock.makefile("rb")
        self.id = int(self.ask(f"HELLO {PROTOCOL} {name} {cores}").split()[1])

    def ask(self, request: str) -> str:
        """Send one request line, return its reply line; CoordError on ERR."""
        self.sock.sendall(request.encode() + b"\n")
        reply = self.lines.readline().decode().rstrip("\n")
        if not reply:
            raise CoordError("the coordinator closed the connection")
        if reply.startswith("ERR "):
            raise CoordError(reply[4:])
        return reply

    def inform(self, size: int, seconds: float = 0.0) -> bool:
        return self.ask(f"INFORM {size} {seconds}") == "GO"

    def check(self) -> bool:
        return self.ask("CHECK") == "GO"

    def wait(self, bound: float) -> bool:
        return self.ask(f"WAIT {int(bound * 1000)}") == "GO"

    def release(self, written: int) -> bool:
        return self.ask(f"RELEASE {written}") == "GO"

    def done(self) -> None:
        self.ask("DONE")

    def status(self) -> dict:
        return json.loads(self.ask("STATUS")[3:])

    def close(self) -> None:
        self.lines.close()
        self.sock.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
