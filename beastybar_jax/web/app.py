"""The web app: ``create_app()`` returns a FastAPI application (run it with uvicorn, or
``python experiments/serve.py``).

Pages (one HTML file, ``static/``): **Play** an agent, **Watch** two agents, **Analyse**
a position (the agent's prior, its search's visits and values, exact results in
solvable endgames), **Records** (download a finished game as JSON, load one back).

API (JSON; errors are ``{"error": "..."}`` with a 4xx status, or 503 while too many agents
compile; request bodies of at most ``MAX_BODY_BYTES``)::

    GET  /api/info                      games, their agents, the default agent
    POST /api/games                     new game: {game, mode: play|watch, agent | agents, seat, seed}
    GET  /api/games/{id}?ply=k          the game (at ply k) as the viewer may see it
    POST /api/games/{id}/move           the human's move: {action, ply}
    POST /api/games/{id}/advance        the agent to move moves: {ply}; 202 while it compiles or thinks
    POST /api/games/{id}/analyse        {ply, analyst}; 202 while the analyst compiles or searches
    GET  /api/games/{id}/record         the game record (finished games only)
    POST /api/records                   {record}: replay a record as a new game
    GET  /api/agents                    compiled agents: status, queue, seconds compiling so far

Every request answers at once (well under a second on an idle machine, once the server
has started): a request checks an agent's spec (``AgentPool.check``: names, options, the
registry's cap on its search) and hands the rest to background workers (building and
compiling agents, see :mod:`beastybar_jax.web.engine`; moves and analyses, ``Jobs``),
answering 202 until they are done. The game's own functions (deal, step, legal moves,
views) compile when the server starts.
"""

from __future__ import annotations

import logging
import pathlib
import secrets

import jax
import numpy as np
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException as StarletteHTTPException

from beastybar_jax.agents import agent_names, default_opponent
from beastybar_jax.games import GAME_NAMES, UnknownGameError, get_game
from beastybar_jax.playing import RecordError, deal, human_seat, legal_actions, move_text, replay, secret_deal_seed
from beastybar_jax.web import schemas
from beastybar_jax.seeds import fold_in_seed, seed_key
from beastybar_jax.web.engine import AgentPool, AgentUnavailable, Jobs, PoolBusy, exact_applies
from beastybar_jax.web.store import HUMAN, ApiError, GameStore, Session

STATIC = pathlib.Path(__file__).resolve().parent / "static"
CHAMPION = "champion"
# The strongest agents shipped without a trained checkpoint: the best baseline in matches
# (docs/strength.md), playing perfectly once the endgame can be solved.
FALLBACK_AGENT = {"beastybar": "solver+outcome_heuristic"}
log = logging.getLogger("beastybar_jax.web")
# A game record is a few hundred bytes; nothing the API takes comes near this.
MAX_BODY_BYTES = 64 * 1024


class BodyLimit:
    """ASGI middleware: a request body over ``limit`` bytes is a 413, before any route
    reads it (with or without a Content-Length header)."""

    def __init__(self, app, limit: int = MAX_BODY_BYTES):
        self.app, self.limit = app, int(limit)

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        chunks, size, more = [], 0, True
        while more:
            message = await receive()
            if message["type"] != "http.request":  # the client went away
                return
            chunks.append(message.get("body", b""))
            size += len(chunks[-1])
            more = message.get("more_body", False)
            if size > self.limit:
                response = JSONResponse(status_code=413, content={
                    "error": f"request body over {self.limit} bytes; a game record is far smaller"})
                return await response(scope, receive, send)
        body, sent = b"".join(chunks), False

        async def replay_body():
            nonlocal sent
            if sent:
                return await receive()
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}

        return await self.app(scope, replay_body, send)


def default_agent(game_name: str, pool: AgentPool | None = None) -> str:
    """``champion`` if the registry builds it for this game, else the strongest shipped agent."""
    game = get_game(game_name)
    try:
        (pool or AgentPool()).build(game, CHAMPION)
        return CHAMPION
    except AgentUnavailable:
        return FALLBACK_AGENT.get(game_name, default_opponent(game))


def warm_game(game) -> None:
    """Compile what a request does with ``game`` outside the agents (deal, seat, legal
    moves, a step, the narration and the view, the exact solver's test, a world drawn for
    a player, the agents' keys), so that no request compiles them: a few moves of a game."""
    state, key = deal(game, 0)
    human, key = human_seat(state, key, "random")
    seed_key(secrets.randbits(63))
    for ply in range(2):
        if bool(state.terminated):
            break
        jax.random.fold_in(fold_in_seed(seed_key(0), 0), ply)
        legal = legal_actions(game, state)
        session = Session(id="warm", game=game, mode="play", seed=0, seed_chosen=True,
                          players=[HUMAN, "warm"], human=human, states=[jax.device_get(state)])
        session.view()
        session.play(legal[0])
        state = session.state
        exact_applies(game, state)
        session.game.sample_world(state, int(state.current_player), jax.random.fold_in(key, ply))


