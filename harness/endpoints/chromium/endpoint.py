"""longlook endpoint for Chromium: headless Debian `chromium`, driven by Selenium
through `chromedriver`, as an HTTP/3 client (docs/endpoints.md, "Browsers").

Chromium is a client only: a server role exits 127. It loads the origin's page
(`GET /`, which the h3 servers answer), then runs each request of REQUESTS as a
`fetch()` in that page, so Chromium's own QUIC stack does the transfer:

- a download: `GET /NAME`; the body is copied out of the page in base64 chunks
  after the response is complete (outside the timed part) into LL_DOWNLOADS/NAME;
- an upload (LL_DIRECTION=upload): the bytes of LL_WWW/NAME are copied into the page
  first, then `POST /NAME` with them as the body; done when the answer arrives,
  which the server sends once it holds the whole body. Chromium's sender is judged.

What Chromium is told, and why:
- `--origin-to-force-quic-on`: QUIC from the first request, with no TCP and no Alt-Svc;
- `--host-resolver-rules`: the server's name maps to its address in the namespaces,
  every other name to NOTFOUND, so the browser's own background requests (search
  engine preconnect, component updates) resolve nowhere;
- `--ignore-certificate-errors-spki-list`: the key of the run's certificate
  (LL_CERTS/cert.pem, which the harness gives the client too) is trusted, since
  Chromium verifies QUIC certificates even with `--ignore-certificate-errors`;
- `--quic-client-connection-options`: the controller (RENO, TBBR, B2ON; none: CUBIC);
- `--log-net-log` into QLOGDIR: the NetLog, which harness/observe/netlog.py reads as
  this stack's log; `--ssl-key-log-file` from SSLKEYLOGFILE, so the capture decrypts.

App-log times come from the page's own clock (performance.now() at the fetch's
start and end), mapped onto CLOCK_MONOTONIC once at start. Standalone: imports
nothing from harness/.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit

STACK = "chromium"
SERVER_NAME = "server.longlook.test"
TESTCASES = ("transfer", "multiplexing", "appidle")
#: LL_CC → Chromium's client connection option (QUIC tag); CUBIC is its default.
CONTROLLERS = {"cubic": None, "newreno": "RENO", "reno": "RENO", "bbr": "TBBR", "bbr2": "B2ON"}
#: Chromium's initial window (QUIC_CONGESTION_CONTROL_CONFIGURED in its NetLog), packets.
FIXED_INITIAL_WINDOW = 32
#: Chromium's default QUIC packet size: it honours any LL_MAX_DATAGRAM_SIZE at least this.
PACKET_SIZE = 1250
#: Bytes per WebDriver round trip when copying bodies in and out of the page.
CHUNK = 4 << 20
FLAGS = ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-default-apps", "--disable-extensions", "--enable-quic")


class Unsupported(Exception):
    """An option Chromium cannot honour: exit 127 with one stderr line."""


def now_us() -> int:
    return time.monotonic_ns() // 1000


def settings(env: dict[str, str]) -> dict:
    """The contract's environment, checked before a browser starts."""
    if env.get("ROLE") != "client":
        raise Unsupported(f"ROLE={env.get('ROLE')!r}: Chromium is a client only; pair it with a server "
                          "that speaks h3 (aioquic)")
    testcase = env.get("TESTCASE", "transfer")
    if testcase not in TESTCASES:
        raise Unsupported(f"TESTCASE={testcase} unsupported ({', '.join(TESTCASES)})")
    direction = env.get("LL_DIRECTION", "download")
    if direction not in ("download", "upload"):
        raise Unsupported(f"LL_DIRECTION={direction} unsupported (download or upload)")
    cc = env.get("LL_CC") or "cubic"
    if cc not in CONTROLLERS:
        raise Unsupported(f"LL_CC={cc} unsupported (Chromium offers {', '.join(sorted(CONTROLLERS))})")
    iw = env.get("LL_INITIAL_WINDOW")
    if iw and int(iw) != FIXED_INITIAL_WINDOW:
        raise Unsupported(f"LL_INITIAL_WINDOW={iw} unsupported (Chromium's initial window is "
                          f"{FIXED_INITIAL_WINDOW} packets)")
    mds = int(env.get("LL_MAX_DATAGRAM_SIZE", "1252"))
    if mds < PACKET_SIZE:
        raise Unsupported(f"LL_MAX_DATAGRAM_SIZE={mds} unsupported (Chromium sends {PACKET_SIZE} B packets)")
    urls = [urlsplit(u) for u in env.get("REQUESTS", "").split()]
    if not urls:
        raise Unsupported("REQUESTS is empty")
    cert = Path(env.get("LL_CERTS", "/certs")) / "cert.pem"
    if not cert.is_file():
        raise Unsupported(f"{cert} is missing: Chromium trusts the server's key only (LL_CERTS names the run's certificate)")
    for tool in ("chromium", "chromedriver"):
        if not shutil.which(tool):
            raise Unsupported(f"{tool} is not installed (make setup installs Debian's chromium and chromium-driver)")
    timeout = env.get("LL_TIMEOUT_S")
    return {"cc": "newreno" if cc == "reno" else cc, "option": CONTROLLERS[cc], "testcase": testcase,
            "upload": direction == "upload", "urls": urls, "think_s": float(env.get("LL_THINK_MS", "1000")) / 1000,
            "timeout_s": float(timeout) if timeout else None, "qlogdir": env.get("QLOGDIR"),
            "keylog": env.get("SSLKEYLOGFILE"), "applog": env.get("LL_APPLOG"),
            "spki": spki_hash(cert), "www": Path(env.get("LL_WWW", "/www")), "downloads": Path(env.get("LL_DOWNLOADS", "/downloads"))}


