"""The dashboard in a real headless Chromium (Debian's ``chromium``, driven by playwright; no
browser is downloaded). One server and one page go through the states a user would: the page
loads with no request leaving the machine, three steps run, the inspector shows a norm database,
and a finished run directory is replayed at its last step and scrubbed back. Each state is saved as a screenshot
under tests/artifacts/. The tests run in file order on the shared page.
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
WAIT_MS = 120_000  # generous: the server imports litellm and the machine is shared
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
    with log.open("w") as out:
        proc = subprocess.Popen(server_command("127.0.0.1", port), env=server_env("hobbs-cafe", "crsec", "rules", 42),
                                stdout=out, stderr=subprocess.STDOUT)
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
    run(RunConfig(scenario="hobbs-cafe", arch="generic", model="rules", steps=3, rng=9), out, progress=False,
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
        page = browser.new_page(viewport={"width": 1500, "height": 1100})
        page.set_default_timeout(WAIT_MS)
        page.on("request", lambda r: requests.append(r.url))
        page.goto(server)
        yield page, requests, server
        browser.close()


def _external(requests: list[str], server: str) -> list[str]:
    local = (server, server.replace("http://", "ws://"))
    return [u for u in requests if not u.startswith(local) and not u.startswith(("data:", "blob:"))]


def _plots(page) -> dict[str, list[str]]:
    return {kind: [img.get_attribute("src") for img in page.locator(f"img.plot-{kind}").all()]
            for kind in ("map", "network", "heatmap", "series")}


def _idle(page) -> None:
    """Wait until the worker is idle (the Step button is enabled again)."""
    expect(page.locator(".btn-step")).to_be_enabled()


def test_page_loads_with_no_external_request(browser_page):
    page, requests, server = browser_page
    expect(page.locator(".step-counter")).to_contain_text("Step 0 · hobbs-cafe · crsec · live")
    expect(page.locator("img.plot-map")).to_be_visible()
    _idle(page)
    expect(page.locator(".panel-usage")).to_contain_text("rules is the rule-based baseline")
    page.screenshot(path=str(ARTIFACTS / "dashboard-1-loaded.png"), full_page=True)
    assert requests and all(u.startswith(server) for u in requests if u.startswith("http"))
    assert _external(requests, server) == []


def test_three_steps_change_the_counter_and_the_plots(browser_page):
    page, requests, server = browser_page
    before = _plots(page)
    for k in (1, 2, 3):
        _idle(page)
        page.locator(".btn-step").click()
        expect(page.locator(".step-counter")).to_contain_text(f"Step {k} ·")
    _idle(page)
    expect(page.locator("img.plot-series").first).to_be_visible()
    after = _plots(page)
    assert after["map"] != before["map"]
    assert after["heatmap"] != before["heatmap"]
    assert len(after["series"]) >= 3 and set(after["series"]).isdisjoint(before["series"])
    page.screenshot(path=str(ARTIFACTS / "dashboard-2-three-steps.png"), full_page=True)
    assert _external(requests, server) == []


def test_inspector_shows_an_agents_norm_database(browser_page):
    page, requests, server = browser_page
    inspector = page.locator(".panel-inspector")
    inspector.locator(".v-select__slot").click()
    page.locator(".menuable__content__active .v-list-item__title", has_text="Tom Gomez").click()
    expect(inspector.locator(".v-select__selections")).to_contain_text("Tom Gomez")
    expect(inspector).to_contain_text("Norm database (3 norms)")
    rows = inspector.locator(".inspector-norms tbody tr")
    expect(rows).to_have_count(3)
    states = {rows.nth(i).locator("td").nth(2).inner_text() for i in range(3)}
    assert states <= {"qualified", "deactivated", "pending", "rejected"} and states
    inspector.scroll_into_view_if_needed()
    page.screenshot(path=str(ARTIFACTS / "dashboard-3-inspector.png"), full_page=True)
    assert _external(requests, server) == []


def test_replayed_run_directory_shows_its_last_step(browser_page, run_dir):
    page, requests, server = browser_page
    field = page.locator(".run-dir input")
    field.fill(str(run_dir))
    field.press("Enter")
    page.locator(".btn-open").click()
    expect(page.locator(".step-counter")).to_contain_text("Step 3 of 3 · hobbs-cafe · generic · replay of")
    expect(page.locator("img.plot-map")).to_have_attribute("alt", "map at step 3")
    expect(page.locator(".panel-events")).to_contain_text("events")
    page.locator(".step-counter").scroll_into_view_if_needed()
    slider = page.locator(".panel-replay [role=slider]")
    expect(slider).to_have_attribute("aria-valuenow", "3")
    page.screenshot(path=str(ARTIFACTS / "dashboard-4-replay.png"), full_page=True)
    # scrubbing back redraws an earlier step from the recorded frames
    slider.focus()
    slider.press("ArrowLeft")
    expect(page.locator(".step-counter")).to_contain_text("Step 2 of 3")
    expect(page.locator("img.plot-map")).to_have_attribute("alt", "map at step 2")
    page.screenshot(path=str(ARTIFACTS / "dashboard-5-replay-step-2.png"), full_page=True)
    assert _external(requests, server) == []
