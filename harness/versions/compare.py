"""What changed from one release to the next: property outcomes, the sender's
congestion-state transitions, and goodput on each reference schedule.

A goodput change is reported with Mann–Whitney U's two-sided p over the runs of the
two releases (scipy.stats): rank-based, so one slow run does not carry it, and exact
for the few runs a sweep makes. A change counts as significant at p < ALPHA; others
are listed with their p, never as a change.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from dataclasses import dataclass, field

from harness.versions import SCHEDULES

ALPHA = 0.05


@dataclass(frozen=True)
class Goodput:
    schedule: str
    mbps: tuple[float, ...]  # one per successful run
    failed: int = 0  # runs that did not complete (timeout, wrong bytes)

    @property
    def median(self) -> float | None:
        return statistics.median(self.mbps) if self.mbps else None

    def cell(self) -> str:
        if not self.mbps:
            return f"— ({self.failed} failed)" if self.failed else "—"
        text = f"{self.median:.2f} [{min(self.mbps):.2f}–{max(self.mbps):.2f}]"
        return text + (f", {self.failed} failed" if self.failed else "")


@dataclass(frozen=True)
class Release:
    version: str
    goodput: dict[str, Goodput]
    transitions: dict[str, int]  # 'From→To': how many times, over all reference runs
    outcomes: dict[str, str]  # 'property[case]': outcome
    properties_rc: int | None = None


@dataclass
class Diff:
    old: str
    new: str
    outcomes: list[tuple[str, str, str]] = field(default_factory=list)  # (case, was, now)
    appeared: list[str] = field(default_factory=list)
    disappeared: list[str] = field(default_factory=list)
    goodput: list[tuple[str, float, float, float]] = field(default_factory=list)  # (schedule, was, now, p)
    unchanged_goodput: list[tuple[str, float, float, float]] = field(default_factory=list)

    def empty(self) -> bool:
        return not (self.outcomes or self.appeared or self.disappeared or self.goodput)


def release(version: str, reference_records: list[dict], outcomes: dict[str, str], rc: int | None) -> Release:
    per: dict[str, list[float]] = defaultdict(list)
    failed: dict[str, int] = defaultdict(int)
    moves: dict[str, int] = defaultdict(int)
    for r in reference_records:
        name = SCHEDULES[int(r["x"])]
        if r.get("ok"):
            per[name].append(r["goodput_bps"] / 1e6)
        else:
            failed[name] += 1
        for move, n in (r.get("transitions") or {}).items():
            moves[move] += n
    goodput = {name: Goodput(name, tuple(per[name]), failed[name]) for name in SCHEDULES.values()}
    return Release(version, goodput, dict(sorted(moves.items())), outcomes, rc)


def p_value(a: tuple[float, ...], b: tuple[float, ...]) -> float:
    """Two-sided Mann–Whitney U p; 1.0 when either side has no runs or all are equal."""
    if not a or not b or len(set(a) | set(b)) == 1:
        return 1.0
    from scipy.stats import mannwhitneyu

    return float(mannwhitneyu(a, b, alternative="two-sided").pvalue)


def diff(old: Release, new: Release) -> Diff:
    d = Diff(old.version, new.version)
    for case in sorted(set(old.outcomes) | set(new.outcomes)):
        was, now = old.outcomes.get(case, "absent"), new.outcomes.get(case, "absent")
        if was != now:
            d.outcomes.append((case, was, now))
    d.appeared = sorted(set(new.transitions) - set(old.transitions))
    d.disappeared = sorted(set(old.transitions) - set(new.transitions))
    for name in SCHEDULES.values():
        a, b = old.goodput[name], new.goodput[name]
        if a.median is None or b.median is None:
            continue
        row = (name, a.median, b.median, p_value(a.mbps, b.mbps))
        (d.goodput if row[3] < ALPHA else d.unchanged_goodput).append(row)
    return d


def _tally(outcomes: dict[str, str]) -> str:
    counts: dict[str, int] = defaultdict(int)
    for o in outcomes.values():
        counts[o] += 1
    order = ("passed", "failed", "expected failure", "unexpected pass", "not exercised", "inconclusive", "skipped", "error")
    return ", ".join(f"{counts[o]} {o}" for o in order if counts.get(o)) or "not run"


def table(releases: list[Release]) -> str:
    """The per-release table (Markdown)."""
    heads = ["release", "properties", *(f"{s} Mbit/s" for s in SCHEDULES.values()), "transitions"]
    lines = ["| " + " | ".join(heads) + " |", "|" + "---|" * len(heads)]
    for r in releases:
        props = _tally(r.outcomes) + (f" (pytest exited {r.properties_rc})" if r.properties_rc not in (0, 1, None) else "")
        cells = [r.version, props, *(r.goodput[s].cell() for s in SCHEDULES.values()), str(len(r.transitions))]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def render_diff(d: Diff) -> str:
    lines = [f"### {d.old} → {d.new}"]
    if d.empty():
        lines.append("No change in property outcomes, transitions or goodput"
                     + (f" (goodput p ≥ {ALPHA} on every schedule)." if d.unchanged_goodput else "."))
        return "\n".join(lines)
    for case, was, now in d.outcomes:
        lines.append(f"- {case}: {was} → {now}")
    for move in d.appeared:
        lines.append(f"- transition appeared: {move}")
    for move in d.disappeared:
        lines.append(f"- transition disappeared: {move}")
    for name, was, now, p in d.goodput:
        change = (now - was) / was
        pct = f"{change:+.1%}" if abs(change) < 0.1 else f"{change:+.0%}"
        lines.append(f"- goodput, {name}: {was:.2f} → {now:.2f} Mbit/s ({pct}, Mann–Whitney p = {p:.3f})")
    if d.unchanged_goodput:
        lines.append("- goodput unchanged (p ≥ %.2f): " % ALPHA
                     + ", ".join(f"{n} {w:.2f} → {x:.2f} (p = {p:.2f})" for n, w, x, p in d.unchanged_goodput))
    return "\n".join(lines)
