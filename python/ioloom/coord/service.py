"""`ioloom coord serve`: the coordinator, an asyncio server on a local Unix socket speaking the line protocol of
docs/coord.md (version PROTOCOL). Each request gets one reply line; WAIT is answered when the client may write or
its bound has passed. A client that asked NOTIFY is also sent a line `NOTE GO` or `NOTE WAIT` whenever whether it
may write changes, so it learns of an interruption without asking (and need not wait for RELEASE's reply). A
client leaves its application's phase with DONE, with its connection (a crashed process closes it) or when its
lease runs out; the phase ends with its last member. At shutdown the connection handlers are cancelled and
awaited, so each client's phase ends and its socket is closed before the event loop is."""
from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import time
from pathlib import Path

from ioloom.coord.policy import Policy
from ioloom.coord.state import State

PROTOCOL = 1
MAX_LINE = 4096


class AddressError(ValueError):
    """An address the coordinator cannot listen on."""


class ProtocolError(ValueError):
    """A request the coordinator cannot read; answered with ERR and the message."""


def default_address() -> str:
    """$IOLOOM_COORD, else ioloom-coord.sock in $XDG_RUNTIME_DIR, else /tmp/ioloom-coord-<uid>.sock."""
    if os.environ.get("IOLOOM_COORD"):
        return os.environ["IOLOOM_COORD"]
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    return str(Path(runtime) / "ioloom-coord.sock") if runtime else f"/tmp/ioloom-coord-{os.getuid()}.sock"


def tcp_endpoint(address: str) -> tuple[str, int] | None:
    """(host, port) of a tcp:HOST:PORT address (a cluster's coordinator); None for a Unix socket's."""
    if not address.startswith("tcp:"):
        return None
    host, colon, port = address[4:].rpartition(":")
    if not colon or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise AddressError(f"coordinator address {address!r}: write tcp:HOST:PORT with a port of 1 to 65535")
    return host.removeprefix("[").removesuffix("]"), int(port)


def socket_path(address: str) -> str:
    """The file of a Unix socket address, given as PATH or unix:PATH."""
    path = address.removeprefix("unix:")
    if not path or len(path.encode()) > 107:
        raise AddressError(f"coordinator address {address!r} must be a socket path of 1 to 107 bytes")
    return path


def claim(path: str) -> None:
    """Remove a socket file left by a coordinator that is gone; refuse if one still listens there."""
    if not os.path.exists(path):
        return
    probe = socket.socket(socket.AF_UNIX)
    try:
        probe.connect(path)
    except OSError:
        os.unlink(path)
        return
    finally:
        probe.close()
    raise AddressError(f"a coordinator already listens on {path}; stop it or choose another --address")


def _number(word: str, what: str, kind=int):
    try:
        value = kind(word)
    except ValueError:
        raise ProtocolError(f"{what} must be a number, got {word!r}") from None
    if value < 0:
        raise ProtocolError(f"{what} must be >= 0, got {word!r}")
    return value


