"""Results as data: one JSON record per property case, written by the pytest plugin
(``pytest properties/ --results FILE.ndjson``) and read back by ``longlook report``.

A record says what ran (property, its requirement ids, stack, version, controller,
case, mode, backend), what it came to (the outcome, with the finding's id for an
expected failure and the reason for anything that is not a verdict), how many
examples were judged, the failing deviations with their measured values, the
verdict text, the kept artifacts, the replay line and the duration
(``record.FIELDS`` lists them, harness/results/record.py builds them). Files are NDJSON: one record a line, each carrying ``format``,
so that sharded runs concatenate and merge (harness/results/store.py).

The room sits above the verdict (it reads the ledgers, deviations, findings and the
requirement catalogue) and below the report (harness/report/site.py renders the
records). Its package level imports nothing of the verdict, so the report reads
records without pulling in pytest or the verdict.
"""

from __future__ import annotations

#: The version of the record format; a reader refuses any other.
FORMAT = 1

#: Every outcome a record can have, worst first: a cell of the matrix holding
#: several cases shows the first of these among them.
OUTCOMES = ("failed", "error", "unexpected pass", "expected failure", "inconclusive", "not exercised",
            "passed", "skipped")
