"""`ioloom coord`: run the coordinator (serve) and look into a running one (status). docs/coord.md."""
from __future__ import annotations

import asyncio
import json
import signal

import typer

from ioloom.coord import MIN_GAIN

app = typer.Typer(help="Coordinate the I/O phases of applications sharing storage (CALCioM, Dorier Ch. 6).",
                  no_args_is_help=True)
ADDRESS = typer.Option(None, "--address", help="The coordinator's Unix socket (PATH or unix:PATH; default "
                                               "$IOLOOM_COORD, else $XDG_RUNTIME_DIR/ioloom-coord.sock, else "
                                               "/tmp/ioloom-coord-<uid>.sock), or tcp:HOST:PORT for a cluster.")


@app.command("serve")
def serve(address: str | None = ADDRESS,
          policy: str = typer.Option("dynamic", help="Decision rule: interfere, fcfs, interrupt or dynamic "
                                                    "(docs/coord.md)."),
          metric: str = typer.Option("core-seconds", help="What dynamic minimises: core-seconds (sum N_X T_X) or "
                                                          "factors (sum of interference factors)."),
          min_gain: float = typer.Option(MIN_GAIN, "--min-gain", min=0.0, max=0.99,
                                         help="dynamic serialises or interrupts only to save this fraction of "
                                              "the machine time interference would waste (else: interfere)."),
          lease: float = typer.Option(10.0, min=0.01, help="Seconds without news after which a phase expires."),
          bandwidth: float = typer.Option(1e9, min=1.0, help="Bytes/s, to estimate a phase's time alone when "
                                                             "its client gives only bytes.")) -> None:
    """Run the coordinator until interrupted (Ctrl-C or SIGTERM)."""
    from ioloom.coord import service
    from ioloom.coord.policy import Policy
    try:
        chosen = Policy(policy, metric, min_gain)
    except ValueError as err:
        raise typer.BadParameter(str(err)) from None
    where = address or service.default_address()

    def ready() -> None:
        print(f"ioloom coord: policy {chosen.name} ({chosen.metric}), listening on {where}", flush=True)

    async def main() -> None:
        task = asyncio.current_task()
        assert task is not None  # inside asyncio.run
        for sig in (signal.SIGINT, signal.SIGTERM):
            asyncio.get_running_loop().add_signal_handler(sig, task.cancel)
        try:
            await service.serve(where, chosen, lease, bandwidth, ready)
        except asyncio.CancelledError:
            pass
    asyncio.run(main())


@app.command("status")
def status(address: str | None = ADDRESS,
           as_json: bool = typer.Option(False, "--json", help="Print the state as JSON.")) -> None:
    """The phases a running coordinator knows, in writing order, and its counters."""
    from ioloom.coord import service
    from ioloom.coord.client import Client
    with Client(address or service.default_address(), "status") as client:
        state = client.status()
    if as_json:
        print(json.dumps(state, indent=2))
        return
    print(f"policy {state['policy']} ({state['metric']}); " +
          ", ".join(f"{k} {v}" for k, v in state["counts"].items()))
    for p in state["order"]:
        print(f"  {'writes' if p['may_write'] else 'waits '} {p['name']} (clients {p['clients']}, {p['cores']} "
              f"cores): {p['written']}/{p['bytes']} bytes, {p['remaining']:.3f} s of {p['t_alone']:.3f} s left")
