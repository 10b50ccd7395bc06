#!/usr/bin/env python3
"""Prints the failing and erroring cases of pytest JUnit XML files, each with the head
of its message: the digest `.ci/run` prints last, so that a CI log cut to its final
lines still says which case failed in which step, and why.

    scripts/junit-failures.py artifacts/ci-*.xml

A file that is missing or unreadable is named, not fatal: a step that never ran
wrote none. Exit 0 always; the steps' own statuses gate CI.
"""

from __future__ import annotations

import argparse
import xml.etree.ElementTree as ET
from pathlib import Path

#: Lines of each failure's text to print: the verdict and its first details.
HEAD_LINES = 12


def _head(message: str, text: str) -> list[str]:
    """The message's first line, then pytest's exception lines (`E   …`) of the
    traceback, where the verdict is; the traceback's last lines when it has none."""
    lines = text.splitlines()
    raised = [line[1:].strip() for line in lines if line.startswith("E ")]
    body = raised[:HEAD_LINES] if raised else [line for line in lines if line.strip()][-HEAD_LINES:]
    first = message.splitlines()[:1]
    return first + [line for line in body if line not in first]


def failures(path: Path) -> list[tuple[str, str, str]]:
    """(test id, failure or error, head of its text) for each failing case of `path`."""
    out = []
    for case in ET.parse(path).getroot().iter("testcase"):
        for child in case:
            if child.tag in ("failure", "error"):
                out.append((f"{case.get('classname', '')}::{case.get('name', '')}", child.tag,
                            "\n".join(_head(child.get("message") or "", child.text or ""))))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="+", type=Path, help="pytest --junitxml files")
    args = parser.parse_args(argv)
    total = 0
    for path in args.files:
        try:
            found = failures(path)
        except (OSError, ET.ParseError) as e:
            print(f"junit-failures: {path}: not read ({e.__class__.__name__}: {e})")
            continue
        for test, kind, head in found:
            total += 1
            print(f"--- {path.name}: {kind}: {test}")
            print("\n".join(f"    {line}" for line in head.splitlines()))
    print(f"junit-failures: {total} failing case(s) in {len(args.files)} file(s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
