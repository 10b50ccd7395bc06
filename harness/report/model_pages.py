"""The report's model pages: model.html, which transitions of the TLA+ model the
run reached per stack · controller, and stacks/<target>.html, each target's state
machine as its runs took it (Kakhki et al., Fig. 3: the states, and every edge with
how often it was taken; edges of the model it never took in grey).

They read the model coverage the properties record (<artifacts>/model-coverage/,
harness/model/coverage.py) and the model's own transitions (TLC on
spec/MCTransitions.tla, about 15 s), so `longlook report` makes them only when given
`--model-coverage DIR`.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from harness.report.html import esc, link, page, slug, table


def stack_href(target: str) -> str:
    return f"stacks/{slug(target)}.html"


def write_model_pages(out: Path, coverage_dir: Path | None, notes: list[str]) -> set[str]:
    """Writes model.html (always: it says when no coverage was given) and a page per
    target; returns the targets that got one."""
    if coverage_dir is None:
        (out / "model.html").write_text(page("model coverage", "<p>No model coverage was given: "
                                             "<code>longlook report … --model-coverage artifacts/model-coverage"
                                             "</code> adds it.</p>"))
        return set()
    from harness.model import coverage as mc

    if not coverage_dir.is_dir():
        raise FileNotFoundError(f"--model-coverage {coverage_dir}: no such directory (the properties write it "
                                "under <artifacts>/model-coverage/)")
    stacks = mc.load([coverage_dir])
    try:
        model = mc.model_transitions()
    except Exception as e:  # noqa: BLE001 - TLC missing or failing costs the model pages, not the report
        notes.append(f"model pages left out: TLC could not list the model's transitions ({e})")
        (out / "model.html").write_text(page("model coverage", f"<p>TLC could not list the model's transitions: "
                                             f"{esc(str(e)[:500])}</p>"))
        return set()
    observable = sorted((t for t in model if mc.observable(t)), key=lambda t: t)
    names = sorted(stacks)
    rows = [["from", "action", "to", *[link(stack_href(n), n) for n in names]]]
    for t in observable:
        rows.append([esc(t[0]), esc(t[1]), esc(t[2]),
                     *[str(stacks[n].reached.get(t, "")) or ("—" if stacks[n].not_here(t) else "·") for n in names]])
    summary = "".join(f"<li>{link(stack_href(n), n)}: {esc(mc.summary_line(model, stacks[n]))}</li>" for n in names)
    unobservable = len(model) - len(observable)
    reasons = "".join(f"<li>{esc(line)}</li>" for line in mc.unobservable_lines())
    body = (f"<p>{len(model)} transitions in the bounded model; {unobservable} involve a state or action no trace "
            f"shows, and are left out:</p><ul>{reasons}</ul>"
            f"<p>{esc(', '.join(mc.ECT_ONLY_ACTIONS))}: observable where the sender marks its datagrams ECT and the "
            f"link CE-marks some; never reached on a sender that does not.</p>"
            f"<p>{esc(', '.join(mc.CAP_ONLY_STATES))}: observable where the sender's endpoint takes a window cap "
            f"and the run sets one; never reached on a sender that does not.</p>"
            f"<p>— in a target's column: not observable on that target: {esc(mc.NO_ECT)} (ECN), or "
            f"{esc(mc.NO_CAP)} (cap).</p>"
            f"<ul>{summary}</ul>" + table(rows, raw=True))
    (out / "model.html").write_text(page("model coverage", body))
    (out / "stacks").mkdir(exist_ok=True)
    for name in names:
        _stack_page(out, name, stacks[name], model, observable, notes)
    return set(names)


def _stack_page(out: Path, name: str, cov, model, observable, notes: list[str]) -> None:
    from harness.model import coverage as mc

    base = out / "stacks" / slug(name)
    base.with_suffix(".dot").write_text(mc.dot(model, cov.reached))
    img = ""
    if shutil.which("dot"):
        done = subprocess.run(["dot", "-Tsvg", str(base.with_suffix(".dot")), "-o", str(base.with_suffix(".svg"))],
                              capture_output=True, text=True, check=False)
        if done.returncode == 0:
            img = f'<p><img class="plot" src="{esc(base.name)}.svg" alt="state machine of {esc(name)}"></p>'
        else:
            notes.append(f"{name}: dot could not draw the state machine: {done.stderr.strip()[:200]}")
    else:
        notes.append("dot not found (apt-get install graphviz): state machines as .dot only")
    taken = sorted(((t, n) for t, n in cov.reached.items()), key=lambda kv: -kv[1])
    rows = [["from", "action", "to", "times"], *[[t[0], t[1], t[2], str(n)] for t, n in taken]]
    here = [t for t in observable if cov.observable(t)]
    missed = [t for t in here if not cov.reached.get(t)]
    body = (f"<p>{cov.runs} runs validated against the model; {len(here) - len(missed)} of "
            f"{len(here)} transitions observable on this target taken. Green edges were taken (×count), grey ones never; "
            f'dashed ones no trace can show. <a href="{esc(base.name)}.dot">DOT source</a></p>{img}'
            + table(rows) + ("<h2>never taken</h2>" + table([["from", "action", "to"], *map(list, missed)])
                             if missed else ""))
    (base.with_suffix(".html")).write_text(page(f"state machine · {name}", body, depth=1))
