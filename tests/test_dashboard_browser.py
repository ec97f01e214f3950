"""The dashboard in a real headless Chromium (Debian's ``chromium``, driven by playwright; no
browser is downloaded) at 1280x800. One server and one page go through what a user would do:
the page loads with the architecture's controls at their declared defaults, a bad value is
refused, parameters stay with their architecture, Reset then Step at once, Play and Pause, every
tab, the inspector, and a finished run replayed with the scrubber in view. No request may leave
127.0.0.1. Screenshots go to tests/artifacts/. The tests run in file order on the shared page.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import socket
import subprocess
import threading
import time
import urllib.request
from pathlib import Path

import pandas as pd
import pytest
from playwright.sync_api import Error as PlaywrightError
from playwright.sync_api import TimeoutError as PlaywrightTimeoutError
from playwright.sync_api import expect, sync_playwright

from socialsim.dashboards.server import server_command, server_env
from socialsim.llm.fake_server import FakeOpenAIServer
from socialsim.model.runner import RunConfig, run

ARTIFACTS = Path(__file__).parent / "artifacts"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run"]
WAIT_MS = 90_000  # generous: the server imports litellm and the machine is shared
expect.set_options(timeout=WAIT_MS)
RECORD: dict = {}  # measured times, written to tests/artifacts/dashboard-timings.json


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def dashboard(env: dict, log: Path):
    """A dashboard server on a free loopback port; yields its URL once it answers."""
    port = _free_port()
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
    # an exception on the page's threads (the poll's, a render's) shows only here, as a traceback
    assert "Traceback" not in log.read_text(), f"the dashboard server logged a traceback: {log.read_text()[-3000:]}"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """A dashboard on 127.0.0.1 running hobbs-cafe with CRSEC agents on the rules engine."""
    env = {**server_env("hobbs-cafe", "crsec", "rules", 42), "SOCIALSIM_DASHBOARD_STEPS": "400"}
    with dashboard(env, tmp_path_factory.mktemp("server") / "server.log") as url:
        yield url


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("replayed")
    run(RunConfig(scenario="hobbs-cafe", arch="crsec", model="rules", steps=3, rng=9), out, progress=False,
        preflight=False)
    return out


@pytest.fixture(scope="module")
def chromium_browser():
    chromium = shutil.which("chromium")
    assert chromium, "the browser tests need Debian's chromium (make test installs it with apt-get)"
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@contextlib.contextmanager
def open_page(browser, url: str):
    """A 1280x800 page on ``url`` that records every request it makes."""
    ARTIFACTS.mkdir(exist_ok=True)
    requests: list[str] = []
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    page.set_default_timeout(WAIT_MS)
    page.on("request", lambda r: requests.append(r.url))
    page.goto(url)
    yield page, requests, url
    page.close()


@pytest.fixture(scope="module")
def browser_page(server, chromium_browser):
    with open_page(chromium_browser, server) as opened:
        yield opened


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
    tab = page.locator(".v-tab", has_text=name)
    for attempt in range(3):
        try:  # Playwright finds the tab, then scrolls it; a render replacing the tab bar in between
            tab.scroll_into_view_if_needed()  # detaches the one found (seen once in CI): find it again
            break
        except PlaywrightError as exc:
            if "not attached" not in str(exc) or attempt == 2:
                raise
    tab.click()  # a click finds its element again by itself


ARM_JS = """([watch, text]) => { window.__shown = new Promise((resolve, reject) => {
    let started = null;
    const shown = () => [...document.querySelectorAll(watch)].some(e => e.textContent.includes(text));
    const begin = () => { if (started === null) started = performance.now(); };
    document.addEventListener("keydown", begin, {capture: true, once: true});
    document.addEventListener("mousedown", begin, {capture: true, once: true});
    const observer = new MutationObserver(() => {
        if (started !== null && shown()) { observer.disconnect(); resolve(performance.now() - started); }
    });
    observer.observe(document.body, {subtree: true, childList: true, characterData: true, attributes: true});
    setTimeout(() => { observer.disconnect(); reject(new Error(`${watch} did not show ${text}`)); }, 15000);
}); }"""


def _seconds_until_shown(page, act, watch: str, text: str) -> float:
    """Seconds from the user's input (``act``: a real click or key press) to the page showing
    ``text`` in ``watch``, timed inside the browser by a DOM observer, so Playwright's own polling
    is not counted."""
    page.evaluate(ARM_JS, [watch, text])
    act()
    return round(page.evaluate("() => window.__shown") / 1000, 3)


def _choose(page, field, option: str) -> None:
    field.locator(".v-select__slot").click()
    page.locator(".menuable__content__active .v-list-item__title", has_text=option).first.click()


def _shot(page, name: str) -> None:
    page.wait_for_timeout(400)  # let the tab's transition finish
    page.screenshot(path=str(ARTIFACTS / f"dashboard-{name}.png"))


def test_page_loads_with_the_architectures_controls_at_their_defaults(browser_page):
    page, requests, server = browser_page
    expect(page.locator(".step-counter")).to_contain_text("Step 0 · hobbs-cafe · crsec · live")
    expect(page.locator(".chart-map svg.marks")).to_be_visible()
    _idle(page)
    # the declared defaults, not values a slider snapped to
    expect(page.locator(".param-initial_norms [role=slider]")).to_have_attribute("aria-valuenow", "5")
    expect(page.locator(".param-initial_norms")).to_contain_text("initial_norms: 5")  # a slider shows its value
    expect(page.locator(".ctl-play-interval")).to_contain_text("play interval: 100 ms")
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
    slider = page.locator(".param-conversation_turns [role=slider]")
    before = int(slider.get_attribute("aria-valuenow"))
    slider.focus()
    slider.press("ArrowRight")  # the keyboard moves a slider one step, and its label follows
    expect(slider).to_have_attribute("aria-valuenow", str(before + 1))
    expect(page.locator(".param-conversation_turns")).to_contain_text(f"conversation_turns: {before + 1}")
    _choose(page, page.locator(".ctl-arch"), "asvo")
    expect(page.locator(".param-tom_scope")).to_be_visible()
    expect(page.locator(".param-synthesis_threshold")).to_have_count(0)  # nothing leaks across
    _choose(page, page.locator(".ctl-arch"), "itcmas")
    expect(page.locator(".param-blend_rate")).to_be_visible()
    _choose(page, page.locator(".ctl-arch"), "(scenario default)")
    expect(page.locator(".panel-controls")).to_contain_text("scenario default: crsec")
    expect(page.locator(".param-synthesis_threshold input")).to_have_value("120")  # kept for crsec
    expect(page.locator(".param-enable_chat input")).not_to_be_checked()
    expect(page.locator(".param-conversation_turns")).to_contain_text(f"conversation_turns: {before + 1}")
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


def test_play_runs_steps_until_pause_stops_them(browser_page):
    page, requests, server = browser_page
    _idle(page)
    before = _steps(page)
    page.locator(".btn-play").click()
    expect(page.locator(".run-state")).to_contain_text("playing")
    page.wait_for_function(
        f"() => parseInt(document.querySelector('.step-counter').innerText.split(' ')[1]) >= {before + 2}")
    RECORD["pause_seconds"] = _seconds_until_shown(page, page.locator(".btn-pause").click, ".stop-reason", "paused")
    expect(page.locator(".run-state")).not_to_contain_text("playing")
    _idle(page)
    paused = _steps(page)
    assert paused >= before + 2
    time.sleep(1.5)
    assert _steps(page) == paused  # nothing steps after Pause
    # the same with the time-series tab open, whose four charts are redrawn after every step
    _tab(page, "Time series")
    page.locator(".btn-play").click()
    page.wait_for_function(
        f"() => parseInt(document.querySelector('.step-counter').innerText.split(' ')[1]) >= {paused + 2}")
    RECORD["pause_on_time_series_seconds"] = _seconds_until_shown(page, page.locator(".btn-pause").click,
                                                                  ".stop-reason", "paused")
    _idle(page)
    _tab(page, "Map")
    assert _external(requests, server) == []


def test_a_render_interval_redraws_the_plots_every_few_steps_while_playing(browser_page):
    """Mesa's render interval: during Play the counter moves every step, the plots every k steps;
    after Pause they show the last step again."""
    page, requests, server = browser_page
    _idle(page)
    _tab(page, "Time series")
    slider = page.locator(".ctl-render-interval [role=slider]")
    for steps in (2, 3, 4, 5):
        _press_until_shown(slider, "ArrowRight", page.locator(".ctl-render-interval"), f"render interval: {steps} steps")
    before = _steps(page)
    page.locator(".btn-play").click()
    expect(page.locator(".run-state")).to_contain_text("plots show step")  # the counter ran ahead of the plots
    page.wait_for_function(
        f"() => parseInt(document.querySelector('.step-counter').innerText.split(' ')[1]) >= {before + 6}")
    RECORD["pause_on_time_series_render_interval_5_seconds"] = _seconds_until_shown(
        page, page.locator(".btn-pause").click, ".stop-reason", "paused")
    _idle(page)
    expect(page.locator(".run-state")).not_to_contain_text("plots show step")
    _tab(page, "Map")
    # caught up: the map shows the counter's step (both read live: the step in flight at Pause may
    # still be counted after the worker reports idle)
    _map_catches_up_with_the_counter(page)
    for steps in (4, 3, 2, 1):
        _press_until_shown(slider, "ArrowLeft", page.locator(".ctl-render-interval"), f"render interval: {steps} steps")
    assert _external(requests, server) == []


def _press_until_shown(slider, key: str, label, text: str) -> None:
    """One key press on a slider, and its label showing the value it moved to before the next: presses
    sent together raced the server's echo of the first (one was lost: 2, 3, 4 steps after four)."""
    slider.focus()
    slider.press(key)
    expect(label).to_contain_text(text)


