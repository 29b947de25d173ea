"""ioloom coord: applications that share storage agree who writes when (Dorier's CALCioM, Ch. 6). policy: the
decision rules; service: the coordinator (`ioloom coord serve`); client: the line protocol from Python. The C
client is native/coord/; the protocol and its use: docs/coord.md."""

COORDINATED = ("fcfs", "interrupt", "dynamic")  # the policies that decide who writes when
MIN_GAIN = 0.05  # dynamic serialises only to save this fraction of f (coord serve --min-gain); here, light to import
REVISED_BY = 1.5  # dynamic places a phase again when its time alone is revised by more than this factor


def offsets(t_a: float, t_b: float, points: int, digits: int = 9) -> list[float]:
    """A Δ-graph's start offsets dt of B after A (Ch. 6): `points` evenly from -T_B (B starts first and ends as A
    starts) to T_A (A ends as B starts), rounded to `digits` decimals."""
    return [round(-t_b + i * (t_a + t_b) / (points - 1), digits) for i in range(points)]
