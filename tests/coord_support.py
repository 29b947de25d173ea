"""Shared by the coord tests: a coordinator running in a thread of the test process."""
import asyncio
import threading

import pytest

from ioloom.coord import service
from ioloom.coord.policy import Policy


@pytest.fixture
def coordinator(tmp_path):
    """Start a coordinator in a thread: coordinator(policy, lease=10) gives its address (a Unix socket in tmp_path
    unless one is given); stopped at the end."""
    started = []

    def start(policy="dynamic", lease=10.0, metric="core-seconds", address=None):
        address = address or str(tmp_path / f"c{len(started)}.sock")
        loop = asyncio.new_event_loop()
        ready = threading.Event()
        task = loop.create_task(service.serve(address, Policy(policy, metric), lease, 1e6, ready.set))
        thread = threading.Thread(target=lambda: loop.run_until_complete(asyncio.gather(task, return_exceptions=True)))
        thread.start()
        assert ready.wait(10), "the coordinator did not start"
        started.append((loop, task, thread))
        return address
    yield start
    for loop, task, thread in started:
        loop.call_soon_threadsafe(task.cancel)
        thread.join(10)
        assert not thread.is_alive(), "the coordinator did not stop within 10 s of being cancelled"
        # its connection handlers were cancelled and awaited: none is left for the closed loop to destroy
        assert not asyncio.all_tasks(loop), f"tasks left at shutdown: {asyncio.all_tasks(loop)}"
        loop.close()