def _map_catches_up_with_the_counter(page) -> None:
    """Wait until the map's title names the counter's step; if it never does, say what the page
    showed (a map drawn at another step, several maps, none drawn at all, or another tab)."""
    try:
        page.wait_for_function("""() => {
            const step = parseInt(document.querySelector('.step-counter').innerText.split(' ')[1]);
            const map = document.querySelector('.chart-map svg.marks');
            return map !== null && map.textContent.includes(`map (step ${step},`);
        }""")
    except PlaywrightTimeoutError:
        maps = page.evaluate("""() => [...document.querySelectorAll('.chart-map svg.marks')].map(
            svg => (svg.textContent.match(/map \\(step \\d+,/) || ['a map without its title'])[0])""")
        _shot(page, "map-behind-the-counter")
        raise AssertionError(f"the map never caught up with the counter: {_steps(page)} on the counter, "
                             f"{page.locator('.run-state').inner_text()!r}, the tab shown: "
                             f"{page.locator('.v-tab--active').inner_text()!r}, maps drawn: {maps or 'none'}") from None


MAP = ".chart-map svg.marks, img.plot-map"  # a world is an interactive chart, a network a picture
TABS = [("Map", MAP), ("Time series", ".chart-series .vega-embed svg.marks"),
        ("Interactions", ".chart-heatmap .vega-embed svg.marks"), ("Norms", ".norm-provenance tbody tr"),
        ("Agents", ".panel-inspector"), ("Events", ".event-table tbody tr"), ("LLM usage", ".usage-table tbody tr"),
        ("Report", ".report-none")]