class Coordinator:
    """The state of one coordinator and its clients' connections."""

    def __init__(self, policy: Policy, lease: float, bandwidth: float) -> None:
        self.state = State(policy, lease, bandwidth, own_time=True)
        self.changed = asyncio.Condition()
        self.clients = 0
        self.waiting: set[int] = set()  # clients inside WAIT: alive, so their lease does not run out
        self.notified: dict[int, list] = {}  # client -> [its stream, what it was last told: GO True, WAIT False]
        self.handlers: set[asyncio.Task] = set()  # one per open connection: cancelled and awaited at shutdown

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Serve one client until it says BYE or its connection ends; its phase then ends too."""
        self.clients += 1
        client, hello = self.clients, None
        handler = asyncio.current_task()
        assert handler is not None, "asyncio runs every connection handler as a task"
        self.handlers.add(handler)
        try:
            while line := await reader.readline():
                reply = await self.answer(client, line, hello, writer)
                if isinstance(reply, tuple):
                    hello, reply = reply
                writer.write(reply.encode() + b"\n")
                await writer.drain()
                if reply == "OK bye":
                    break
        except (ConnectionError, ValueError):  # ValueError: a line longer than the stream's limit
            pass
        finally:
            self.notified.pop(client, None)
            await self.end(client, "finished")
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()
            self.handlers.discard(handler)

    async def shut(self) -> None:
        """Cancel every connection handler and wait until each has ended its client's phase and closed its
        socket."""
        handlers = list(self.handlers)
        for handler in handlers:
            handler.cancel()
        await asyncio.gather(*handlers, return_exceptions=True)

    async def end(self, client: int, reason: str) -> None:
        async with self.changed:
            if self.state.finish(client, reason):
                self.tell_all()

    def tell_all(self) -> None:
        """The order changed: wake the clients in WAIT and note the change to each NOTIFY client it concerns."""
        self.changed.notify_all()
        for client, told in self.notified.items():
            may = self.state.may_write(client)
            if may != told[1]:
                told[0].write(b"NOTE GO\n" if may else b"NOTE WAIT\n")
                told[1] = may

    async def answer(self, client: int, line: bytes, hello, writer: asyncio.StreamWriter):
        """The reply to one request (with HELLO: the client's (name, cores) too)."""
        words = line.decode(errors="replace").split()
        try:
            if not words:
                raise ProtocolError("empty request")
            if words[0] == "HELLO":
                return self.greet(words), f"OK {client}"
            if hello is None:
                raise ProtocolError(f"say HELLO {PROTOCOL} <name> <cores> first")
            reply = await self.request(client, hello, words, writer)
        except ProtocolError as err:
            return f"ERR {err}"
        if client in self.notified and reply in ("GO", "WAIT"):
            self.notified[client][1] = reply == "GO"
        return reply

    def greet(self, words: list[str]) -> tuple[str, int]:
        if len(words) != 4:
            raise ProtocolError(f"usage: HELLO {PROTOCOL} <name> <cores>")
        if words[1] != str(PROTOCOL):
            raise ProtocolError(f"protocol version {words[1]} not spoken here; this coordinator speaks {PROTOCOL}")
        cores = _number(words[3], "cores")
        if cores < 1:
            raise ProtocolError("cores must be >= 1")
        return words[2], cores

    async def request(self, client: int, hello: tuple[str, int], words: list[str], writer) -> str:
        verb, args, now = words[0], words[1:], time.monotonic()
        arity = {"INFORM": 2, "CHECK": 0, "WAIT": 1, "RELEASE": 1, "DONE": 0, "STATUS": 0, "BYE": 0, "NOTIFY": 0}
        if verb not in arity:
            raise ProtocolError(f"unknown request {verb!r}; see docs/coord.md")
        if len(args) != arity[verb]:
            raise ProtocolError(f"{verb} takes {arity[verb]} argument(s), got {len(args)}")
        async with self.changed:
            if verb == "INFORM":
                size, seconds = _number(args[0], "bytes"), _number(args[1], "seconds", float)
                if size == 0 and seconds == 0:
                    raise ProtocolError("INFORM needs the phase's bytes or its expected seconds")
                self.state.inform(client, *hello, size, seconds, now)
                self.tell_all()  # the ones writing may have to yield now
            elif verb == "WAIT":
                return await self.wait(client, _number(args[0], "milliseconds") / 1000)
            elif verb == "RELEASE":  # answered like CHECK: whether the next step may be written at once
                self.state.release(client, _number(args[0], "bytes"), now)
            elif verb == "DONE":
                if self.state.finish(client):
                    self.tell_all()
                return "OK"
            elif verb == "NOTIFY":  # answered like CHECK; later changes come as NOTE lines
                self.notified[client] = [writer, None]
            elif verb == "STATUS":
                return "OK " + json.dumps(self.state.snapshot(now))
            elif verb == "BYE":
                return "OK bye"
            self.state.touch(client, now)
            return "GO" if self.state.may_write(client) else "WAIT"

    async def wait(self, client: int, bound: float) -> str:
        """GO once the client may write, TIMEOUT after `bound` seconds (the caller holds self.changed)."""
        self.waiting.add(client)
        try:
            await asyncio.wait_for(self.changed.wait_for(lambda: self.state.may_write(client)), bound)
        except TimeoutError:
            return "TIMEOUT"
        finally:
            self.waiting.discard(client)
            self.state.touch(client, time.monotonic())
        return "GO"

    async def expire_forever(self) -> None:
        """Every quarter lease, drop the phases whose lease has run out."""
        while True:
            await asyncio.sleep(self.state.lease / 4)
            async with self.changed:
                now = time.monotonic()
                for client in self.waiting:
                    self.state.touch(client, now)
                if self.state.expire(now):
                    self.tell_all()


def yield_to_writers() -> None:
    """Run this thread as a batch task: woken by a client's line, it does not preempt the running one (the
    writer that sent it), but runs on a free core or at the writer's next sleep. A client waiting for a reply is
    asleep, so its answer is not delayed on a machine with a free core."""
    with contextlib.suppress(AttributeError, OSError):  # not Linux: nothing to change
        os.sched_setscheduler(0, os.SCHED_BATCH, os.sched_param(0))


async def serve(address: str, policy: Policy, lease: float, bandwidth: float, ready=None) -> None:
    """Run a coordinator on `address` (a Unix socket, or tcp:HOST:PORT) until cancelled; `ready()` is called once
    it listens."""
    endpoint = tcp_endpoint(address)
    path = None if endpoint else socket_path(address)
    if path:
        claim(path)
    yield_to_writers()
    coordinator = Coordinator(policy, lease, bandwidth)
    if endpoint:
        server = await asyncio.start_server(coordinator.handle, *endpoint, limit=MAX_LINE)
    else:
        server = await asyncio.start_unix_server(coordinator.handle, path, limit=MAX_LINE)
    expiry = asyncio.create_task(coordinator.expire_forever())
    try:
        if ready:
            ready()
        async with server:
            await server.serve_forever()
    finally:
        expiry.cancel()
        await asyncio.gather(expiry, coordinator.shut(), return_exceptions=True)
        if path and os.path.exists(path):
            os.unlink(path)
