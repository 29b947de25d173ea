"""`ioloom predict`: an online grammar of each process's I/O that predicts its next operation (Omnisc'IO, Dorier's
thesis Ch. 7; specification in docs/predict.md). grammar.py: Sequitur with predictors; model.py: the per-process
model (sizes, offsets, times); source.py: operations and context symbols from a trace; metrics.py: the thesis's
figures; skeleton.py: the grammar as an I/O skeleton; cli.py: the command."""
