"""The web app in a real browser: headless Chromium (Debian's ``chromium`` and
``chromium-driver``) driven by selenium against uvicorn on 127.0.0.1. A whole game
played by clicks, watch mode stepping and autoplay, the analysis panel, a record
downloaded and loaded again. Tic-tac-toe and the ``random`` agent keep it cheap.

Without the browser these tests skip, except under CI=true, where they fail
(``.ci/run`` installs it).
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import socket
import threading
import time

import pytest

from helpers import running_in_ci

pytestmark = pytest.mark.slow  # a real browser (CI runs these; the quick loop skips them)

_missing = [m for m in ("fastapi", "uvicorn", "selenium") if importlib.util.find_spec(m) is None]
if _missing:  # the dev extra; under CI=true a missing one fails instead of skipping
    _message = f"the browser tests need {', '.join(_missing)} (pip install -e '.[dev]')"
    if running_in_ci():
        pytest.fail(_message, pytrace=False)
    pytest.skip(_message, allow_module_level=True)

import uvicorn  # noqa: E402
from selenium import webdriver  # noqa: E402

from beastybar_jax.web.app import create_app  # noqa: E402

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DRIVER = shutil.which("chromedriver")
TIMEOUT = 300  # seconds; first moves compile


@pytest.fixture(scope="module")
def server():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    app = create_app("random", warm=False, agent_seed=0)  # reproducible agent moves
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(10)


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    if not (CHROMIUM and DRIVER):
        message = "no chromium/chromedriver: apt-get install chromium chromium-driver"
        if running_in_ci():
            pytest.fail(message + " (CI=true: the browser tests must run; .ci/run installs them)")
        pytest.skip(message)
    downloads = tmp_path_factory.mktemp("downloads")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1200,1000"):
        options.add_argument(arg)
    options.add_experimental_option("prefs", {"download.default_directory": str(downloads),
                                              "download.prompt_for_download": False})
    driver = webdriver.Chrome(service=webdriver.ChromeService(DRIVER), options=options)
    driver.downloads = downloads
    yield driver
    driver.quit()


def wait(driver, condition, timeout=TIMEOUT):
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, timeout, poll_frequency=0.1).until(lambda d: condition(d))


def by_id(driver, element_id):
    return driver.find_element("id", element_id)


def open_page(driver, server, tab):
    driver.get(server)
    wait(driver, lambda d: d.find_element("tag name", "body").get_attribute("data-ready") == "true", 30)
    by_id(driver, f"tab-{tab}").click()


def choose(driver, select_id, value):
    from selenium.webdriver.support.ui import Select

    Select(by_id(driver, select_id)).select_by_value(value)


def body(driver, name):
    return driver.find_element("tag name", "body").get_attribute(f"data-{name}")


def test_a_whole_game_by_clicks(browser, server):
    open_page(browser, server, "play")
    assert by_id(browser, "panel-play").is_displayed() and not by_id(browser, "panel-watch").is_displayed()
    choose(browser, "play-game", "tictactoe")
    choose(browser, "play-seat", "first")
    by_id(browser, "play-seed").send_keys("4")
    by_id(browser, "play-start").click()
    clicks = 0
    while body(browser, "finished") != "true":
        cells = wait(browser, lambda d: d.find_elements("css selector", ".cell.playable")
                     or body(d, "finished") == "true")
        if cells is True:
            break
        ply = body(browser, "ply")
        cells[0].click()
        clicks += 1
        wait(browser, lambda d: body(d, "ply") != ply)
        assert not by_id(browser, "error").is_displayed(), by_id(browser, "error").text
    status = by_id(browser, "status").text
    assert status.startswith("Game over: ") and ("You win" in status or "You lose" in status or "Draw" in status)
    assert clicks >= 3 and len(browser.find_elements("css selector", "#log li")) == int(body(browser, "ply"))
    assert not browser.find_elements("css selector", ".cell.playable")


def test_beastybar_by_clicks_a_card_then_its_target(browser, server):
    """Beasty Bar against ``random``: click the first card that can be played and, where
    it takes a target, the first of the options shown, to the end of the game."""
    open_page(browser, server, "play")
    choose(browser, "play-seat", "first")
    by_id(browser, "play-seed").send_keys("1")
    by_id(browser, "play-start").click()
    targets = 0
    while True:
        cards = wait(browser, lambda d: d.find_elements("css selector", ".card.playable")
                     or body(d, "finished") == "true")
        if cards is True:
            break
        ply = body(browser, "ply")
        assert len(browser.find_elements("css selector", ".card.back")) <= 4  # the opponent's hand, hidden
        cards[0].click()
        options = browser.find_elements("css selector", ".option")
        if options:
            assert len(options) >= 2  # a single move is played at once
            targets += 1
            options[0].click()
        wait(browser, lambda d: body(d, "ply") != ply)
        assert not by_id(browser, "error").is_displayed(), by_id(browser, "error").text
    assert targets >= 1
    assert "margin" in by_id(browser, "status").text and not browser.find_elements("css selector", ".card.back")
    assert len(browser.find_elements("css selector", "#log li")) == int(body(browser, "ply")) >= 20


def test_a_new_game_takes_over_while_the_agent_compiles(browser, server, monkeypatch):
    """A game whose agent is still compiling (held back here) keeps the page polling;
    asking for another game meanwhile replaces it at once, and the old game's answers are
    not drawn any more."""
    from beastybar_jax.web.engine import AgentPool

    gate = threading.Event()
    compile_now = AgentPool._compile

    def held_back(entry, build):
        if entry.spec == "greedy":
            gate.wait(TIMEOUT)
        compile_now(entry, build)

    monkeypatch.setattr(AgentPool, "_compile", staticmethod(held_back))
    try:
        open_page(browser, server, "play")
        choose(browser, "play-game", "beastybar")
        choose(browser, "play-seat", "second")
        by_id(browser, "play-agent").send_keys("greedy")
        by_id(browser, "play-start").click()
        wait(browser, lambda d: by_id(d, "status").get_attribute("class") == "compiling")
        choose(browser, "play-game", "tictactoe")
        choose(browser, "play-seat", "first")
        by_id(browser, "play-agent").clear()
        by_id(browser, "play-start").click()
        wait(browser, lambda d: d.find_elements("css selector", ".cell.playable"))
        time.sleep(1.5)  # past the old game's next poll (every second): its answer is dropped
        assert browser.find_elements("css selector", ".cell.playable") and body(browser, "ply") == "0"
        assert by_id(browser, "status").get_attribute("class") != "compiling"
        assert not by_id(browser, "error").is_displayed(), by_id(browser, "error").text
        # A takeover that fails (an unknown agent) leaves the game on the page going on:
        # once its agent has compiled, it moves.
        choose(browser, "play-game", "beastybar")
        choose(browser, "play-seat", "second")
        by_id(browser, "play-agent").send_keys("greedy")
        by_id(browser, "play-start").click()
        wait(browser, lambda d: by_id(d, "status").get_attribute("class") == "compiling")
        by_id(browser, "play-agent").clear()
        by_id(browser, "play-agent").send_keys("no-such-agent")
        by_id(browser, "play-start").click()
        wait(browser, lambda d: "no-such-agent" in by_id(d, "error").text)
        gate.set()
        wait(browser, lambda d: body(d, "ply") == "1" and d.find_elements("css selector", ".card.playable"))
    finally:
        gate.set()


def test_watch_step_autoplay_analyse_and_records(browser, server):
    open_page(browser, server, "watch")
    choose(browser, "watch-game", "tictactoe")
    by_id(browser, "watch-agent0").send_keys("random")
    by_id(browser, "watch-agent1").send_keys("minimax")
    by_id(browser, "watch-seed").send_keys("2")
    by_id(browser, "watch-start").click()
    wait(browser, lambda d: body(d, "ply") == "0")
    for expected in ("1", "2", "3"):  # forward asks the agents for their moves (the first compiles)
        by_id(browser, "nav-forward").click()
        wait(browser, lambda d: body(d, "viewing") == expected)
    marks = lambda d: sum(1 for c in d.find_elements("css selector", ".cell") if c.text)  # noqa: E731
    assert marks(browser) == 3
    by_id(browser, "nav-back").click()
    wait(browser, lambda d: body(d, "viewing") == "2" and marks(d) == 2)
    by_id(browser, "nav-last").click()
    wait(browser, lambda d: body(d, "viewing") == "3")
    browser.execute_script("document.getElementById('watch-speed').value = 100;")
    by_id(browser, "watch-autoplay").click()
    wait(browser, lambda d: body(d, "finished") == "true")
    assert by_id(browser, "status").text.startswith("Game over: ")
    moves = int(body(browser, "ply"))

    # Analyse the first position of the finished game.
    by_id(browser, "nav-first").click()
    wait(browser, lambda d: body(d, "viewing") == "0")
    by_id(browser, "tab-analyse").click()
    by_id(browser, "analyse-analyst").send_keys("mcts-16")
    by_id(browser, "analyse-run").click()
    wait(browser, lambda d: d.find_elements("css selector", "#analysis-table tr.move"))
    rows = browser.find_elements("css selector", "#analysis-table tr.move")
    assert len(rows) == 9  # every cell of the empty board
    assert "16 simulations" in by_id(browser, "analysis").text and "draw" in by_id(browser, "analysis").text

    # Download the record, then load it back: the same game, replayed.
    by_id(browser, "tab-records").click()
    by_id(browser, "record-download").click()
    path = browser.downloads / "tictactoe-seed2.json"
    wait(browser, lambda d: path.exists() and path.stat().st_size > 0, 30)
    record = json.loads(path.read_text())
    assert record["players"] == ["random", "minimax"] and len(record["moves"]) == moves
    by_id(browser, "record-file").send_keys(str(path))
    wait(browser, lambda d: "Loaded" in by_id(d, "record-status").text)
    assert body(browser, "ply") == str(moves) and body(browser, "finished") == "true"
    assert len(browser.find_elements("css selector", "#log li")) == moves