class AppLog:
    """LL_APPLOG writer (NDJSON); page times are mapped onto CLOCK_MONOTONIC."""

    def __init__(self, path: str | None):
        self._fp = open(path, "a", buffering=1) if path else None
        self.page_offset_us = 0.0

    def write(self, record: dict) -> None:
        if self._fp:
            self._fp.write(json.dumps(record) + "\n")

    def at_page_ms(self, page_ms: float, event: str, **fields) -> None:
        self.write({"t_us": int(page_ms * 1000 + self.page_offset_us), "event": event, **fields})

    def event(self, event: str, **fields) -> None:
        self.write({"t_us": now_us(), "event": event, **fields})


def spki_hash(cert: Path) -> str:
    """base64 SHA-256 of the certificate's SubjectPublicKeyInfo, as Chromium's flag takes it."""
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization

    key = x509.load_pem_x509_certificate(cert.read_bytes()).public_key()
    der = key.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    return base64.b64encode(hashlib.sha256(der).digest()).decode()


def chromium_version() -> str:
    out = subprocess.run(["chromium", "--version"], capture_output=True, text=True, check=False).stdout
    return next((w for w in out.split() if w[:1].isdigit()), "unknown")


def start_browser(s: dict, profile: str):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    url = s["urls"][0]
    port = url.port or 443
    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium")
    for flag in FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={profile}")
    options.add_argument(f"--ignore-certificate-errors-spki-list={s['spki']}")
    options.add_argument(f"--origin-to-force-quic-on={SERVER_NAME}:{port}")
    options.add_argument(f"--host-resolver-rules=MAP {SERVER_NAME} {url.hostname}, MAP * ~NOTFOUND")
    if s["option"]:
        options.add_argument(f"--quic-client-connection-options={s['option']}")
    if s["qlogdir"]:
        os.makedirs(s["qlogdir"], exist_ok=True)
        options.add_argument(f"--log-net-log={os.path.join(s['qlogdir'], 'chromium.netlog.json')}")
        options.add_argument("--net-log-capture-mode=Default")
    if s["keylog"]:
        options.add_argument(f"--ssl-key-log-file={s['keylog']}")
    driver = webdriver.Chrome(service=Service(shutil.which("chromedriver")), options=options)
    driver.set_script_timeout(s["timeout_s"] or 600)
    return driver, f"https://{SERVER_NAME}:{port}"


# One request in the page: resolves {t0, t1, n, status} (page ms) or {error}.
FETCH = """
const [path, upload, done] = [arguments[0], arguments[1], arguments[arguments.length - 1]];
const init = upload ? {method: 'POST', body: window.__ll_up[path]} : {};
const t0 = performance.now();
fetch(path, init).then(async r => {
  const body = await r.arrayBuffer();
  const t1 = performance.now();
  if (!upload) window.__ll_down[path] = new Uint8Array(body);
  done({t0, t1, n: upload ? init.body.size : body.byteLength, status: r.status});
}).catch(e => done({error: String(e)}));
"""
MANY = """
const [paths, upload, done] = [arguments[0], arguments[1], arguments[arguments.length - 1]];
Promise.all(paths.map(path => {
  const init = upload ? {method: 'POST', body: window.__ll_up[path]} : {};
  const t0 = performance.now();
  return fetch(path, init).then(async r => {
    const body = await r.arrayBuffer();
    const t1 = performance.now();
    if (!upload) window.__ll_down[path] = new Uint8Array(body);
    return {t0, t1, n: upload ? init.body.size : body.byteLength, status: r.status};
  });
})).then(done).catch(e => done([{error: String(e)}]));
"""
PUSH = """
const [path, b64] = arguments;
const bin = atob(b64), part = new Uint8Array(bin.length);
for (let i = 0; i < bin.length; i++) part[i] = bin.charCodeAt(i);
(window.__ll_parts[path] = window.__ll_parts[path] || []).push(part);
"""
PULL = """
const [path, start, len] = arguments;
const part = window.__ll_down[path].subarray(start, start + len);
let s = ''; for (let i = 0; i < part.length; i += 32768) s += String.fromCharCode.apply(null, part.subarray(i, i + 32768));
return btoa(s);
"""


