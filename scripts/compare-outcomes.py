#!/usr/bin/env python3
"""Compares the outcomes of two property runs, read from their JUnit XML files
(`pytest properties/ … --junitxml FILE`): every case must have the same outcome
(passed, failed, skipped, xfailed, error) in both, except the cases of a non-strict
finding (spec/findings.toml), which reproduce on some runs only, and cases that one
run could not decide (inconclusive: e.g. an endpoint starved of CPU) or whose failure
did not happen again when Hypothesis re-ran the same example on the same backend (a
FlakyFailure: real-time nondeterminism or an intermittent deviation, so the backend's
own outcome for it is not one value), which are no verdict to compare; both kinds are
listed, and a backend that judges a case differently *and* reproducibly still fails.

    scripts/compare-outcomes.py local.xml docker.xml --label-a local --label-b docker
    scripts/compare-outcomes.py check-virtual.xml,check-real.xml local.xml   # a run in parts

A side given as several files joined by commas is one run written in parts (`make
check`'s two passes, a sharded run); a case in two of them is an error of the input.

CI runs the ci profile locally, through Docker and through `--impl-cmd`, and gates on
this: a backend that judges differently from the local one is a harness bug (issue 24:
a wrong server port made eight properties fail falsely through Docker).
Exit 0: the same outcomes; 1: a difference; 2: a file cannot be read.
"""

from __future__ import annotations

import argparse
import re
import sys
import tomllib
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: How Hypothesis reports a failure it could not make happen again on the same input.
UNREPRODUCED = re.compile(r"FlakyFailure|Failed on the first call but did not on a subsequent one")


def run_outcomes(spec: str) -> dict[str, str]:
    """Test id → outcome of one run, from "A.xml" or from its parts "A1.xml,A2.xml"."""
    out: dict[str, str] = {}
    for part in filter(None, spec.split(",")):
        mine = outcomes(Path(part))
        twice = sorted(set(out) & set(mine))
        if twice:
            raise SystemExit(f"compare-outcomes: {part}: {twice[0]} is in an earlier part of {spec} too; "
                             "give the parts of one run, each case in one of them")
        out.update(mine)
    return out


def outcomes(path: Path) -> dict[str, str]:
    """Test id (file::name[params]) → outcome, from a pytest JUnit XML file."""
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError) as e:
        raise SystemExit(f"compare-outcomes: {path}: cannot read JUnit XML ({e}); "
                         "give the file pytest wrote with --junitxml") from None
    out = {}
    for case in root.iter("testcase"):
        name = f"{case.get('classname', '')}::{case.get('name', '')}"
        kind = "passed"
        for child in case:
            if child.tag == "failure":
                text = f"{child.get('message') or ''} {child.text or ''}"
                kind = "unreproduced" if UNREPRODUCED.search(text) else "failed"
            elif child.tag == "error":
                kind = "error"
            elif child.tag == "skipped":
                message = child.get("message") or ""
                kind = ("xfailed" if child.get("type") == "pytest.xfail"
                        else "inconclusive" if message.startswith("inconclusive")
                        else "not exercised" if message.startswith("not exercised") else "skipped")
        out[name] = kind
    return out


def flaky_cases() -> set[tuple[str, str]]:
    """(property, case id) of every non-strict finding."""
    data = tomllib.loads((ROOT / "spec" / "findings.toml").read_text())
    return {(f["property"], f["case"]) for f in data.get("finding", []) if not f["strict"]}


def _key(test_id: str) -> tuple[str, str]:
    """(property name, parametrisation id) of a JUnit test id."""
    m = re.search(r"::(test_\w+)(?:\[(.*)\])?$", test_id)
    return (m.group(1), m.group(2) or "") if m else (test_id, "")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("a", help="run A's JUnit XML file, or its parts joined by commas")
    ap.add_argument("b", help="run B's, likewise")
    ap.add_argument("--label-a", default="a")
    ap.add_argument("--label-b", default="b")
    ap.add_argument("--b-subset", action="store_true",
                    help="B ran a subset of A's properties (e.g. CI's Docker run): compare the cases B ran; "
                         "a case of A's absent from B is no difference")
    args = ap.parse_args(argv)
    a, b = run_outcomes(args.a), run_outcomes(args.b)
    if not a or not b:
        print(f"compare-outcomes: no test case in {args.a if not a else args.b}: nothing was judged")
        return 1
    if args.b_subset:
        a = {k: v for k, v in a.items() if k in b}
    flaky = flaky_cases()
    differ, tolerated, undecided = [], [], []
    for test_id in sorted(set(a) | set(b)):
        oa, ob = a.get(test_id, "absent"), b.get(test_id, "absent")
        if oa == ob:
            continue
        line = f"{test_id}: {args.label_a} {oa}, {args.label_b} {ob}"
        if {"inconclusive", "unreproduced"} & {oa, ob}:
            undecided.append(line)
        else:
            (tolerated if _key(test_id) in flaky else differ).append(line)
    same = sum(1 for test_id in set(a) & set(b) if a[test_id] == b[test_id])
    print(f"compare-outcomes: {same} cases alike, {len(tolerated)} differ on a non-strict finding, "
          f"{len(undecided)} undecided on one side, {len(differ)} differ "
          f"({args.label_a}: {len(a)} cases, {args.label_b}: {len(b)})")
    for line in tolerated:
        print(f"  tolerated (non-strict finding): {line}")
    for line in undecided:
        print(f"  undecided (inconclusive, or a failure that did not happen again on its own backend): {line}")
    for line in differ:
        print(f"  DIFFERENT: {line}")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
