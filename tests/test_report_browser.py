"""The report as a person opens it (issue 18): a real small run (virtual time, a
planted controller that fails one property), `longlook report`, then headless
Chromium (Debian's chromium and chromedriver, driven by Selenium) loads the matrix
from the file system, follows the failing cell to its page, and finds the cwnd plot
drawn and the replay line there. Screenshots go to artifacts/report-browser/.

No network: the site loads nothing from outside, and Chromium runs with its
background networking off."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import skip_or_fail
from harness.testbed.link import REPO_ROOT

CHROMIUM, DRIVER = shutil.which("chromium"), shutil.which("chromedriver")
SHOTS = REPO_ROOT / "artifacts" / "report-browser"


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """A report of one property file run on aioquic NewReno and on a mutant of it with
    β 0.9, which fails the β property (a failing cell with a plot)."""
    tmp = tmp_path_factory.mktemp("report")
    for name, cc in (("stock", "newreno"), ("mutant", "tests.mutants.beta_0_9:Beta09")):
        argv = [sys.executable, "-m", "pytest", "properties/test_window.py", "--impl", "aioquic", "--cc", cc,
                "--mode", "virtual", "--no-real-recheck", "--hypothesis-profile", "ci", "-q", "-p", "no:cacheprovider",
                "--artifacts", str(tmp / name), "--results", str(tmp / f"{name}.ndjson")]
        r = subprocess.run(argv, cwd=REPO_ROOT, capture_output=True, text=True, timeout=600, check=False)
        assert r.returncode == (0 if name == "stock" else 1), r.stdout[-2000:]
    r = subprocess.run([sys.executable, "-m", "harness.cli", "report", str(tmp / "stock.ndjson"),
                        str(tmp / "mutant.ndjson"), "--out", str(tmp / "site")], cwd=REPO_ROOT, capture_output=True,
                       text=True, timeout=600, check=False)
    assert r.returncode == 0, r.stderr
    return tmp / "site"


@pytest.fixture(scope="module")
def browser():
    if not (CHROMIUM and DRIVER):
        skip_or_fail("chromium and chromedriver are not installed (make setup installs them)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--window-size=1600,1000"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(DRIVER), options=options)
    try:
        yield driver
    finally:
        driver.quit()  # chromedriver and every Chromium process with it


def test_the_report_opens_in_chromium_with_the_matrix_a_failing_plot_and_its_replay_line(site, browser):
    from selenium.webdriver.common.by import By

    SHOTS.mkdir(parents=True, exist_ok=True)
    browser.get((site / "index.html").as_uri())
    assert browser.title == "longlook conformance matrix"
    matrix = browser.find_element(By.CSS_SELECTOR, "table.matrix")
    rows = [th.text for th in matrix.find_elements(By.CSS_SELECTOR, "tr > th:first-child") if th.text]
    assert any(r.startswith("aioquic-newreno") for r in rows) and any("Beta09" in r for r in rows), rows
    failed = browser.find_elements(By.CSS_SELECTOR, "td.cell.o-failed a")
    assert failed, "the mutant's failing cell is in the matrix"
    browser.save_screenshot(str(SHOTS / "matrix.png"))
    failed[0].click()
    assert "recovery_reduces_window_by_beta" in browser.title
    plot = browser.find_element(By.CSS_SELECTOR, "img.plot")
    width = browser.execute_script("return arguments[0].complete && arguments[0].naturalWidth", plot)
    assert width and width > 600, "the cwnd plot loaded and was drawn"
    replay = [c.text for c in browser.find_elements(By.CSS_SELECTOR, "pre code")]
    assert any(t.startswith("longlook replay ") for t in replay), replay
    browser.save_screenshot(str(SHOTS / "failing-cell.png"))
    assert (SHOTS / "matrix.png").stat().st_size > 10_000 and (SHOTS / "failing-cell.png").stat().st_size > 10_000
