"""What the browser endpoints (harness/endpoints/chromium, harness/endpoints/firefox)
share: the contract's environment as a browser can honour it, the app log, and the
requests run as fetch() calls in a page of the server's origin.

A browser endpoint starts its browser with its own flags or preferences, loads the
server's origin page (`GET /`, which the h3 servers answer with a small page),
and hands this module a `Page`: something that runs one of the JavaScript functions
below in that page and returns its JSON result. Each function takes one JSON string
and returns one, so a WebDriver classic driver (Chromium) and a WebDriver BiDi
session (Firefox) call it the same way.

- A download: `GET /NAME`; the body is copied out of the page in base64 chunks after
  the response is complete (outside the timed part) into LL_DOWNLOADS/NAME.
- An upload (LL_DIRECTION=upload): the bytes of LL_WWW/NAME are copied into the page
  first, then `POST /NAME` with them as the body; done when the answer arrives, which
  the server sends once it holds the whole body. The browser's sender is judged.

App-log times are the page's own clock (performance.now() at the fetch's start and
end), mapped onto CLOCK_MONOTONIC once. Standalone: imports nothing from harness/.
"""

from __future__ import annotations

import base64
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Protocol
from urllib.parse import SplitResult, urlsplit

SERVER_NAME = "server.longlook.test"
TESTCASES = ("transfer", "multiplexing", "appidle")
#: Bytes per call when copying bodies in and out of the page.
CHUNK = 4 << 20


class Unsupported(Exception):
    """An option the browser cannot honour: exit 127 with one stderr line."""


class Page(Protocol):
    def call(self, function: str, args: object) -> object:
        """Runs `function` (JavaScript: one JSON string in, a promise of one out) on
        `args` in the page; returns the parsed result."""


def now_us() -> int:
    return time.monotonic_ns() // 1000


@dataclass
class Settings:
    """The contract's environment for a browser client (docs/endpoints.md)."""

    cc: str
    testcase: str
    upload: bool
    urls: list[SplitResult]
    think_s: float
    timeout_s: float | None
    qlogdir: str | None
    keylog: str | None
    applog: str | None
    www: Path
    downloads: Path
    cert: Path
    flow_window: int

    @property
    def port(self) -> int:
        return self.urls[0].port or 443


def settings(env: dict[str, str], stack: str, controllers: dict[str, object], initial_window: int,
             packet_size: int) -> Settings:
    """The environment checked before a browser starts; Unsupported names what is not."""
    if env.get("ROLE") != "client":
        raise Unsupported(f"ROLE={env.get('ROLE')!r}: {stack} is a client only; pair it with a server "
                          "that speaks h3 (aioquic)")
    testcase = env.get("TESTCASE", "transfer")
    if testcase not in TESTCASES:
        raise Unsupported(f"TESTCASE={testcase} unsupported ({', '.join(TESTCASES)})")
    direction = env.get("LL_DIRECTION", "download")
    if direction not in ("download", "upload"):
        raise Unsupported(f"LL_DIRECTION={direction} unsupported (download or upload)")
    cc = env.get("LL_CC") or next(iter(controllers))
    if cc not in controllers:
        raise Unsupported(f"LL_CC={cc} unsupported ({stack} offers {', '.join(sorted(controllers))})")
    iw = env.get("LL_INITIAL_WINDOW")
    if iw and int(iw) != initial_window:
        raise Unsupported(f"LL_INITIAL_WINDOW={iw} unsupported ({stack}'s initial window is {initial_window} packets)")
    mds = int(env.get("LL_MAX_DATAGRAM_SIZE", "1252"))
    if mds < packet_size:
        raise Unsupported(f"LL_MAX_DATAGRAM_SIZE={mds} unsupported ({stack} sends {packet_size} B packets)")
    urls = [urlsplit(u) for u in env.get("REQUESTS", "").split()]
    if not urls:
        raise Unsupported("REQUESTS is empty")
    cert = Path(env.get("LL_CERTS", "/certs")) / "cert.pem"
    if not cert.is_file():
        raise Unsupported(f"{cert} is missing: a browser trusts the run's certificate only "
                          "(LL_CERTS names its directory)")
    timeout = env.get("LL_TIMEOUT_S")
    return Settings(cc="newreno" if cc == "reno" else cc, testcase=testcase,
                    upload=direction == "upload", urls=urls,
                    think_s=float(env.get("LL_THINK_MS", "1000")) / 1000,
                    timeout_s=float(timeout) if timeout else None, qlogdir=env.get("QLOGDIR"),
                    keylog=env.get("SSLKEYLOGFILE"), applog=env.get("LL_APPLOG"),
                    www=Path(env.get("LL_WWW", "/www")), downloads=Path(env.get("LL_DOWNLOADS", "/downloads")),
                    cert=cert, flow_window=int(env.get("LL_FLOW_WINDOW", str(64 * 1024 * 1024))))