def _error(status: int, message: str, **extra) -> JSONResponse:
    return JSONResponse(status_code=status, content={"error": message, **extra})


def _validation_message(exc: RequestValidationError) -> str:
    parts = []
    for err in exc.errors():
        where = ".".join(str(x) for x in err.get("loc", ()) if x != "body")
        parts.append(f"{where or 'body'}: {err.get('msg', 'invalid')}")
    return "malformed request: " + "; ".join(parts)


def create_app(agent: str | None = None, *, ttl_seconds: float = 3600.0, max_games: int = 500,
               compile_workers: int = 1, analysis_workers: int = 1, job_workers: int = 2, warm: bool = True,
               agent_seed: int | None = None) -> FastAPI:
    """The web app.

    Args:
      agent: the default opponent (any registry spec; default ``champion`` if it is
        registered, else the strongest shipped agent). Games it does not play use
        their own default.
      ttl_seconds: an untouched game is forgotten after this long.
      max_games: at most this many games are kept (the least recently used go first).
      compile_workers: agents compiled at the same time, in background threads.
      analysis_workers: analyses compiled at the same time, in their own threads (an
        analysis never waits behind the agents' compiles).
      job_workers: threads that run the agents' moves and the analyses.
      warm: compile the games' own functions now (before the first request) and start
        compiling the default agents.
      agent_seed: make the agents' random choices (ties, search noise) a function of this
        seed and the deal seed, for reproducible games (tests, screenshots); default: secret.
    """
    pool = AgentPool(workers=compile_workers, analysis_workers=analysis_workers)
    jobs = Jobs(workers=job_workers)
    store = GameStore(ttl_seconds=ttl_seconds, max_games=max_games)
    defaults = {}
    for name in GAME_NAMES:
        defaults[name] = default_agent(name, pool)
        if agent:
            try:
                pool.build(get_game(name), agent)
                defaults[name] = agent
            except AgentUnavailable:
                pass  # an agent of the other game
    if agent and agent not in defaults.values():
        pool.build(get_game("beastybar"), agent)  # raises AgentUnavailable: a bad --agent is the caller's error
    app = FastAPI(title="beastybar_jax", docs_url="/api/docs", redoc_url=None)
    app.add_middleware(BodyLimit)
    app.state.pool, app.state.store, app.state.defaults, app.state.jobs = pool, store, defaults, jobs
    for name, spec in defaults.items():
        pool.pin(get_game(name), spec)
        if warm:
            pool.agent(get_game(name), spec)
    if warm:
        for name in GAME_NAMES:
            warm_game(get_game(name))

    @app.exception_handler(ApiError)
    async def _api_error(request: Request, exc: ApiError):
        return _error(exc.status, exc.message)

    @app.exception_handler(PoolBusy)
    async def _busy(request: Request, exc: PoolBusy):
        return _error(503, str(exc))

    @app.exception_handler(RequestValidationError)
    async def _bad_body(request: Request, exc: RequestValidationError):
        return _error(422, _validation_message(exc))

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException):
        return _error(exc.status_code, str(exc.detail))

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception):  # a bug: say so, keep serving
        log.exception("unexpected error on %s", request.url.path)
        return _error(500, f"internal error: {type(exc).__name__}: {exc}")

    def game_of(name: str):
        try:
            return get_game(name)
        except UnknownGameError as e:
            raise ApiError(422, str(e)) from None

    def compiled(kind: str, game, spec: str):
        try:
            return pool.agent(game, spec) if kind == "act" else pool.analyst(game, spec)
        except AgentUnavailable as e:
            raise ApiError(422, str(e)) from None

    def status_of(session: Session) -> dict | None:
        """The status of the agent to move. Reported after a move was played, so a full
        compile queue is a status (``queued``: ask again), never an error of that move."""
        if session.waiting_for() != "agent":
            return None
        spec = session.players[session.to_move]
        try:
            return compiled("act", session.game, spec).describe()
        except PoolBusy as e:
            return {"spec": spec, "game": session.game.name, "status": "queued", "error": str(e),
                    "compile_seconds": 0.0}

    def agent_key(seed: int) -> jax.Array:
        if agent_seed is None:
            return seed_key(secrets.randbits(63))
        return fold_in_seed(seed_key(agent_seed), seed)

    def stale(session: Session, ply: int | None):
        if ply is not None and ply != len(session.moves):
            raise ApiError(409, f"the game has moved on: ply {ply} was asked for, the game is at ply "
                                f"{len(session.moves)} (reload it)")

    @app.get("/", include_in_schema=False)
    def index():
        return FileResponse(STATIC / "index.html")

    app.mount("/static", StaticFiles(directory=STATIC), name="static")

    @app.get("/api/info")
    def info():
        return {"games": {name: {"agents": list(agent_names(name)), "default_agent": defaults[name]}
                          for name in GAME_NAMES},
                "default_game": "beastybar", "ttl_seconds": store.ttl_seconds, "max_games": store.max_games}

    @app.get("/api/agents")
    def agents():
        return {"agents": pool.statuses()}

    @app.post("/api/games")
    def new_game(body: schemas.NewGame):
        game = game_of(body.game)
        if body.mode == "play":
            if body.agents is not None:
                raise ApiError(422, "mode play takes one 'agent' (the opponent), not 'agents'")
            specs = [body.agent if body.agent is not None else defaults[game.name]]
        else:
            if body.agent is not None:
                raise ApiError(422, "mode watch takes 'agents': [seat 0, seat 1], not 'agent'")
            specs = body.agents or [defaults[game.name]] * 2
        specs = [spec.strip() for spec in specs]  # as the pool keys them: the record names what played
        for spec in specs:
            compiled("act", game, spec)  # validates now, compiles in the background
        seed = body.seed if body.seed is not None else secret_deal_seed()
        state, key = deal(game, seed)
        if body.mode == "play":
            human, key = human_seat(state, key, body.seat)
            players = [HUMAN if p == human else specs[0] for p in range(game.num_players)]
        else:
            human, players = None, list(specs)
        session = Session(id=store.new_id(), game=game, mode=body.mode, seed=seed, seed_chosen=body.seed is not None,
                          players=players, human=human, states=[jax.device_get(state)],
                          agent_key=agent_key(seed))
        store.add(session)
        return session.view(agent_status=status_of(session))

    @app.get("/api/games/{game_id}")
    def get(game_id: str, ply: int | None = None):
        session = store.get(game_id)
        with session.lock:
            return session.view(ply, agent_status=status_of(session))

    @app.post("/api/games/{game_id}/move")
    def move(game_id: str, body: schemas.Move):
        session = store.get(game_id)
        with session.lock:
            if session.human is None:
                raise ApiError(409, "no human plays in this game (it is watched or replayed)")
            if session.finished:
                raise ApiError(409, "the game is over")
            stale(session, body.ply)
            if session.to_move != session.human:
                raise ApiError(409, "it is not your turn: the agent is to move (POST .../advance)")
            legal = legal_actions(session.game, session.state)
            if body.action not in legal:
                names = ", ".join(f"{a} ({move_text(session.game, a, session.state, session.human)})" for a in legal)
                raise ApiError(422, f"illegal move {body.action}: your legal moves are {names}")
            session.play(body.action)
            return session.view(agent_status=status_of(session))

    @app.post("/api/games/{game_id}/advance")
    def advance(game_id: str, body: schemas.Advance | None = None):
        session = store.get(game_id)
        with session.lock:
            if session.finished or session.mode == "replay":
                raise ApiError(409, "the game is over" if session.finished else "a loaded record is not played on")
            stale(session, body.ply if body else None)
            if session.waiting_for() != "agent":
                raise ApiError(409, "it is your turn, not the agent's")
            entry = compiled("act", session.game, session.players[session.to_move])
            if entry.status == "compiling":
                return JSONResponse(status_code=202, content=session.view(agent_status=entry.describe()))
            if entry.status == "error":
                raise ApiError(409, f"agent {entry.spec} could not be compiled: {entry.error}")
            ply, state = len(session.moves), session.state
            key = jax.random.fold_in(session.agent_key, ply)
        # The move runs in a worker: a slow agent's request answers 202 ("thinking") at once.
        done, action, seconds = jobs.run(("move", session.id, ply),
                                         lambda: entry.function(state, key))
        with session.lock:
            if len(session.moves) != ply:  # another request played this move meanwhile
                return session.view(agent_status=status_of(session))
            if not done:
                thinking = dict(entry.describe(), status="thinking", seconds=round(seconds, 1))
                return JSONResponse(status_code=202, content=session.view(agent_status=thinking))
            session.play(int(action))
            view = session.view(agent_status=status_of(session))
            view["agent_seconds"] = round(seconds, 4)
            return view

    @app.post("/api/games/{game_id}/analyse")
    def analyse(game_id: str, body: schemas.Analyse | None = None):
        body = body or schemas.Analyse()
        session = store.get(game_id)
        with session.lock:
            ply = session.check_ply(body.ply)
            state = session.states[ply]
            live, human = session.live, session.human
        if bool(state.terminated):
            raise ApiError(409, "the game is over at that ply: there is no move to analyse")
        mover = int(state.current_player)
        if live and mover != human:
            raise ApiError(409, "during a game you can analyse your own turns only")
        spec = body.analyst or {"play": next((p for p in session.players if p != HUMAN), None),
                                "watch": session.players[mover]}.get(session.mode) or defaults[session.game.name]
        entry = compiled("analyse", session.game, spec)
        # The exact solver only where it applies; it compiles once per game, for every analyst.
        solver = pool.exact(session.game) if exact_applies(session.game, state) else None
        for part, what in ((entry, f"the analysis with {entry.spec}"), (solver, "the exact endgame solver")):
            if part is not None and part.status == "compiling":
                return JSONResponse(status_code=202, content=dict(
                    part.describe(), status="compiling", analyst=entry.spec, compiling=what))
            if part is not None and part.status == "error":
                raise ApiError(409, f"{what} could not be compiled: {part.error}")
        key = seed_key(secrets.randbits(63))

        def work():
            world = state
            if live:  # only what the human knows: a world drawn from their side
                world = session.game.sample_world(state, human, jax.random.fold_in(key, 1))
            search = entry.function(world, key)
            exact = None if solver is None else solver.function(world, jax.random.fold_in(key, 2))
            return world, search, exact

        # The search runs in a worker: a long one answers 202 ("analysing") at once.
        done, result, seconds = jobs.run(("analyse", session.id, ply, entry.spec, live), work)
        if not done:
            return JSONResponse(status_code=202, content={"status": "analysing", "analyst": entry.spec,
                                                          "seconds": round(seconds, 1)})
        world, search, exact = result
        return _analysis(session, ply, world, mover, entry, search, exact, seconds, live)

    @app.get("/api/games/{game_id}/record")
    def record(game_id: str):
        session = store.get(game_id)
        with session.lock:
            return session.record()

    @app.post("/api/records")
    def load_record(body: schemas.LoadRecord):
        try:
            states = replay(body.record)
        except RecordError as e:
            raise ApiError(422, f"bad record: {e}") from None
        record = body.record
        game = get_game(record["game"])
        session = Session(id=store.new_id(), game=game, mode="replay", seed=record["seed"], seed_chosen=True,
                          players=list(record.get("players", ["?", "?"])), human=None, states=states[:1])
        for action in record["moves"]:
            session.play(action)
        store.add(session)
        return session.view()

    return app


