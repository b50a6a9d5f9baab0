"""The web app's API (FastAPI's TestClient, no browser): honest information in live
games, 4xx JSON errors for bad input (and the server keeps serving), many games with
expiry, records that download, load and replay, tic-tac-toe through the same routes,
and analysis with search values and exact endgame results."""

from __future__ import annotations

import importlib.util
import json
import os
import pathlib
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request

import jax
import numpy as np
import pytest

from helpers import running_in_ci

# FastAPI's TestClient needs httpx2 (Starlette 1.2 on) or httpx (before).
_missing = [m for m in ("fastapi", "httpx2") if importlib.util.find_spec(m) is None
            and not (m == "httpx2" and importlib.util.find_spec("httpx") is not None)]
if _missing:  # the web extra; under CI=true a missing one fails instead of skipping
    _message = f"the web app tests need {', '.join(_missing)} (pip install -e '.[dev]')"
    if running_in_ci():
        pytest.fail(_message, pytrace=False)
    pytest.skip(_message, allow_module_level=True)

from fastapi.testclient import TestClient  # noqa: E402

from beastybar_jax.games.beastybar import cards as C  # noqa: E402
from beastybar_jax.games.beastybar.endgame import is_solvable  # noqa: E402
from beastybar_jax.games import get_game  # noqa: E402
from beastybar_jax.playing import RecordError, replay  # noqa: E402
from beastybar_jax.web import views  # noqa: E402
from beastybar_jax.web.app import create_app  # noqa: E402
from beastybar_jax.web.engine import AgentPool  # noqa: E402
from beastybar_jax.web.store import GameStore, Session  # noqa: E402


REPO = pathlib.Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def client():
    app = create_app("random", warm=False)
    with TestClient(app, raise_server_exceptions=False) as c:
        c.app_state = app.state
        yield c


def until_done(client, response, timeout=600):
    """Poll a 202 (compiling) answer of ``advance``/``analyse`` until it is done."""
    deadline = time.monotonic() + timeout
    while response.status_code == 202:
        assert time.monotonic() < deadline, "still compiling"
        time.sleep(0.2)
        response = client.post(response.request.url.path, content=response.request.content,
                               headers={"content-type": "application/json"})
    return response


def strings(tree):
    """Every string (keys included) in a JSON tree."""
    if isinstance(tree, dict):
        for k, v in tree.items():
            yield k
            yield from strings(v)
    elif isinstance(tree, list):
        for v in tree:
            yield from strings(v)
    elif isinstance(tree, str):
        yield tree


def opponent_cards(tree, opponent):
    """(species) of every card object owned by ``opponent`` anywhere in a JSON tree."""
    if isinstance(tree, dict):
        if tree.get("owner") == opponent and "species" in tree:
            yield tree["species"]
        for v in tree.values():
            yield from opponent_cards(v, opponent)
    elif isinstance(tree, list):
        for v in tree:
            yield from opponent_cards(v, opponent)


