"""logfs from Python: the container format reader (format.py), the container tools (tools.py) and the
`ioloom container` command group (cli.py)."""
