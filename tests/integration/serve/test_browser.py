"""Every tab of ``llmp serve`` in a real headless Chromium (the system's, driven by Selenium).

The app runs under uvicorn on a free loopback port in this process. The test loads the page, edits
the spec and sees the located diagnostic, fixes it, reads the prediction, changes tp on the What-if
tab and sees memory move, runs a search and clicks a layout into the editor, plans a run, and
exports the spec and follows the link that reproduces the view.

It skips, saying why, only when no browser is installed; under CI (``CI`` set) a missing browser
fails instead, since ``.ci/run`` installs Debian's ``chromium`` and ``chromium-driver``.
"""

from __future__ import annotations

import os
import shutil
import socket
import threading
import time
from pathlib import Path

import pytest

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync", "--window-size=1400,1000")
"""Launch flags that work on this project's machines (no network beyond loopback, no GPU, root)."""


def _missing() -> str | None:
    for name in ("uvicorn", "starlette", "selenium"):
        try:
            __import__(name)
        except ImportError:
            return f"the Python package {name} is not installed (pip install -e '.[dev,serve]')"
    for path, package in ((CHROMIUM, "chromium"), (CHROMEDRIVER, "chromium-driver")):
        if not Path(path).is_file():
            return f"no {path}: install Debian's {package} (apt-get install -y chromium chromium-driver)"
    return None


MISSING = _missing()
if MISSING is not None and os.environ.get("CI"):
    pytest.fail(f"CI must run the browser test, but {MISSING}", pytrace=False)
pytestmark = pytest.mark.skipif(MISSING is not None, reason=f"no browser to drive: {MISSING}")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def server(small_spec):
    import uvicorn

    from llmp.serve.app import create_app

    port = _free_port()
    srv = uvicorn.Server(uvicorn.Config(create_app([str(small_spec)]), host="127.0.0.1", port=port,
                                        log_level="warning"))
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not srv.started:
        if time.monotonic() > deadline:
            pytest.fail("the app did not start within 30 s")
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}"
    srv.should_exit = True
    thread.join(timeout=10)


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}")
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    downloads = tmp_path_factory.mktemp("downloads")
    driver.execute_cdp_cmd("Page.setDownloadBehavior", {"behavior": "allow", "downloadPath": str(downloads)})
    driver.downloads = downloads  # type: ignore[attr-defined]
    yield driver
    driver.quit()


def _wait(driver, condition, timeout: float = 60.0):
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, timeout, poll_frequency=0.1).until(condition)


def _by_id(driver, ident: str):
    from selenium.webdriver.common.by import By

    return _wait(driver, lambda d: d.find_element(By.ID, ident))


def _tab(driver, name: str) -> None:
    _by_id(driver, f"tab-{name}").click()


def _type_into_editor(driver, text: str) -> None:
    """Set the editor's text as typing would (an input event, so htmx posts it)."""
    driver.execute_script("const t = document.getElementById('text'); t.value = arguments[0];"
                          "t.dispatchEvent(new Event('input', {bubbles: true}));", text)


@pytest.mark.slow  # drives Chromium through every tab
def test_every_tab_in_a_real_browser(server, browser, small_spec):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    d = browser
    text = small_spec.read_text()
    d.get(server + "/")
    assert "llmp" in d.title
    _by_id(d, "check-ok")

    # Editor: a typo gives llmp check's diagnostic, located at its line; fixing it clears it.
    _type_into_editor(d, text.replace("hidden = 2048", "hiden = 2048"))
    error = _by_id(d, "check-error")
    assert "unknown field" in error.text and "hidden" in error.text
    assert error.get_attribute("data-line") == "2"
    assert _by_id(d, "gutter").find_element(By.CSS_SELECTOR, ".bad").text == "2"
    _type_into_editor(d, text)
    _by_id(d, "check-ok")

    # Prediction: the step with its band, memory against capacity, the Gantt, the trace link.
    _tab(d, "prediction")
    step = _by_id(d, "step-time")
    assert step.text.endswith("s")
    assert d.find_elements(By.CSS_SELECTOR, "svg.gantt rect")
    assert "/trace?" in _by_id(d, "trace-link").get_attribute("href")

    # What-if: tp 2 -> 4 re-predicts, and memory per GPU moves against the spec's.
    _tab(d, "whatif")
    table = _by_id(d, "whatif-table")
    tp = d.find_element(By.ID, "wi_tp")
    tp.clear()
    tp.send_keys("4")
    d.execute_script("arguments[0].dispatchEvent(new Event('change', {bubbles: true}))", tp)
    _wait(d, lambda drv: "parallel.tp=4" in drv.find_element(By.ID, "whatif-out").text)
    table = _by_id(d, "whatif-table")
    memory = next(r for r in table.find_elements(By.CSS_SELECTOR, "tbody tr") if "memory" in r.text)
    cells = memory.find_elements(By.TAG_NAME, "td")
    assert cells[0].text != cells[1].text and cells[2].text.startswith("-")
    Select(d.find_element(By.ID, "wi_recompute")).select_by_value("full")
    _wait(d, lambda drv: "train.recompute=full" in drv.find_element(By.ID, "whatif-out").text)

    # Search: the layouts on 8 GPUs, drawn; a click loads one into the editor.
    _tab(d, "search")
    gpus = _by_id(d, "search_gpus")
    gpus.clear()
    gpus.send_keys("8")
    _by_id(d, "run-search").click()
    point = _wait(d, lambda drv: drv.find_element(By.CSS_SELECTOR, "#pareto circle.point"), timeout=120)
    layout = point.get_attribute("data-layout")
    assert layout.startswith("[")
    point.click()
    note = _by_id(d, "note")
    assert "layout loaded from the search" in note.text
    assert d.find_element(By.TAG_NAME, "body").get_attribute("data-tab") == "editor"
    _by_id(d, "check-ok")

    # Plan: a run of 10B tokens on the spec's GPUs, failures included.
    _tab(d, "plan")
    tokens = _by_id(d, "tokens")
    tokens.clear()
    tokens.send_keys("10B")
    _by_id(d, "run-plan").click()
    ettr = _wait(d, lambda drv: drv.find_element(By.ID, "plan-ettr"), timeout=120)
    assert ettr.text.endswith("%")
    assert d.find_elements(By.CSS_SELECTOR, "#plan-charts svg.curve")

    # Export: the spec downloads as .llmp and parses; the link reproduces the view.
    _tab(d, "export")
    _by_id(d, "export-spec").click()
    saved = _wait(d, lambda drv: next(iter(Path(drv.downloads).glob("*.llmp")), None), timeout=30)
    import llmp

    assert llmp.loads(saved.read_text(), filename=str(small_spec)).model.name == "small_llama"
    link = _by_id(d, "view-link").get_attribute("href")
    assert "tab=export" in link and "text=" in link
    d.get(link)
    assert d.find_element(By.TAG_NAME, "body").get_attribute("data-tab") == "export"
    assert "small_llama" in d.find_element(By.ID, "text").get_attribute("value")