class AppLog:
    """LL_APPLOG writer (NDJSON); page times are mapped onto CLOCK_MONOTONIC."""

    def __init__(self, path: str | None):
        self._fp = open(path, "a", buffering=1) if path else None
        self.page_offset_us = 0.0

    def write(self, record: dict) -> None:
        if self._fp:
            self._fp.write(json.dumps(record) + "\n")

    def version(self, stack: str, version: str, cc: str, native_cc: str) -> None:
        self.write({"event": "version", "stack": stack, "version": version, "cc": cc, "native_cc": native_cc,
                    "t_us": now_us(), "wall_us": time.time_ns() // 1000})

    def at_page_ms(self, page_ms: float, event: str, **fields) -> None:
        self.write({"t_us": int(page_ms * 1000 + self.page_offset_us), "event": event, **fields})

    def event(self, event: str, **fields) -> None:
        self.write({"t_us": now_us(), "event": event, **fields})


# The page's side. Every function: one JSON string in, a promise of one JSON string out.
CLOCK = "async (a) => JSON.stringify([performance.now(), document.title])"
TITLE = "async (a) => JSON.stringify(document.title)"
SETUP = "async (a) => { window.__ll = {down: {}, parts: {}, up: {}}; return 'null'; }"
FETCH = """async (a) => {
  const {paths, upload} = JSON.parse(a);
  try {
    const out = await Promise.all(paths.map(async path => {
      const init = upload ? {method: 'POST', body: window.__ll.up[path]} : {};
      const t0 = performance.now();
      const r = await fetch(path, init);
      const body = await r.arrayBuffer();
      const t1 = performance.now();
      if (!upload) window.__ll.down[path] = new Uint8Array(body);
      return {t0, t1, n: upload ? init.body.size : body.byteLength, status: r.status};
    }));
    return JSON.stringify(out);
  } catch (e) { return JSON.stringify([{error: String(e)}]); }
}"""
PUSH = """async (a) => {
  const {path, b64} = JSON.parse(a);
  const bin = atob(b64), part = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) part[i] = bin.charCodeAt(i);
  (window.__ll.parts[path] = window.__ll.parts[path] || []).push(part);
  return 'null';
}"""
SEAL = """async (a) => {
  const path = JSON.parse(a);
  window.__ll.up[path] = new Blob(window.__ll.parts[path] || []);
  delete window.__ll.parts[path];
  return 'null';
}"""
PULL = """async (a) => {
  const {path, start, len} = JSON.parse(a);
  const part = window.__ll.down[path].subarray(start, start + len);
  let s = '';
  for (let i = 0; i < part.length; i += 32768) s += String.fromCharCode.apply(null, part.subarray(i, i + 32768));
  return JSON.stringify(btoa(s));
}"""
FORGET = "async (a) => { delete window.__ll.down[JSON.parse(a)]; return 'null'; }"


#: The h3 servers' origin page's title (harness/endpoints/aioquic/h3serve.py).
ORIGIN_TITLE = "longlook"
#: Pause between attempts to load the origin page.
RETRY_S = 0.5


def load_origin(page: Page, navigate: Callable[[], None]) -> None:
    """Loads the server's page, again after each failed attempt until LL_TIMEOUT_S
    (which page.main enforces): a browser gives up a connection whose handshake a
    schedule holds up (Chromium after 10 s of it) and shows an error page, where the
    contract's other clients keep trying; the transfer judged is the request's."""
    while True:
        try:
            navigate()
        except ConnectionError:  # Firefox's BiDi navigate fails; Chromium's shows an error page
            pass
        title = page.call(TITLE, None)
        if title == ORIGIN_TITLE:
            return
        time.sleep(RETRY_S)


def profile_dir(s: Settings, prefix: str) -> str:
    """A fresh browser profile beside the run's logs (QLOGDIR's parent) where there are
    any, so the browser's command line names the run (a test looks for leftovers by
    it); the caller removes it."""
    import tempfile

    parent = str(Path(s.qlogdir).parent) if s.qlogdir else None
    return tempfile.mkdtemp(prefix=prefix, dir=parent)


def run_requests(page: Page, s: Settings, applog: AppLog) -> None:
    """Every request of REQUESTS as the test case says, in the loaded origin page."""
    before = now_us()
    page_ms, title = page.call(CLOCK, None)
    applog.page_offset_us = (before + now_us()) / 2 - float(page_ms) * 1000
    if title != ORIGIN_TITLE:  # load_origin first: else the browser shows an error page
        raise ConnectionError(f"the server's page did not load (the page is {title!r}): see the browser's log in QLOGDIR")
    page.call(SETUP, None)
    paths = [u.path or "/" for u in s.urls]
    if s.upload:
        for path in paths:  # into the page before any timing starts
            data = (s.www / path.lstrip("/")).read_bytes()
            for i in range(0, len(data), CHUNK):
                page.call(PUSH, {"path": path, "b64": base64.b64encode(data[i:i + CHUNK]).decode()})
            page.call(SEAL, path)
    if s.testcase == "multiplexing":
        results = _checked(page.call(FETCH, {"paths": paths, "upload": s.upload}), paths)
        _log(applog, results, 0)
    else:
        results = []
        for k, path in enumerate(paths):
            if k and s.testcase == "appidle":
                applog.event("idle_start")
                time.sleep(s.think_s)
                applog.event("idle_end")
            results += _log(applog, _checked(page.call(FETCH, {"paths": [path], "upload": s.upload}), [path]), k)
    if not s.upload:
        for path, r in zip(paths, results):
            target = s.downloads / path.lstrip("/")
            target.parent.mkdir(parents=True, exist_ok=True)
            with open(target, "wb") as fp:
                for i in range(0, r["n"], CHUNK):
                    fp.write(base64.b64decode(page.call(PULL, {"path": path, "start": i, "len": CHUNK})))
            page.call(FORGET, path)


def _log(applog: AppLog, results: list[dict], first: int) -> list[dict]:
    """The requests' start and end in the app log, in time order; `stream` is the
    request's index (the browser picks its stream ids)."""
    marks = [(r[t], ev, first + k, r["n"] if ev == "request_done" else 0)
             for k, r in enumerate(results) for t, ev in (("t0", "request_start"), ("t1", "request_done"))]
    for t, ev, k, n in sorted(marks):
        applog.at_page_ms(t, ev, stream=k, bytes=n)
    return results


def _checked(results: object, paths: list[str]) -> list[dict]:
    if not isinstance(results, list) or len(results) != len(paths):
        raise ConnectionError(f"the page answered {str(results)[:200]!r}")
    for path, r in zip(paths, results):
        if "error" in r or r.get("status") != 200:
            raise ConnectionError(f"{path}: {r.get('error') or 'HTTP status ' + str(r.get('status'))}")
    return results


def main(stack: str, prepare: Callable[[dict[str, str]], tuple[Settings, str, str]],
         run: Callable[[Settings, AppLog], None], env: dict[str, str]) -> int:
    """An endpoint's whole life: `prepare` checks the environment (Settings, the
    browser's version, its name for the controller), `run` drives the browser.
    Exit 127 for what cannot be honoured, 1 with one line for a failure, 0 otherwise;
    SIGTERM and LL_TIMEOUT_S end the run through `run`'s own clean-up."""
    import signal
    import sys

    try:
        s, version, native_cc = prepare(env)
    except (Unsupported, ValueError) as err:
        print(f"{stack}: {err}", file=sys.stderr)
        return 127
    applog = AppLog(s.applog)
    applog.version(stack, version, s.cc, native_cc)

    stopped: list[str] = []

    def give_up(signum, _frame):
        # The exception may be caught and re-wrapped by the driver's HTTP client (a
        # ReadTimeoutError), so the reason is also kept here for the one line below.
        stopped.append(f"gave up after LL_TIMEOUT_S={s.timeout_s}" if signum == signal.SIGALRM
                       else f"stopped by signal {signum}")
        raise TimeoutError(stopped[-1])

    for sig in (signal.SIGTERM, signal.SIGALRM):
        signal.signal(sig, give_up)
    if s.timeout_s:
        signal.setitimer(signal.ITIMER_REAL, s.timeout_s)
    try:
        run(s, applog)
    except Exception as err:  # noqa: BLE001 — one line naming the failure, never a traceback
        first = str(err).splitlines()[0] if str(err) else ""
        why = stopped[0] if stopped else f"{type(err).__name__}: {first}"
        print(f"{stack} client: {why}", file=sys.stderr)
        return 1
    return 0
