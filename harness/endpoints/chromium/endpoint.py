"""longlook endpoint for Chromium: headless Debian `chromium`, driven by Selenium
through `chromedriver`, as an HTTP/3 client (docs/endpoints.md, "Browsers").

The requests themselves are run by harness/endpoints/browser/page.py, shared with
Firefox; this module starts Chromium and gives that module a page to run them in.
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
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "browser"))
import page  # noqa: E402  (harness/endpoints/browser/page.py, shared with Firefox)

STACK = "chromium"
#: LL_CC → Chromium's client connection option (QUIC tag); None is its default, CUBIC.
CONTROLLERS = {"cubic": None, "newreno": "RENO", "reno": "RENO", "bbr": "TBBR", "bbr2": "B2ON"}
#: Chromium's initial window (QUIC_CONGESTION_CONTROL_CONFIGURED in its NetLog), packets.
INITIAL_WINDOW = 32
#: Chromium's QUIC packet size: it honours any LL_MAX_DATAGRAM_SIZE at least this.
PACKET_SIZE = 1250
FLAGS = ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-default-apps", "--disable-extensions", "--enable-quic")


def spki_hash(cert: Path) -> str:
    """base64 SHA-256 of the certificate's SubjectPublicKeyInfo, as Chromium's flag takes it."""
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization

    key = x509.load_pem_x509_certificate(cert.read_bytes()).public_key()
    der = key.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    return base64.b64encode(hashlib.sha256(der).digest()).decode()


def prepare(env: dict[str, str]) -> tuple[page.Settings, str, str]:
    s = page.settings(env, STACK, CONTROLLERS, INITIAL_WINDOW, PACKET_SIZE)
    for tool in ("chromium", "chromedriver"):
        if not shutil.which(tool):
            raise page.Unsupported(f"{tool} is not installed (make setup installs Debian's chromium and chromium-driver)")
    out = subprocess.run(["chromium", "--version"], capture_output=True, text=True, check=False).stdout
    version = next((w for w in out.split() if w[:1].isdigit()), "unknown")
    return s, version, CONTROLLERS[s.cc] or "CUBIC"


class SeleniumPage:
    """page.Page over WebDriver classic: an async script whose last argument is the callback."""

    def __init__(self, driver):
        self.driver = driver

    def call(self, function: str, args: object) -> object:
        script = (f"const done = arguments[arguments.length - 1]; ({function})(arguments[0])"
                  ".then(done, e => done(JSON.stringify({error: String(e)})));")
        return json.loads(self.driver.execute_async_script(script, json.dumps(args)))


def run(s: page.Settings, applog: page.AppLog) -> None:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    profile = page.profile_dir(s, "ll-chromium-")
    driver = None
    try:
        options = webdriver.ChromeOptions()
        options.binary_location = shutil.which("chromium")
        for flag in FLAGS:
            options.add_argument(flag)
        options.add_argument(f"--user-data-dir={profile}")
        options.add_argument(f"--ignore-certificate-errors-spki-list={spki_hash(s.cert)}")
        options.add_argument(f"--origin-to-force-quic-on={page.SERVER_NAME}:{s.port}")
        options.add_argument(f"--host-resolver-rules=MAP {page.SERVER_NAME} {s.urls[0].hostname}, MAP * ~NOTFOUND")
        option = CONTROLLERS[s.cc]
        if option:
            options.add_argument(f"--quic-client-connection-options={option}")
        if s.qlogdir:
            os.makedirs(s.qlogdir, exist_ok=True)
            options.add_argument(f"--log-net-log={os.path.join(s.qlogdir, 'chromium.netlog.json')}")
            options.add_argument("--net-log-capture-mode=Default")
        if s.keylog:
            options.add_argument(f"--ssl-key-log-file={s.keylog}")
        driver = webdriver.Chrome(service=Service(shutil.which("chromedriver")), options=options)
        driver.set_script_timeout(s.timeout_s or 600)
        origin = SeleniumPage(driver)
        page.load_origin(origin, lambda: driver.get(f"https://{page.SERVER_NAME}:{s.port}/"))
        page.run_requests(origin, s, applog)
    finally:
        if driver is not None:
            driver.quit()  # chromedriver and every Chromium process; the NetLog is closed then
        shutil.rmtree(profile, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(page.main(STACK, prepare, run, dict(os.environ)))