def check_honest(view, true_state, human, shown_state=None):
    """Nothing in a live game's answer tells the opponent's cards still hidden in
    ``true_state`` (now), or a deck order. ``shown_state``: the state the answer's table
    shows (default: now)."""
    shown_state = true_state if shown_state is None else shown_state
    opponent = 1 - human
    on_table = set()
    for mask in (true_state.bar[opponent], true_state.thats_it[opponent]):
        on_table |= set(np.flatnonzero(np.asarray(mask)).tolist())
    on_table |= {int(c) - opponent * C.NUM_SPECIES for c in np.asarray(true_state.queue)
                 if c >= 0 and int(c) // C.NUM_SPECIES == opponent}
    hidden = set(np.flatnonzero(np.asarray(true_state.hand[opponent])).tolist())
    hidden |= {int(s) for s in np.asarray(true_state.deck[opponent]) if s >= 0}
    assert set(opponent_cards(view, opponent)) <= on_table  # only cards the human has seen played
    text = "\n".join(strings(view))
    for species in hidden:
        assert f"{C.SPECIES_NAMES[species]} (opponent's)" not in text
    assert "deck" not in {k for k in strings(view) if k == "deck"}  # deck orders are never sent
    if "table" in view:
        opp = view["table"]["players"][opponent]
        assert opp["hand"] is None and opp["hand_count"] == int(np.asarray(shown_state.hand[opponent]).sum())
        assert view["seed"] is None  # the deal seed would give every card away


def test_a_full_game_reveals_nothing_until_it_ends(client):
    response = client.post("/api/games", json={"mode": "play", "agent": "random", "seat": "second"})
    assert response.status_code == 200, response.text
    view = response.json()
    session = client.app_state.store.get(view["id"])
    human = view["human"]
    checked = 0
    rng = np.random.default_rng(0)
    while not view["finished"]:
        check_honest(view, session.state, human)
        assert json.dumps(view).count('"hand": [') == 1  # the human's own hand only
        if view["waiting_for"] == "human":
            assert view["legal"], view
            action = int(rng.choice([m["action"] for m in view["legal"]]))
            response = client.post(f"/api/games/{view['id']}/move", json={"action": action, "ply": view["ply"]})
        else:
            assert view["legal"] == []  # the opponent's legal moves would tell their hand
            response = until_done(client, client.post(f"/api/games/{view['id']}/advance", json={"ply": view["ply"]}))
        assert response.status_code == 200, response.text
        for ply in range(view["ply"] + 1):  # looking back reveals nothing either
            if ply % 5 == 0 and not response.json()["finished"]:
                past = client.get(f"/api/games/{view['id']}?ply={ply}").json()
                check_honest(past, session.state, human, shown_state=session.states[ply])
        view = response.json()
        checked += 1
    assert checked == view["ply"] >= 20 and view["result"]["text"].startswith(("You win", "You lose", "Draw"))
    # Over: everything is shown, the record replays to the same end.
    assert all(p["hand"] is not None for p in view["table"]["players"]) and view["seed"] is not None
    record = client.get(f"/api/games/{view['id']}/record").json()
    states = replay(record)
    assert np.array_equal(np.asarray(states[-1].bar), np.asarray(session.state.bar))
    assert record["result"] == [float(r) for r in np.asarray(session.state.rewards)]


def test_views_depend_only_on_what_the_viewer_knows():
    """Any world ``sample_world`` draws for the viewer gives the same table and moves."""
    game = get_game("beastybar")
    step, sample, mask = jax.jit(game.step), jax.jit(game.sample_world), jax.jit(game.legal_action_mask)
    key = jax.random.key(1)
    state = game.init(key)
    for turn in range(12):
        key, k1, k2 = jax.random.split(key, 3)
        viewer = int(state.current_player)
        world = jax.device_get(sample(state, viewer, k1))
        assert views.table(game, jax.device_get(state), viewer) == views.table(game, world, viewer)
        legal = [int(a) for a in np.flatnonzero(np.asarray(mask(state)))]
        assert views.legal_moves(game, state, legal, viewer) == views.legal_moves(game, world, legal, viewer)
        state = step(state, int(jax.random.choice(k2, np.array(legal))))


@pytest.mark.parametrize("method, path, body, status, words", [
    ("post", "/api/games", {"mode": "play", "agent": "no-such-agent"}, 422, "unknown agent"),
    ("post", "/api/games", {"game": "tictactoe", "agent": "heuristic"}, 422, "plays beastybar only"),
    ("post", "/api/games", {"game": "chess"}, 422, "unknown game"),
    ("post", "/api/games", {"agent": "mcts-20000"}, 422, "agents search at most 10,000 simulations x worlds"),
    ("post", "/api/games", {"agent": "mcts-99999999"}, 422, "over the cap"),
    ("post", "/api/games", {"agent": "champion@sims=100000"}, 422, "over the cap"),
    ("post", "/api/games", {"agent": "solver+mcts-5000@worlds=3"}, 422, "= 15,000 per move, over the cap"),
    ("post", "/api/games", {"agent": "checkpoint:/no/such/run"}, 422, "no/such/run"),
    ("post", "/api/games", {"seat": "middle"}, 422, "seat"),
    ("post", "/api/games", {"seed": -1}, 422, "seed"),
    ("post", "/api/games", {"colour": "red"}, 422, "colour"),
    ("post", "/api/games", "{not json", 422, "malformed"),
    ("get", "/api/games/nope", None, 404, "unknown game 'nope'"),
    ("post", "/api/games/nope/move", {"action": 1}, 404, "unknown game"),
    ("post", "/api/records", {"record": {"game": "beastybar", "seed": 1, "moves": [99]}}, 422, "not legal"),
    ("post", "/api/records", {"record": {"game": "beastybar"}}, 422, "lacks seed, moves"),
    # strict types: a bool, a string or a float is no integer
    ("post", "/api/games", {"seed": True}, 422, "seed"),
    ("post", "/api/games", {"seed": "7"}, 422, "seed"),
    ("post", "/api/games/nope/move", {"action": 1.0}, 422, "action"),
    ("post", "/api/games/nope/analyse", {"ply": True}, 422, "ply"),
    ("post", "/api/games/nope/move", {"action": 1, "ply": -5}, 422, "ply"),  # out of range, not "moved on"
    ("post", "/api/games/nope/advance", {"ply": -1}, 422, "ply"),
    # deal seeds are JSON numbers a browser holds exactly
    ("post", "/api/games", {"seed": 2**53}, 422, "seed"),
    ("post", "/api/records", {"record": {"game": "beastybar", "seed": 2**53, "moves": []}}, 422, "[0, 2**53)"),
    # agent specs: none empty, none too long, none too costly (playouts count)
    ("post", "/api/games", {"agent": ""}, 422, "empty agent spec"),
    ("post", "/api/games", {"mode": "watch", "agents": ["", "random"]}, 422, "empty agent spec"),
    ("post", "/api/games", {"mode": "watch", "agents": ["random", "x" * 501]}, 422, "agents.1"),
    ("post", "/api/games", {"agent": "mcts-10@playouts=2000"}, 422, "x 2000 playouts = 20,000 per move"),
    ("post", "/api/records", {"record": {"game": "beastybar", "seed": 1, "moves": [], "players": ["x" * 501, "y"]}},
     422, "at most 500 characters"),
    ("post", "/api/records", {"record": {"game": "tictactoe", "seed": 1, "moves": [4], "result": [1.0, -1.0]}},
     422, "the game goes on after its 1 moves"),
    # the body's size is bounded before anything reads it
    ("post", "/api/records", '{"record": "' + "x" * 70_000 + '"}', 413, "request body over 65536 bytes"),
    ("get", "/api/no/such/route", None, 404, "Not Found"),
])
def test_bad_requests_get_a_4xx_json_error_and_the_server_goes_on(client, method, path, body, status, words):
    kwargs = {}
    if isinstance(body, str):
        kwargs = {"content": body, "headers": {"content-type": "application/json"}}
    elif body is not None:
        kwargs = {"json": body}
    response = getattr(client, method)(path, **kwargs)
    assert response.status_code == status, response.text
    assert words in response.json()["error"]
    assert client.get("/api/info").status_code == 200  # still serving


def test_moves_out_of_turn_illegal_or_stale_are_refused(client):
    view = client.post("/api/games", json={"game": "tictactoe", "agent": "random", "seat": "second"}).json()
    gid = view["id"]
    out_of_turn = client.post(f"/api/games/{gid}/move", json={"action": 4})
    assert out_of_turn.status_code == 409 and "not your turn" in out_of_turn.json()["error"]
    view = until_done(client, client.post(f"/api/games/{gid}/advance", json={"ply": 0})).json()
    taken = next(i for i, c in enumerate(view["table"]["cells"]) if c["mark"])
    illegal = client.post(f"/api/games/{gid}/move", json={"action": taken, "ply": 1})
    assert illegal.status_code == 422 and "illegal move" in illegal.json()["error"]
    assert client.post(f"/api/games/{gid}/move", json={"action": "b2"}).status_code == 422
    stale = client.post(f"/api/games/{gid}/move", json={"action": view["legal"][0]["action"], "ply": 0})
    assert stale.status_code == 409 and "moved on" in stale.json()["error"]
    again = client.post(f"/api/games/{gid}/advance", json={"ply": 1})
    assert again.status_code == 409 and "your turn" in again.json()["error"]
    assert client.get(f"/api/games/{gid}/record").status_code == 409  # live: the record waits for the end
    assert client.get(f"/api/games/{gid}?ply=7").status_code == 422


def test_games_expire_and_the_store_stays_bounded():
    game = get_game("tictactoe")
    store = GameStore(ttl_seconds=0.05, max_games=3)

    def new():
        return store.add(Session(id=store.new_id(), game=game, mode="watch", seed=0, seed_chosen=True,
                                 players=["random", "random"], human=None, states=[game.init(jax.random.key(0))]))

    ids = [new().id for _ in range(5)]
    assert len(store) == 3 and store.get(ids[-1])  # the oldest went first
    time.sleep(0.1)
    new()
    assert len(store) == 1
    with pytest.raises(Exception, match="unknown game"):
        store.get(ids[-1])
    pool = AgentPool(max_compiled=1)  # compiled agents are bounded too
    first = pool.agent(game, "random")
    assert pool.agent(game, "random") is first and first.ready.wait(300)
    pool.agent(game, "minimax")
    assert [e["spec"] for e in pool.statuses()] == ["minimax"] and pool.agent(game, "random") is not first
    pool.shutdown()


def test_a_full_store_lets_finished_games_go_before_live_ones(client):
    """Beyond ``max_games`` a finished game goes first, even one used more recently than
    the live games kept; with none finished, the least recently used."""
    game = get_game("tictactoe")
    store = GameStore(max_games=3)

    def new(finished=False):
        state = game.init(jax.random.key(0))
        state = state.replace(terminated=np.asarray(finished))
        return store.add(Session(id=store.new_id(), game=game, mode="watch", seed=0, seed_chosen=True,
                                 players=["random", "random"], human=None, states=[state])).id

    live = [new(), new()]
    done = new(finished=True)
    later = new()
    assert len(store) == 3 and all(store.get(i) for i in live + [later])
    with pytest.raises(Exception, match="unknown game"):
        store.get(done)
    newest = new()
    assert len(store) == 3 and store.get(newest)
    with pytest.raises(Exception, match="unknown game"):
        store.get(live[0])  # none finished: the least recently used
    record = new(finished=True)  # a finished game just added (a loaded record) stays
    assert len(store) == 3 and store.get(record)
    # The spec a game names is the one that plays it, without the spaces the request had.
    view = client.post("/api/games", json={"game": "tictactoe", "agent": " random ", "seat": "first"}).json()
    assert [p["name"] for p in view["players"]] == ["human", "random"]


def test_the_agent_pool_never_evicts_a_default_or_a_compile_and_bounds_the_queue(monkeypatch):
    """A flood of new agents neither pushes out the server's default agent nor queues
    compiles without end: past ``max_pending`` compiles a new agent is a 503 (try again)."""
    from beastybar_jax.web.engine import PoolBusy

    gate = threading.Event()
    compile_now = AgentPool._compile

    def held_back(pool, entry, make_function):
        if entry.spec != "minimax":
            gate.wait(120)
        compile_now(pool, entry, make_function)

    monkeypatch.setattr(AgentPool, "_compile", held_back)
    game = get_game("tictactoe")
    pool = AgentPool(max_compiled=1, max_pending=2)
    pool.pin(game, "minimax")
    default = pool.agent(game, "minimax")
    assert default.ready.wait(300)
    pool.agent(game, "random")
    pool.agent(game, "mcts-2")  # both held back: two compiles pending, none of them evicted
    with pytest.raises(PoolBusy, match="compiling 2 agents already"):
        pool.agent(game, "mcts-3")
    assert pool.agent(game, "random").status == "compiling"  # one already queued is no new compile
    with TestClient(create_app("random", warm=False)) as c:
        c.app.state.pool.max_pending = 0
        response = c.post("/api/games", json={"game": "tictactoe", "agent": "mcts-4"})
        assert response.status_code == 503 and "try again" in response.json()["error"]
        c.app.state.pool.max_pending = 1
        # A game whose agent was evicted while the queue is full: its status says so (the
        # move that led there was played; a 503 would have read as if it had not been).
        view = c.post("/api/games", json={"game": "tictactoe", "agent": "random", "seat": "second"}).json()
        c.app.state.pool._entries.clear()
        c.app.state.pool.max_pending = 0
        again = c.get(f"/api/games/{view['id']}")
        assert again.status_code == 200 and again.json()["agent_status"]["status"] == "queued"
        assert "try again" in again.json()["agent_status"]["error"]
    gate.set()
    assert all(pool.agent(game, spec).ready.wait(300) for spec in ("random", "mcts-2"))
    pool.agent(game, "mcts-3")  # the queue has room again; the least recent non-default goes
    assert [e["spec"] for e in pool.statuses()] == ["minimax", "mcts-3"] and pool.agent(game, "minimax") is default
    pool.shutdown()


def test_a_secret_deal_is_drawn_from_2_to_the_53_seeds(client, monkeypatch):
    """A secret deal's seed gives every hidden card away once found, so it is drawn from
    all 2**53 deal seeds: a search over 2**31 seeds found one from the first moves."""
    from beastybar_jax.web import app as app_module

    bounds = []
    draw = app_module.secrets.randbelow
    monkeypatch.setattr(app_module.secrets, "randbelow", lambda n: bounds.append(n) or draw(n))
    view = client.post("/api/games", json={"game": "tictactoe", "agent": "random"}).json()
    assert bounds == [2**53] and view["seed"] is None


def test_watch_records_and_tictactoe_analysis(client):
    view = client.post("/api/games", json={"game": "tictactoe", "mode": "watch", "agents": ["random", "minimax"],
                                           "seed": 7}).json()
    while not view["finished"]:
        view = until_done(client, client.post(f"/api/games/{view['id']}/advance", json={"ply": view["ply"]})).json()
    assert view["history"] and view["table"]["kind"] == "board"
    record = client.get(f"/api/games/{view['id']}/record").json()
    assert record["players"] == ["random", "minimax"] and record["moves"] == [h["action"] for h in view["history"]]
    loaded = client.post("/api/records", json={"record": record}).json()
    assert loaded["mode"] == "replay" and loaded["table"] == view["table"] and loaded["id"] != view["id"]
    first = client.get(f"/api/games/{loaded['id']}?ply=0").json()
    assert all(c["mark"] is None for c in first["table"]["cells"])
    # Analysis of the first position; the exact column is perfect play's. (The minimax
    # agent has no search of its own: it would be analysed by MCTS.)
    pool = client.app_state.pool
    assert pool.analyst_spec(get_game("tictactoe"), "minimax") == "mcts-200"
    assert pool.analyst_spec(get_game("tictactoe"), "mcts-16") == "mcts-16"
    analysis = until_done(client, client.post(f"/api/games/{loaded['id']}/analyse",
                                              json={"ply": 0, "analyst": "mcts-16"}))
    assert analysis.status_code == 200, analysis.text
    a = analysis.json()
    assert a["analyst"] == "mcts-16" and len(a["moves"]) == 9 and not a["learned_prior"]
    assert sum(m["visits"] for m in a["moves"]) == 16 and a["moves"][0]["visits"] >= a["moves"][-1]["visits"]
    assert a["exact"]["result"] == 0 and all(m["exact_result"] == 0 for m in a["moves"])  # every first move draws
    cut = dict(record, moves=record["moves"][:2])  # a game cut short: its final result no longer holds
    assert client.post("/api/records", json={"record": cut}).status_code == 422
    del cut["result"]
    partial = client.post("/api/records", json={"record": cut}).json()
    assert partial["ply"] == 2 and not partial["finished"] and partial["waiting_for"] is None
    assert client.post(f"/api/games/{partial['id']}/advance", json={}).status_code == 409
    with pytest.raises(RecordError, match="after the end"):
        replay(dict(record, moves=record["moves"] + [0]))


@pytest.mark.slow  # compiles the exact solver (~30 s)
def test_beastybar_endgame_analysis_is_exact_and_live_analysis_is_yours(client):
    view = client.post("/api/games", json={"mode": "watch", "agents": ["random", "random"], "seed": 11}).json()
    while not view["finished"]:
        view = until_done(client, client.post(f"/api/games/{view['id']}/advance", json={"ply": view["ply"]})).json()
    session = client.app_state.store.get(view["id"])
    ply = next(i for i, s in enumerate(session.states) if bool(is_solvable(s)))
    a = until_done(client, client.post(f"/api/games/{view['id']}/analyse", json={"ply": ply, "analyst": "mcts-8"}))
    assert a.status_code == 200, a.text
    a = a.json()
    assert a["exact"] is not None and a["search"]["simulations"] == 8
    best = max(m["exact_margin"] for m in a["moves"])
    assert best == a["exact"]["margin"]  # the position's margin is its best move's
    over = client.post(f"/api/games/{view['id']}/analyse", json={"ply": view["ply"]})
    assert over.status_code == 409
    # In a live game: your own turn only, searched on worlds drawn from your side.
    live = client.post("/api/games", json={"mode": "play", "agent": "random", "seat": "second", "seed": 3}).json()
    theirs = client.post(f"/api/games/{live['id']}/analyse", json={"ply": 0, "analyst": "mcts-8"})
    assert theirs.status_code == 409 and "your own turns" in theirs.json()["error"]
    live = until_done(client, client.post(f"/api/games/{live['id']}/advance", json={"ply": 0})).json()
    mine = until_done(client, client.post(f"/api/games/{live['id']}/analyse", json={"analyst": "mcts-8"})).json()
    assert mine["information"].startswith("your view") and {m["action"] for m in mine["moves"]} == {
        m["action"] for m in live["legal"]}
    check_honest(mine, client.app_state.store.get(live["id"]).state, live["human"])


def _script(name):
    """An ``experiments/`` command line as a module (they are scripts, not a package)."""
    spec = importlib.util.spec_from_file_location(f"_{name}", REPO / "experiments" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_play_py_tells_a_record(client, tmp_path):
    view = client.post("/api/games", json={"game": "tictactoe", "mode": "watch", "agents": ["minimax", "minimax"],
                                           "seed": 1}).json()
    while not view["finished"]:
        view = until_done(client, client.post(f"/api/games/{view['id']}/advance", json={})).json()
    path = tmp_path / "game.json"
    path.write_text(json.dumps(client.get(f"/api/games/{view['id']}/record").json()))
    printed = []
    assert _script("play").main(["--replay", str(path)], print_fn=printed.append) == 0
    assert len([line for line in printed if line.startswith("P0 plays") or line.startswith("P1 plays")]) == 9
    assert "game over: draw" in "\n".join(printed)  # perfect play draws
    path.write_text('{"game": "tictactoe", "seed": 1, "moves": [4, 4]}')
    printed.clear()
    errors = []
    assert _script("play").main(["--replay", str(path)], print_fn=printed.append, error_fn=errors.append) == 2
    assert not printed and "move 2" in errors[0] and "not legal" in errors[0]


def test_the_default_agent_is_the_champion_once_registered(monkeypatch):
    from beastybar_jax.agents import make_agent
    from beastybar_jax.web import engine
    from beastybar_jax.web.app import default_agent

    try:
        make_agent("champion")
        registered = True
    except ValueError:
        registered = False
    assert default_agent("beastybar") == ("champion" if registered else "solver+outcome_heuristic")
    assert default_agent("tictactoe") == "minimax"
    monkeypatch.setattr(engine, "make_agent", lambda spec, game=None: make_agent(
        "random" if spec == "champion" else spec, game=game))
    assert default_agent("beastybar") == "champion"


def test_while_the_agent_compiles_the_answer_says_so(monkeypatch):
    """While an agent compiles, the game and its advance (202) say so: the spec, its
    queue, the seconds since it was asked for and whether it still waits for its queue's
    worker; once compiled, the agent moves."""
    gate = threading.Event()
    compile_now = AgentPool._compile

    def held_back(pool, entry, make_function):
        gate.wait(120)
        compile_now(pool, entry, make_function)

    monkeypatch.setattr(AgentPool, "_compile", held_back)
    with TestClient(create_app("random", warm=False)) as c:
        view = c.post("/api/games", json={"game": "tictactoe", "agent": "random", "seat": "second"}).json()
        assert view["waiting_for"] == "agent" and view["agent_status"]["status"] == "compiling"
        response = c.post(f"/api/games/{view['id']}/advance", json={"ply": 0})
        assert response.status_code == 202 and response.json()["ply"] == 0
        status = response.json()["agent_status"]
        assert {k: status[k] for k in ("spec", "game", "status", "error", "queue")} == {
            "spec": "random", "game": "tictactoe", "status": "compiling", "error": "", "queue": "play"}
        assert status["seconds"] >= 0 and isinstance(status["waiting"], bool)
        listed = [a for a in c.get("/api/agents").json()["agents"] if a["spec"] == "random"]
        assert listed and listed[0]["status"] == "compiling" and listed[0]["seconds"] >= status["seconds"]
        gate.set()
        response = until_done(c, response)
        assert response.status_code == 200 and response.json()["ply"] == 1


def test_no_request_builds_or_compiles_an_agent(monkeypatch):
    """A request only checks an agent's spec; building the agent (a network is read from
    disk) and compiling it is the workers' job: with the workers held, a game against a
    network starts, its advance and an analysis answer 202 at once, and nothing was built.
    An agent that both plays and analyses is built once."""
    from beastybar_jax.web import engine

    gate, skipped, built = threading.Event(), "champion@sims=2", []
    compile_now, make_agent = AgentPool._compile, engine.make_agent

    def held_back(pool, entry, make_function):
        gate.wait(120)
        if entry.spec == skipped:  # not compiled here: seconds of a network's compile for nothing
            entry.status, entry.error = "error", "skipped by the test"
            return entry.ready.set()
        compile_now(pool, entry, make_function)

    monkeypatch.setattr(AgentPool, "_compile", held_back)
    monkeypatch.setattr(engine, "make_agent", lambda spec, game=None: built.append(
        (threading.current_thread().name, spec)) or make_agent(spec, game=game))
    with TestClient(create_app("random", warm=False)) as c:
        built.clear()  # the server's start built its default agents
        view = c.post("/api/games", json={"agent": skipped, "seat": "first", "seed": 1}).json()
        assert view["players"][1 - view["human"]]["name"] == skipped
        analysed = c.post(f"/api/games/{view['id']}/analyse", json={})
        assert analysed.status_code == 202 and analysed.json()["queue"] == "analysis"
        watched = c.post("/api/games", json={"game": "tictactoe", "mode": "watch", "agents": ["mcts-16", "mcts-16"]})
        advance = c.post(f"/api/games/{watched.json()['id']}/advance", json={"ply": 0})
        analysis = c.post(f"/api/games/{watched.json()['id']}/analyse", json={"ply": 0})
        assert (advance.status_code, analysis.status_code) == (202, 202) and not built
        gate.set()
        assert until_done(c, advance).status_code == 200 and until_done(c, analysis).status_code == 200
    assert [spec for _, spec in built] == ["mcts-16"], built  # once, for both entries; the network never
    assert all(thread.startswith("compile") for thread, _ in built), built


def test_an_analysis_never_waits_behind_the_agents_compiles(monkeypatch):
    """The analysis has its own compile queue: while the agents' queue is stuck (held
    here), an analysis compiles and answers."""
    gate = threading.Event()
    compile_now = AgentPool._compile

    def held_back(pool, entry, make_function):
        if entry.queue == "play":
            gate.wait(120)
        compile_now(pool, entry, make_function)

    monkeypatch.setattr(AgentPool, "_compile", held_back)
    try:
        with TestClient(create_app("random", warm=False)) as c:
            view = c.post("/api/games", json={"game": "tictactoe", "mode": "watch", "agents": ["mcts-3", "random"]})
            assert c.post(f"/api/games/{view.json()['id']}/advance", json={"ply": 0}).status_code == 202
            response = until_done(c, c.post(f"/api/games/{view.json()['id']}/analyse",
                                            json={"ply": 0, "analyst": "mcts-16"}))
            assert response.status_code == 200 and response.json()["search"]["simulations"] == 16
            queued = {a["spec"]: a["status"] for a in c.get("/api/agents").json()["agents"] if a["kind"] == "act"}
            assert queued == {"mcts-3": "compiling", "random": "compiling"}  # still held: the analysis went first
    finally:
        gate.set()


def test_a_slow_move_answers_202_thinking_and_the_next_request_plays_it(monkeypatch):
    """An agent's move runs in a worker: the request does not wait for a slow one (202,
    "thinking", with the seconds so far), the game can be read meanwhile, and a later
    request picks the move up and plays it once."""
    gate = threading.Event()
    with TestClient(create_app("random", warm=False)) as c:
        view = c.post("/api/games", json={"game": "tictactoe", "agent": "random", "seat": "second"}).json()
        entry = c.app.state.pool.agent(get_game("tictactoe"), "random")
        assert entry.ready.wait(300) and entry.status == "ready"
        fast = entry.function
        entry.function = lambda state, key: (gate.wait(120), fast(state, key))[1]
        try:
            response = c.post(f"/api/games/{view['id']}/advance", json={"ply": 0})
            assert response.status_code == 202 and response.json()["agent_status"]["status"] == "thinking"
            assert response.json()["agent_status"]["seconds"] >= 0 and response.json()["ply"] == 0
            assert c.get(f"/api/games/{view['id']}").status_code == 200
            again = c.post(f"/api/games/{view['id']}/advance", json={"ply": 0})
            assert again.status_code == 202  # the same move, still thinking: not a second one
        finally:
            gate.set()
        response = until_done(c, again)
        assert response.status_code == 200 and response.json()["ply"] == 1 and "agent_seconds" in response.json()
        entry.function = fast


def test_a_spec_over_the_cap_is_refused_before_anything_is_built(client, monkeypatch):
    """An agent whose search is over the registry's cap is a 422 naming the cap, from
    the spec alone: nothing is built, a network is not read."""
    from beastybar_jax.web import engine

    monkeypatch.setattr(engine, "make_agent", lambda *a, **k: pytest.fail("built an agent over the cap"))
    view = client.post("/api/games", json={"game": "tictactoe", "mode": "watch"}).json()
    for path, body in (("/api/games", {"agent": "champion@sims=100000"}),
                       ("/api/games", {"mode": "watch", "agents": ["random", "solver+mcts-5000@worlds=3"]}),
                       (f"/api/games/{view['id']}/analyse", {"ply": 0, "analyst": "mcts-20000"})):
        response = client.post(path, json=body)
        assert response.status_code == 422 and "over the cap: agents search at most 10,000" in response.json()["error"]


def test_serve_says_in_one_line_where_it_cannot_listen():
    """A port in use, or a host this machine is not, is told before the agents load
    (seconds), in one line with exit code 2, and no "Serving on" line comes first."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        for argv, reason in ((["--port", str(port)], "Address already in use"),
                             (["--host", "nosuch.invalid"], "cannot listen on nosuch.invalid:8000")):
            result = subprocess.run([sys.executable, str(REPO / "experiments" / "serve.py"), "--agent", "random", *argv],
                                    cwd=REPO, capture_output=True, text=True, timeout=300)
            assert result.returncode == 2 and result.stdout == "", result.stderr[-3000:]
            lines = result.stderr.splitlines()
            assert len(lines) == 1 and lines[0].startswith("error: cannot listen on") and reason in lines[0], lines


def test_serve_check_listens_as_the_server_would(capsys):
    """``--check`` binds the host and port as the server would: a host that is not this
    machine (192.0.2.1, an address kept for documentation) or a port in use is the same
    one line and exit code 2, before any agent is built."""
    serve = _script("serve")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        for argv, reason in ((["--host", "192.0.2.1"], "cannot listen on 192.0.2.1:8000: "),
                             (["--port", str(port)], f"cannot listen on 127.0.0.1:{port}: Address already in use")):
            assert serve.main(["--agent", "random", "--check", *argv]) == 2
            out, err = capsys.readouterr()
            assert out == "" and len(err.splitlines()) == 1 and err.startswith(f"error: {reason}"), err


def test_serve_refuses_an_empty_agent_spec(capsys):
    """An empty ``--agent`` is a mistake, not a request for the default."""
    with pytest.raises(SystemExit) as exit_info:
        _script("serve").main(["--agent", " ", "--check"])
    assert exit_info.value.code == 2 and "--agent: empty agent spec" in capsys.readouterr().err


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_serve_stops_on_a_signal_with_one_line_and_its_exit_code(tmp_path, signum):
    """The command lines' signal contract holds for the server too: uvicorn stops
    serving, then the command ends with one line and 130 / 143, no traceback."""
    with socket.socket() as s:  # a free port on the loopback interface
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    process = subprocess.Popen([sys.executable, str(REPO / "experiments" / "serve.py"), "--agent", "random",
                                "--port", str(port)], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, env=dict(os.environ, BEASTYBAR_STOP_SECONDS="600"))
    try:
        deadline = time.monotonic() + 600  # generous: a busy machine; nothing waits this long unless broken
        while True:  # until the server answers
            assert process.poll() is None, process.communicate()[1][-3000:]
            assert time.monotonic() < deadline, "the server never answered"
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5) as response:
                    if response.status == 200:
                        break
            except OSError:
                time.sleep(0.2)
        process.send_signal(signum)
        out, err = process.communicate(timeout=300)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 128 + signum, err[-3000:]
    assert "Traceback" not in err, err[-3000:]
    lines = [line for line in err.splitlines() if line.strip()]
    assert lines == [f"interrupted by {signal.Signals(signum).name}: the server stopped (its games were in memory "
                     f"only)"], err[-3000:]