def stage_uploads(driver, s: dict, paths: list[str]) -> None:
    """The bytes of each object into the page as a Blob, before any timing starts."""
    driver.execute_script("window.__ll_parts = {}; window.__ll_up = {};")
    for path in paths:
        data = (s["www"] / path.lstrip("/")).read_bytes()
        for i in range(0, len(data), CHUNK):
            driver.execute_script(PUSH, path, base64.b64encode(data[i:i + CHUNK]).decode())
        driver.execute_script("window.__ll_up[arguments[0]] = new Blob(window.__ll_parts[arguments[0]] || []);"
                              "delete window.__ll_parts[arguments[0]];", path)


def save_download(driver, s: dict, path: str, size: int) -> None:
    target = s["downloads"] / path.lstrip("/")
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target, "wb") as fp:
        for i in range(0, size, CHUNK):
            fp.write(base64.b64decode(driver.execute_script(PULL, path, i, CHUNK)))
    driver.execute_script("delete window.__ll_down[arguments[0]];", path)


def record(applog: AppLog, result: dict, path: str, stream: int) -> None:
    if "error" in result or result.get("status") != 200:
        raise ConnectionError(f"{path}: {result.get('error') or 'HTTP status ' + str(result.get('status'))}")
    applog.at_page_ms(result["t0"], "request_start", stream=stream, bytes=0)
    applog.at_page_ms(result["t1"], "request_done", stream=stream, bytes=result["n"])


def run(s: dict, applog: AppLog) -> None:
    profile = tempfile.mkdtemp(prefix="ll-chromium-")
    driver = None
    try:
        driver, origin = start_browser(s, profile)
        driver.get(origin + "/")
        before = now_us()
        page_ms = driver.execute_script("return performance.now();")
        applog.page_offset_us = (before + now_us()) / 2 - page_ms * 1000
        driver.execute_script("window.__ll_down = {};")
        paths = [u.path or "/" for u in s["urls"]]
        if s["upload"]:
            stage_uploads(driver, s, paths)
        if s["testcase"] == "multiplexing":
            results = driver.execute_async_script(MANY, paths, s["upload"])
            for k, (path, result) in enumerate(zip(paths, results)):
                record(applog, result, path, 4 * k)
        else:
            results = []
            for k, path in enumerate(paths):
                if k and s["testcase"] == "appidle":
                    applog.event("idle_start")
                    time.sleep(s["think_s"])
                    applog.event("idle_end")
                result = driver.execute_async_script(FETCH, path, s["upload"])
                record(applog, result, path, 4 * k)
                results.append(result)
        if not s["upload"]:
            for path, result in zip(paths, results):
                save_download(driver, s, path, result["n"])
    finally:
        if driver is not None:
            driver.quit()  # chromedriver and every Chromium process; the NetLog is closed then
        shutil.rmtree(profile, ignore_errors=True)


def main() -> int:
    try:
        s = settings(dict(os.environ))
    except (Unsupported, ValueError) as err:
        print(f"{STACK}: {err}", file=sys.stderr)
        return 127
    applog = AppLog(s["applog"])
    applog.write({"event": "version", "stack": STACK, "version": chromium_version(), "cc": s["cc"],
                  "native_cc": s["option"] or "CUBIC", "t_us": now_us(), "wall_us": time.time_ns() // 1000})

    def give_up(signum, _frame):
        raise TimeoutError(f"gave up after LL_TIMEOUT_S={s['timeout_s']}" if signum == signal.SIGALRM
                           else f"stopped by signal {signum}")

    for sig in (signal.SIGTERM, signal.SIGALRM):
        signal.signal(sig, give_up)
    if s["timeout_s"]:
        signal.setitimer(signal.ITIMER_REAL, s["timeout_s"])
    try:
        run(s, applog)
    except Exception as err:  # noqa: BLE001 — one line naming the failure, never a traceback
        print(f"{STACK} client: {type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
