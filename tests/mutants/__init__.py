"""Deliberately broken congestion controllers: the mutant zoo (issue 7).

Each module holds one mutant of aioquic's NewReno or CUBIC, a small subclass whose
docstring names the bug and where it was seen. Load one with
`--cc tests.mutants.<module>:<Class>`; `make mutants` (scripts/mutants.py) runs the
properties against every mutant listed in `catalogue.py` and counts the kills.

A mutant declares `longlook_family`, the family of the controller it mutates, so
the properties judge it by that family's rules (a NewReno with β = 0.9 is still a
NewReno that claims to halve). Patches outside the class go through `_patch`.
"""