def test_every_tab_draws_its_panel_from_the_run(browser_page):
    page, requests, server = browser_page
    for name, selector in TABS:
        _tab(page, name)
        expect(page.locator(selector).first).to_be_visible()
        _shot(page, f"tab-{name.lower().replace(' ', '-')}")
    _tab(page, "Norms")
    expect(page.locator(".norms-count")).to_contain_text("qualified")
    _tab(page, "Events")
    expect(page.locator(".panel-events")).to_contain_text("events")
    _tab(page, "LLM usage")
    expect(page.locator(".usage-table")).to_contain_text("rules")  # the engine that decided, per operation
    assert _external(requests, server) == []


def _hover_a_point(page, chart, mark: str = "point") -> None:
    """Move the mouse over the chart's marks until vega shows a tooltip (it answers mouse moves)."""
    points = chart.locator(f"svg.marks [aria-roledescription='{mark}']")
    expect(points.first).to_be_attached()
    tooltip = page.locator("#vg-tooltip-element.visible")
    for _attempt in range(5):  # the chart may still be settling (a redraw replaces its marks)
        for i in range(min(points.count(), 12)):
            points.nth(i).scroll_into_view_if_needed()  # the mouse only reaches what is in view
            box = points.nth(i).bounding_box()
            if box is None:
                continue
            page.mouse.move(2, 2)  # come from outside: vega answers moves into a mark
            for dx in (0.0, 0.5):
                page.mouse.move(box["x"] + box["width"] / 2 + dx, box["y"] + box["height"] / 2)
                page.wait_for_timeout(120)
            if tooltip.count():
                return
        page.wait_for_timeout(500)


