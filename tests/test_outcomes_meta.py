"""Issue 27: a skip is decided by what cannot change between runs (a capability the
stack lacks, a rule that does not apply to the controller's family, a mode that
cannot run the case), never by what one run did or did not show. Read from the
code: every skip in properties/ and harness/ carries one of the allowed reasons, and
no skip in properties/ sits inside a run's `with` block, where the run's
observation is in hand."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from harness.verdict.outcomes import SKIP_REASONS

ROOT = Path(__file__).resolve().parent.parent
PROPERTIES = sorted((ROOT / "properties").glob("test_*.py"))
HARNESS = [p for p in (ROOT / "harness").rglob("*.py")
           if not {".venv", "target"} & set(p.parts) and "endpoints" not in p.relative_to(ROOT).parts]
#: Calls that skip: pytest's, and ours that wrap it with a reason of our own.
SKIPS = {"skip", "require", "not_applicable"}


def _name(call: ast.Call) -> str | None:
    f = call.func
    return f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else None


def _skip_calls(tree: ast.AST):
    """(call, message text or None) of every pytest.skip(...) and mark.skip(reason=...)."""
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = ast.unparse(node.func)
        if func in ("pytest.skip", "skip") or func.endswith("mark.skip"):
            arg = node.args[0] if node.args else next((k.value for k in node.keywords if k.arg == "reason"), None)
            text = arg.value if isinstance(arg, ast.Constant) else \
                "".join(v.value for v in arg.values[:1] if isinstance(v, ast.Constant)) if isinstance(arg, ast.JoinedStr) else None
            yield node, text


@pytest.mark.parametrize("path", PROPERTIES + HARNESS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_skip_gives_an_allowed_reason(path):
    tree = ast.parse(path.read_text())
    for call, text in _skip_calls(tree):
        if path.name == "outcomes.py":
            continue  # where the allowed reasons are put together
        assert text is not None and text.startswith(SKIP_REASONS), (
            f"{path.name}:{call.lineno}: a skip must start with one of {SKIP_REASONS} "
            f"(harness/verdict/outcomes.py); a run that showed nothing is 'not exercised' or a verdict")


@pytest.mark.parametrize("path", PROPERTIES, ids=lambda p: p.name)
def test_properties_skip_only_before_the_run(path):
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.With) and any(".run(" in ast.unparse(i.context_expr) or "together(" in
                                              ast.unparse(i.context_expr) for i in node.items):
            for inner in ast.walk(node):
                if isinstance(inner, ast.Call) and _name(inner) in SKIPS:
                    pytest.fail(f"{path.name}:{inner.lineno}: {ast.unparse(inner)[:80]} inside a run: a skip "
                                f"may not read the run's observation (use outcomes.not_exercised or assert)")


def test_the_meta_test_sees_a_skip_inside_a_run(tmp_path):
    """The rule above can fail: a property of the old kind is caught."""
    bad = tmp_path / "test_bad.py"
    bad.write_text("def test_x(longlook, target, schedule):\n"
                   "    with longlook.run(target, schedule, PLAN) as obs:\n"
                   "        if not obs.sender.events:\n"
                   "            pytest.skip('logs nothing')\n")
    with pytest.raises(pytest.fail.Exception, match="inside a run"):
        test_properties_skip_only_before_the_run(bad)
    with pytest.raises(AssertionError, match="must start with one of"):
        test_every_skip_gives_an_allowed_reason(bad)


@pytest.mark.parametrize("path", PROPERTIES, ids=lambda p: p.name)
def test_no_property_rejects_an_example_without_a_reason(path):
    """hypothesis.assume rejects an example and says nothing: the ledger cannot say why
    a case ended not exercised, and a late-starting client's examples (a browser's)
    would be hunted past without end. A property says outcomes.not_exercised(reason)."""
    tree = ast.parse(path.read_text())
    used = [n.lineno for n in ast.walk(tree)
            if isinstance(n, ast.Call) and getattr(n.func, "id", getattr(n.func, "attr", None)) == "assume"]
    assert not used, f"{path.name}: assume() at line(s) {used}; use outcomes.not_exercised(reason)"
