"""The README's screenshots of the web app, taken in headless Chromium:

    python tests/web_screenshots.py docs/img

Writes ``web_play.png`` (a Beasty Bar game against ``heuristic``, mid-game) and
``web_analyse.png`` (a finished game's endgame position analysed by ``mcts-64``, with
the solver's exact results). Needs the ``web`` extra, selenium, chromium and chromedriver.
"""

from __future__ import annotations

import pathlib
import shutil
import socket
import sys
import threading
import time

import uvicorn
from selenium import webdriver
from selenium.webdriver.support.ui import Select, WebDriverWait

from beastybar_jax.games.beastybar.endgame import is_solvable
from beastybar_jax.web.app import create_app


def serve(app) -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    threading.Thread(target=server.run, daemon=True).start()
    while not server.started:
        time.sleep(0.05)
    return f"http://127.0.0.1:{port}"


def main(out_dir: str) -> None:
    out = pathlib.Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    app = create_app("heuristic", agent_seed=0)  # the same pictures every time
    url = serve(app)
    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium")
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1200,1150"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=webdriver.ChromeService(shutil.which("chromedriver")), options=options)
    wait = WebDriverWait(driver, 600, poll_frequency=0.2).until
    body = lambda d, name: d.find_element("tag name", "body").get_attribute(f"data-{name}")  # noqa: E731
    try:
        driver.get(url)
        wait(lambda d: body(d, "ready") == "true")
        driver.find_element("id", "play-seed").send_keys("12")
        Select(driver.find_element("id", "play-seat")).select_by_value("first")
        driver.find_element("id", "play-start").click()
        for _ in range(5):  # five moves of ours, each answered by the agent
            cards = wait(lambda d: d.find_elements("css selector", ".card.playable"))
            ply = body(driver, "ply")
            cards[-1].click()
            options_shown = driver.find_elements("css selector", ".option")
            if options_shown:
                options_shown[0].click()
            wait(lambda d: int(body(d, "ply")) >= int(ply) + 2)
        wait(lambda d: d.find_elements("css selector", ".card.playable"))
        driver.execute_script("window.scrollTo(0, 0)")
        driver.save_screenshot(str(out / "web_play.png"))

        # A watched game, analysed at its first solvable position.
        driver.find_element("id", "tab-watch").click()
        driver.find_element("id", "watch-agent0").send_keys("heuristic")
        driver.find_element("id", "watch-agent1").send_keys("random")
        driver.find_element("id", "watch-seed").send_keys("3")
        driver.find_element("id", "watch-start").click()
        wait(lambda d: body(d, "ply") == "0")
        driver.execute_script("document.getElementById('watch-speed').value = 100;")
        driver.find_element("id", "watch-autoplay").click()
        wait(lambda d: body(d, "finished") == "true")
        session = app.state.store.get(driver.execute_script("return G.id"))
        ply = next(i for i, s in enumerate(session.states) if bool(is_solvable(s)))
        driver.execute_script(f"stepTo({ply})")
        wait(lambda d: body(d, "viewing") == str(ply))
        driver.find_element("id", "tab-analyse").click()
        driver.find_element("id", "analyse-analyst").send_keys("mcts-64")
        driver.find_element("id", "analyse-run").click()
        wait(lambda d: d.find_elements("css selector", "#analysis-table tr.move"))
        driver.execute_script("document.getElementById('analysis').scrollIntoView()")
        driver.save_screenshot(str(out / "web_analyse.png"))
    finally:
        driver.quit()


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "docs/img")
