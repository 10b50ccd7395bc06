"""`longlook reproduce`: the seed studies' experiments re-run on today's stacks.

experiments.py holds each experiment's conditions and published figures as data,
sweep.py runs one transfer per (stack, point, run) into a resumable cache;
harness/report/reproduction.py puts them beside the published columns
(docs/reproductions.md).
"""