def _analysis(session: Session, ply: int, state, mover: int, entry, search: dict, exact: dict | None,
              seconds: float, live: bool) -> dict:
    game = session.game
    viewer = session.human if live else None
    legal = legal_actions(game, state)
    has_search = "visits" in search
    solved = exact is not None and bool(exact["solved"])
    moves = []
    for a in legal:
        row = {"action": a, "label": move_text(game, a, state, viewer), "prior": float(search["prior"][a])}
        if has_search:
            row.update(visits=int(search["visits"][a]), weight=float(search["weights"][a]),
                       value=float(search["q"][a]) if int(search["visits"][a]) > 0 else None)
        if solved:
            known = bool(exact["action_exact"][a])
            row.update(exact_result=int(np.sign(exact["action_result"][a])) if known else None,
                       exact_margin=int(exact["action_margin"][a]) if known else None)
        moves.append(row)
    moves.sort(key=lambda r: (-r.get("visits", 0), -r["prior"]))
    setup = entry.agent.search_setup
    out = {
        "ply": ply, "mover": mover, "analyst": entry.spec, "learned_prior": bool(setup.learned_prior),
        "network_value": float(search["value"]), "moves": moves, "seconds": round(seconds, 3),
        "search": None, "exact": None,
        "information": ("your view: searched on worlds drawn from what you know" if live
                        else "everything is known: finished, watched or loaded game"),
    }
    if has_search:
        out["search"] = {"simulations": setup.search.num_simulations, "worlds": setup.search.num_determinizations,
                         "value": float(search["root_value"]), "choice": int(search["choice"]),
                         "choice_label": move_text(game, int(search["choice"]), state, viewer)}
    if solved:
        out["exact"] = {"result": int(np.sign(exact["result"])), "margin": int(exact["margin"])}
    return out
