"""`ioloom replay`: a traced run's POSIX and stdio calls made again, per process, in a new directory
(docs/replay.md)."""