def test_charts_answer_hover_and_pick_one_agents_series(browser_page):
    page, requests, server = browser_page
    _tab(page, "Map")
    _hover_a_point(page, page.locator(".chart-map"), "circle")
    expect(page.locator("#vg-tooltip-element")).to_contain_text("agent")
    expect(page.locator("#vg-tooltip-element")).to_contain_text("area")
    _tab(page, "Time series")
    chart = page.locator(".chart-series").first
    expect(chart.locator(".vega-embed svg.marks")).to_be_visible()
    _hover_a_point(page, chart)
    expect(page.locator("#vg-tooltip-element")).to_contain_text("value")
    expect(page.locator("#vg-tooltip-element")).to_contain_text("step")
    name = "Isabella Rodriguez"
    _choose(page, page.locator(".series-agent"), name)
    expect(page.locator(".panel-series")).to_contain_text(f"Recorded values of {name}")
    _tab(page, "Agents")
    _choose(page, page.locator(".panel-inspector"), "Wolfgang Schulz")
    expect(page.locator(".panel-inspector")).to_contain_text("Wolfgang")
    expect(page.locator(".inspector-memory")).to_be_visible()
    _shot(page, "inspector-wolfgang")
    assert _external(requests, server) == []


def test_a_replayed_run_scrubs_in_view_without_calling_a_model(browser_page, run_dir):
    page, requests, server = browser_page
    page.locator(".run-dir input").fill(str(run_dir))
    page.locator(".btn-open").click()
    expect(page.locator(".step-counter")).to_contain_text("Step 3 of 3 · hobbs-cafe · crsec · replay of")
    scrubber = page.locator(".replay-scrubber [role=slider]")
    box = scrubber.bounding_box()
    assert box is not None and box["y"] + box["height"] <= 800  # in view at 1280x800
    _tab(page, "Interactions")
    expect(page.locator(".chart-heatmap svg.marks")).to_contain_text("up to step 3")
    timings = []
    for target in (2, 1, 2, 3):
        key = "ArrowLeft" if target < _steps(page) else "ArrowRight"
        scrubber.focus()
        timings.append(_seconds_until_shown(page, lambda key=key: page.keyboard.press(key), ".chart-heatmap svg.marks",
                                            f"up to step {target}"))
        expect(page.locator(".step-counter")).to_contain_text(f"Step {target} of 3")
        expect(page.locator(".chart-heatmap svg.marks")).to_contain_text(f"up to step {target}")
    RECORD["replay_redraw_seconds"] = timings
    expect(page.locator(".usage-live")).to_contain_text("llm calls: 0")
    _tab(page, "Report")  # the run's own findings beside the paper's
    expect(page.locator(".report-text")).to_contain_text("CRSEC: norm emergence")
    expect(page.locator(".report-text img").first).to_be_visible()
    _shot(page, "replay-interactions")
    assert _external(requests, server) == []


def test_a_report_quoting_hostile_model_text_runs_none_of_it(server, chromium_browser, run_dir, tmp_path):
    """report.md quotes norms and actions a model wrote: Vue evaluated "{{ ... }}" in them as JavaScript,
    an image link made a request, and a javascript: link was live."""
    with open_page(chromium_browser, server) as (page, requests, server):  # a page of its own
        _hostile_report_shown_as_text(page, requests, server, run_dir, tmp_path)


