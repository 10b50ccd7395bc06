"""Deliberately broken congestion controllers (the mutant zoo, issue 7).

Each is loaded only through `--cc tests.mutants.<module>:<Class>`; the suite must
fail at least one property that the stock controller passes.
"""
