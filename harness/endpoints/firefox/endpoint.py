"""longlook endpoint for Firefox: headless Debian `firefox-esr` (its QUIC stack is
neqo), driven over WebDriver BiDi, as an HTTP/3 client (docs/endpoints.md, "Browsers").

No geckodriver: Debian does not package it, and Firefox speaks WebDriver BiDi itself
(`--remote-debugging-port`), so this module opens the session over a WebSocket
(websocket-client, already pinned for Selenium). The requests are run by
harness/endpoints/browser/page.py, shared with Chromium.

What Firefox is given, in a fresh profile, and why:
- the session's `acceptInsecureCerts`, so the run's self-signed certificate is taken
  as every client here takes it, with
  `network.http.http3.disable_when_third_party_roots_found` off: without it Firefox
  closes an HTTP/3 connection whose certificate no Mozilla root issued;
- `network.http.http3.alt-svc-mapping-for-testing`: HTTP/3 from the first request to
  the server, named by its address as REQUESTS names it (Firefox has no per-name
  resolver rule, and `network.dns.forceResolve` sent the browser's own background
  requests to the server's address: dozens of TCP connections across the link). Other
  names resolve nowhere (the namespaces have no DNS), and most background services
  are switched off below;
- `network.http.http3.cc_algorithm` (0 NewReno, 1 CUBIC), `…max_data` and
  `…max_stream_data` from LL_FLOW_WINDOW, `…pmtud` off so packets stay at 1252 B;
- `network.http.http3.backup_timer_delay` an hour and `…fallback_to_h2_on_error` off:
  no TCP connection raced beside a slow handshake or after an HTTP/3 error;
- `network.http.http3.enable_qlog`: neqo writes qlog under $TMPDIR/qlog_<pid>/; TMPDIR
  is the profile's, and the files are moved to QLOGDIR when Firefox has exited.
  SSLKEYLOGFILE reaches NSS unchanged, so the capture decrypts.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "browser"))
import page  # noqa: E402  (harness/endpoints/browser/page.py, shared with Chromium)

STACK = "firefox"
BINARY = "firefox-esr"
#: LL_CC → network.http.http3.cc_algorithm; the first is Firefox's default.
CONTROLLERS = {"cubic": 1, "newreno": 0, "reno": 0}
#: neqo's initial window, packets (its qlog's recovery:parameters_set), and its packet size.
INITIAL_WINDOW = 10
PACKET_SIZE = 1252
#: Background services switched off, so the run's traffic is the test's.
QUIET = {
    "app.normandy.enabled": False, "app.update.auto": False, "browser.region.update.enabled": False,
    "browser.safebrowsing.downloads.enabled": False, "browser.safebrowsing.malware.enabled": False,
    "browser.safebrowsing.phishing.enabled": False, "browser.shell.checkDefaultBrowser": False,
    "browser.startup.page": 0, "browser.newtabpage.enabled": False, "datareporting.healthreport.uploadEnabled": False,
    "datareporting.policy.dataSubmissionEnabled": False, "extensions.update.enabled": False,
    "network.captive-portal-service.enabled": False, "network.connectivity-service.enabled": False,
    "network.dns.disablePrefetch": True, "network.predictor.enabled": False, "network.prefetch-next": False,
    "network.trr.mode": 5, "toolkit.telemetry.enabled": False, "toolkit.telemetry.unified": False,
    # performance.now() to the µs rather than the 1 ms a page gets by default (app-log times).
    "privacy.reduceTimerPrecision": False,
}


def prepare(env: dict[str, str]) -> tuple[page.Settings, str, str]:
    s = page.settings(env, STACK, CONTROLLERS, INITIAL_WINDOW, PACKET_SIZE)
    if not shutil.which(BINARY):
        raise page.Unsupported(f"{BINARY} is not installed (make setup installs Debian's firefox-esr)")
    out = subprocess.run([BINARY, "--version"], capture_output=True, text=True, check=False).stdout
    version = next((w.removesuffix("esr") for w in out.split() if w[:1].isdigit()), "unknown")
    return s, version, f"cc_algorithm={CONTROLLERS[s.cc]}"


def write_profile(profile: Path, s: page.Settings) -> None:
    """The preferences (user.js)."""
    prefs = dict(QUIET) | {
        "network.http.http3.enable": True,
        "network.http.http3.alt-svc-mapping-for-testing": f"{s.urls[0].hostname};h3=:{s.port}",
        "network.http.http3.disable_when_third_party_roots_found": False,
        "network.http.http3.cc_algorithm": CONTROLLERS[s.cc],
        "network.http.http3.max_data": min(s.flow_window, 2**31 - 1),
        "network.http.http3.max_stream_data": min(s.flow_window, 2**31 - 1),
        "network.http.http3.pmtud": False,
        "network.http.http3.enable_qlog": bool(s.qlogdir),
        # No TCP race: when the QUIC handshake outlasts this timer (100 ms by default;
        # a busy host is enough, the CI run of 2026-12-02) Firefox opens a TCP
        # connection to the same port beside it. The server speaks only HTTP/3, so the
        # race can only add a stray flow to the link; an hour is "never" for a run.
        "network.http.http3.backup_timer_delay": 3_600_000,
        # An HTTP/3 error ends the run as the stack's failure, not as a retry over TCP.
        "network.http.http3.fallback_to_h2_on_error": False,
    }
    (profile / "user.js").write_text("".join(f"user_pref({json.dumps(k)}, {json.dumps(v)});\n" for k, v in prefs.items()))


class BidiPage:
    """page.Page over a WebDriver BiDi session: script.callFunction in the top context."""

    def __init__(self, url: str):
        import websocket

        # Firefox refuses a handshake that carries an Origin header.
        self.ws = websocket.create_connection(url + "/session", suppress_origin=True)
        self.n = 0
        # The run's own certificate, as every client here takes it (docs/endpoints.md).
        self.send("session.new", {"capabilities": {"alwaysMatch": {"acceptInsecureCerts": True}}})
        self.context = self.send("browsingContext.getTree", {})["contexts"][0]["context"]

    def send(self, method: str, params: dict) -> dict:
        self.n += 1
        self.ws.send(json.dumps({"id": self.n, "method": method, "params": params}))
        while True:
            reply = json.loads(self.ws.recv())
            if reply.get("id") == self.n:
                if reply.get("type") == "error":
                    raise ConnectionError(f"{method}: {reply.get('error')}: {reply.get('message')}")
                return reply["result"]

    def navigate(self, url: str) -> None:
        self.send("browsingContext.navigate", {"context": self.context, "url": url, "wait": "complete"})

    def call(self, function: str, args: object) -> object:
        r = self.send("script.callFunction", {
            "functionDeclaration": function, "arguments": [{"type": "string", "value": json.dumps(args)}],
            "awaitPromise": True, "target": {"context": self.context}})
        if r.get("type") == "exception":
            raise ConnectionError(f"script failed: {r.get('exceptionDetails', {}).get('text')}")
        return json.loads(r["result"]["value"])

    def close(self) -> None:
        """browser.close: Firefox shuts down in order, so neqo closes its connections
        and finishes their qlog (a SIGTERM leaves the last records cut short)."""
        try:
            self.send("browser.close", {})
        finally:
            self.ws.close()


def wait_for_bidi(log: Path, proc: subprocess.Popen, timeout_s: float = 30.0) -> str:
    """The WebSocket address Firefox prints once its remote agent listens."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        m = re.search(r"WebDriver BiDi listening on (ws://\S+)", log.read_text(errors="replace"))
        if m:
            return m.group(1)
        if proc.poll() is not None:
            raise ConnectionError(f"{BINARY} exited with {proc.returncode} before listening: {log}")
        time.sleep(0.05)
    raise ConnectionError(f"{BINARY} did not open WebDriver BiDi within {timeout_s:.0f} s")


def run(s: page.Settings, applog: page.AppLog) -> None:
    profile = Path(page.profile_dir(s, "ll-firefox-"))
    tmp = profile / "tmp"
    tmp.mkdir()
    log = profile / "firefox.log"
    proc, bidi = None, None
    try:
        write_profile(profile, s)
        env = dict(os.environ, TMPDIR=str(tmp), MOZ_CRASHREPORTER_DISABLE="1")
        with open(log, "wb") as out:
            proc = subprocess.Popen([BINARY, "--headless", "--no-remote", "--profile", str(profile),
                                     "--remote-debugging-port=0"], env=env, stdout=out, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL)
        bidi = BidiPage(wait_for_bidi(log, proc))
        page.load_origin(bidi, lambda: bidi.navigate(f"https://{s.urls[0].hostname}:{s.port}/"))
        page.run_requests(bidi, s, applog)
    finally:
        if bidi is not None:
            try:
                bidi.close()
            except Exception:  # noqa: BLE001 — the browser is stopped below either way
                pass
        if proc is not None:
            stop(proc)
        if s.qlogdir:  # neqo's qlog, complete once Firefox has exited
            os.makedirs(s.qlogdir, exist_ok=True)
            for q in tmp.glob("qlog_*/*"):
                shutil.move(str(q), os.path.join(s.qlogdir, q.name))
        shutil.rmtree(profile, ignore_errors=True)


def stop(proc: subprocess.Popen) -> None:
    """Waits for the exit browser.close began; SIGTERM, then SIGKILL, if it lingers."""
    for sig, wait in ((None, 10), (signal.SIGTERM, 5), (signal.SIGKILL, 5)):
        if proc.poll() is not None:
            return
        if sig is not None:
            proc.send_signal(sig)
        try:
            proc.wait(wait)
            return
        except subprocess.TimeoutExpired:
            continue


if __name__ == "__main__":
    sys.exit(page.main(STACK, prepare, run, dict(os.environ)))
