"""The dashboard in a real headless Chromium (Debian's ``chromium``, driven by playwright; no
browser is downloaded) at 1280x800. One server and one page go through what a user would do:
the page loads with the architecture's controls at their declared defaults, a bad value is
refused, parameters stay with their architecture, Reset then Step at once, Play and Pause, every
tab, the inspector, and a finished run replayed with the scrubber in view. No request may leave
127.0.0.1. Screenshots go to tests/artifacts/. The tests run in file order on the shared page.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest
from playwright.sync_api import expect, sync_playwright

from socialsim.dashboards.server import server_command, server_env
from socialsim.model.runner import RunConfig, run

ARTIFACTS = Path(__file__).parent / "artifacts"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run"]
WAIT_MS = 90_000  # generous: the server imports litellm and the machine is shared
expect.set_options(timeout=WAIT_MS)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """A dashboard on 127.0.0.1 running hobbs-cafe with CRSEC agents on the rules engine."""
    port = _free_port()
    log = tmp_path_factory.mktemp("server") / "server.log"
    env = {**server_env("hobbs-cafe", "crsec", "rules", 42), "SOCIALSIM_DASHBOARD_STEPS": "400"}
    with log.open("w") as out:
        proc = subprocess.Popen(server_command("127.0.0.1", port), env=env, stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/"
    try:
        deadline = time.monotonic() + WAIT_MS / 1000
        while True:
            assert proc.poll() is None, f"the dashboard server exited: {log.read_text()[-2000:]}"
            try:
                with urllib.request.urlopen(url, timeout=5) as response:
                    if response.status == 200:
                        break
            except OSError:
                pass
            assert time.monotonic() < deadline, f"the dashboard server did not answer: {log.read_text()[-2000:]}"
            time.sleep(0.5)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("replayed")
    run(RunConfig(scenario="hobbs-cafe", arch="crsec", model="rules", steps=3, rng=9), out, progress=False,
        preflight=False)
    return out


@pytest.fixture(scope="module")
def browser_page(server):
    chromium = shutil.which("chromium")
    assert chromium, "the browser tests need Debian's chromium (apt-get install -y chromium; .ci/run installs it)"
    ARTIFACTS.mkdir(exist_ok=True)
    requests: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1280, "height": 800})
        page.set_default_timeout(WAIT_MS)
        page.on("request", lambda r: requests.append(r.url))
        page.goto(server)
        yield page, requests, server
        browser.close()


def _external(requests: list[str], server: str) -> list[str]:
    local = (server, server.replace("http://", "ws://"))
    return [u for u in requests if not u.startswith(local) and not u.startswith(("data:", "blob:"))]


def _idle(page) -> None:
    """Wait until the worker is idle."""
    expect(page.locator(".run-state")).to_contain_text("idle")


def _steps(page) -> int:
    text = page.locator(".step-counter").inner_text()
    return int(text.split("·")[0].split()[1])


def _tab(page, name: str) -> None:
    page.locator(".v-tab", has_text=name).click()


def _choose(page, field, option: str) -> None:
    field.locator(".v-select__slot").click()
    page.locator(".menuable__content__active .v-list-item__title", has_text=option).first.click()


def _shot(page, name: str) -> None:
    page.screenshot(path=str(ARTIFACTS / f"dashboard-{name}.png"))


def test_page_loads_with_the_architectures_controls_at_their_defaults(browser_page):
    page, requests, server = browser_page
    expect(page.locator(".step-counter")).to_contain_text("Step 0 · hobbs-cafe · crsec · live")
    expect(page.locator("img.plot-map")).to_be_visible()
    _idle(page)
    # the declared defaults, not values a slider snapped to
    expect(page.locator(".param-initial_norms [role=slider]")).to_have_attribute("aria-valuenow", "5")
    expect(page.locator(".param-synthesis_threshold input")).to_have_value("350")
    expect(page.locator(".param-enable_chat input")).to_be_checked()
    _shot(page, "1-loaded")
    assert requests and _external(requests, server) == []


def test_parameters_are_checked_and_kept_per_architecture(browser_page):
    page, requests, server = browser_page
    field = page.locator(".param-synthesis_threshold input")
    field.fill("0")
    field.press("Enter")
    expect(page.locator(".param-error")).to_contain_text("crsec.synthesis_threshold")
    field.fill("120")
    field.press("Enter")
    expect(page.locator(".param-error")).to_have_count(0)
    page.locator(".param-enable_chat label").click()
    expect(page.locator(".param-enable_chat input")).not_to_be_checked()
    _choose(page, page.locator(".ctl-arch"), "asvo")
    expect(page.locator(".param-tom_scope")).to_be_visible()
    expect(page.locator(".param-synthesis_threshold")).to_have_count(0)  # nothing leaks across
    _choose(page, page.locator(".ctl-arch"), "itcmas")
    expect(page.locator(".param-blend_rate")).to_be_visible()
    _choose(page, page.locator(".ctl-arch"), "(scenario default)")
    expect(page.locator(".panel-controls")).to_contain_text("scenario default: crsec")
    expect(page.locator(".param-synthesis_threshold input")).to_have_value("120")  # kept for crsec
    expect(page.locator(".param-enable_chat input")).not_to_be_checked()
    assert _external(requests, server) == []


def test_reset_builds_with_the_changed_parameters_and_a_step_right_after_is_not_lost(browser_page):
    page, requests, server = browser_page
    page.locator(".btn-reset").click()
    page.locator(".btn-step").click()  # at once, while the society is being built
    expect(page.locator(".step-counter")).to_contain_text("Step 1 ·")
    _idle(page)
    expect(page.locator(".param-synthesis_threshold input")).to_have_value("120")
    expect(page.locator(".param-enable_chat input")).not_to_be_checked()
    assert _external(requests, server) == []









