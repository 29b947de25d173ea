"""ioloom coord: applications that share storage agree who writes when (Dorier's CALCioM, Ch. 6). policy: the
decision rules; service: the coordinator (`ioloom coord serve`); client: the line protocol from Python. The C
client is native/coord/; the protocol and its use: docs/coord.md."""
