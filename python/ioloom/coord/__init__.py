"""ioloom coord: applications that share storage agree who writes when (Dorier's CALCioM, Ch. 6). policy: the
decision rules; service: the coordinator (`ioloom coord serve`); client: the line protocol from Python. The C
client is native/coord/; the protocol and its use: docs/coord.md."""

MIN_GAIN = 0.05  # dynamic serialises only to save this fraction of f (coord serve --min-gain); here, light to import
REVISED_BY = 1.5  # dynamic places a phase again when its time alone is revised by more than this factor