def _hostile_report_shown_as_text(page, requests, server, run_dir, tmp_path):
    copy = shutil.copytree(run_dir, tmp_path / "hostile")
    with (copy / "report.md").open("a", encoding="utf-8") as report:
        report.write("\n| Sam | MARK-A {{ 7*191 }} {{ constructor.constructor('window.__pwned=1')() }} |\n\n"
                     "![t](http://10.255.255.1/track.png) [clk](javascript:window.__clicked=1) "
                     "<img src=x onerror=\"window.__img=1\">\n")
    page.locator(".run-dir input").fill(str(copy))
    page.locator(".btn-open").click()
    expect(page.locator(".step-counter")).to_contain_text(f"replay of {copy}")
    _tab(page, "Report")
    expect(page.locator(".report-text")).to_contain_text("MARK-A {{ 7*191 }}")  # shown, not evaluated
    expect(page.locator(".report-text")).to_contain_text("[clk](javascript:window.__clicked=1)")
    assert page.locator(".report-text a").count() == 0
    assert page.evaluate("[window.__pwned, window.__img]") == [None, None]
    assert _external(requests, server) == []


def test_a_folder_of_runs_lists_them_and_one_opens_from_the_list(browser_page, run_dir, tmp_path):
    """Given a sweep's folder rather than a run, the card says so and lists the runs inside."""
    page, requests, server = browser_page
    folder = tmp_path / "sweep"
    for name in ("first", "second"):
        shutil.copytree(run_dir, folder / "runs" / name)
    chosen = folder / "runs" / "second"
    page.locator(".run-dir input").fill(str(folder))
    page.locator(".btn-open").click()
    expect(page.locator(".panel-replay")).to_contain_text("is not a run directory (no config.json); it holds 2 runs")
    _choose(page, page.locator(".run-picker"), "runs/second")  # listed by its place in the folder
    expect(page.locator(".step-counter")).to_contain_text(f"replay of {chosen}")
    expect(page.locator(".run-dir input")).to_have_value(str(chosen))  # the card shows the run it opened ...
    expect(page.locator(".run-picker")).to_have_count(0)  # ... and no longer the list
    expect(page.locator(".reproduction-findings")).to_have_count(0)  # a sweep has no findings
    # a reproduction's folder (ARM/seed-K) also shows the paper's findings as it checked them
    reproduction = tmp_path / "reproduction"
    shutil.copytree(run_dir, reproduction / "cafe" / "seed-1")
    pd.DataFrame({"finding": ["<b>everyone</b> adopts the norm"], "verdict": ["does not hold"], "seeds_holding": [1],
                  "seeds_measured": [3], "sign_p": [0.875]}).to_csv(reproduction / "findings.csv", index=False)
    page.locator(".run-dir input").fill(str(reproduction))
    page.locator(".btn-open").click()
    expect(page.locator(".reproduction-findings")).to_contain_text("<b>everyone</b> adopts the norm")  # escaped
    expect(page.locator(".reproduction-findings")).to_contain_text("does not hold")
    expect(page.locator(".reproduction-findings")).to_contain_text("1 of 3")
    page.locator(".reproduction-findings").scroll_into_view_if_needed()
    _shot(page, "reproduction-findings")
    assert _external(requests, server) == []


@pytest.fixture(scope="module")
def other_runs(tmp_path_factory):
    itcmas = tmp_path_factory.mktemp("itcmas-run")
    run(RunConfig(scenario="irollan-valley", arch="itcmas", model="rules", steps=11, rng=3), itcmas, progress=False,
        preflight=False)
    asvo = tmp_path_factory.mktemp("asvo-run")
    run(RunConfig(scenario="school-meso", arch="asvo", model="rules", steps=3, rng=3), asvo, progress=False,
        preflight=False)
    return {"itcmas": itcmas, "asvo": asvo}


@pytest.mark.parametrize(("arch", "tab", "chart", "table"), [
    ("itcmas", "Matrix & cliques", ".chart-itcmas svg.marks", ".matrix-table tbody tr"),
    ("asvo", "Theory of mind", ".chart-asvo svg.marks", ".tom-table tbody tr"),
])
def test_each_architecture_has_its_own_view(browser_page, other_runs, arch, tab, chart, table):
    page, requests, server = browser_page
    page.locator(".run-dir input").fill(str(other_runs[arch]))
    page.locator(".btn-open").click()
    expect(page.locator(".step-counter")).to_contain_text(f"· {arch} · replay of")
    _tab(page, tab)
    expect(page.locator(chart).first).to_be_visible()
    expect(page.locator(table).first).to_be_visible()
    expect(page.locator(".society-structure")).to_contain_text("Leader")
    _shot(page, f"{arch}-view")
    for name, selector in (("Time series", ".chart-series .vega-embed svg.marks"),
                           ("Interactions", ".chart-heatmap .vega-embed svg.marks"), ("Map", MAP)):
        _tab(page, name)
        expect(page.locator(selector).first).to_be_visible()
        _shot(page, f"{arch}-{name.lower().replace(' ', '-')}")
    assert _external(requests, server) == []


@pytest.mark.parametrize(("width", "height"), [(1920, 1080), (1280, 800)])
def test_no_tab_spills_sideways_at_common_screen_sizes(browser_page, width, height):
    page, requests, server = browser_page
    page.set_viewport_size({"width": width, "height": height})
    try:
        for name, selector in TABS[:3]:
            _tab(page, name)
            expect(page.locator(selector).first).to_be_visible()
            overflow = page.evaluate("() => document.documentElement.scrollWidth - window.innerWidth")
            assert overflow <= 0, f"{name} at {width}x{height} is {overflow}px wider than the window"
            _shot(page, f"{width}x{height}-{name.lower().replace(' ', '-')}")
    finally:
        page.set_viewport_size({"width": 1280, "height": 800})


@pytest.fixture(scope="module")
def slow_page(tmp_path_factory, chromium_browser):
    """A live society of generic agents on the project's OpenAI-compatible test server, whose replies
    the test holds (``gate`` cleared) once the society is built: a step waits on the provider for as
    long as the test needs, however loaded the machine. (A 2 s, then a 5 s delay let a loaded
    machine finish the step before the pause had shown.)"""
    gate = threading.Event()
    gate.set()

    def held_reply(messages):
        gate.wait(300)
        return "1"

    with FakeOpenAIServer(policy=held_reply) as provider:
        env = {**server_env("hobbs-cafe", "generic", "openai/fake-model", 42), "SOCIALSIM_DASHBOARD_STEPS": "50",
               "SOCIALSIM_DASHBOARD_API_BASE": provider.api_base, "OPENAI_API_KEY": "placeholder-key"}
        try:
            with dashboard(env, tmp_path_factory.mktemp("slow") / "server.log") as url, \
                    open_page(chromium_browser, url) as opened:
                yield (*opened, provider, gate)
        finally:
            gate.set()


def test_the_page_answers_and_pause_takes_effect_while_a_step_waits_on_a_slow_provider(slow_page):
    page, requests, server, provider, gate = slow_page
    _idle(page)
    gate.clear()  # from here each reply waits until the test lets it go
    try:
        page.locator(".btn-play").click()
        deadline = time.monotonic() + WAIT_MS / 1000
        while provider.in_flight == 0:  # step 1 is waiting on the provider
            assert time.monotonic() < deadline, "no call reached the provider"
            time.sleep(0.02)
        expect(page.locator(".progress-text")).to_contain_text("step 1 running")
        page.locator(".v-tab", has_text="Time series").scroll_into_view_if_needed()
        RECORD["tab_switch_during_a_step_seconds"] = _seconds_until_shown(
            page, page.locator(".v-tab", has_text="Time series").click, ".v-tab--active", "Time series")
        expect(page.locator(".v-tab--active")).to_contain_text("Time series")
        RECORD["pause_during_a_step_seconds"] = _seconds_until_shown(page, page.locator(".btn-pause").click,
                                                                     ".stop-reason", "paused")
        expect(page.locator(".stop-reason")).to_contain_text("paused")
        assert provider.in_flight > 0  # Pause was taken while the step still waited on its calls
        _shot(page, "slow-provider-paused")
    finally:
        gate.set()
    _idle(page)
    assert _steps(page) == 1  # the running step completed; no other began
    time.sleep(2.5)
    assert _steps(page) == 1 and provider.in_flight == 0
    assert _external(requests, server) == []


def test_write_the_measured_times(browser_page):
    """Not a speed check (timings are measured, never enforced): the artifact for the notes."""
    ARTIFACTS.mkdir(exist_ok=True)
    (ARTIFACTS / "dashboard-timings.json").write_text(json.dumps(RECORD, indent=1))
    assert "replay_redraw_seconds" in RECORD
