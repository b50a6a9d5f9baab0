"""Serve the web app: play, watch and analyse games in the browser.

    python experiments/serve.py                          # http://127.0.0.1:8000
    python experiments/serve.py --agent mcts-200 --port 8080

The default opponent is ``champion`` when it is registered, else the strongest agent
shipped. From a remote machine: ``ssh -L 8000:localhost:8000 host``, then open
http://localhost:8000 locally. Needs the ``web`` extra (``pip install -e ".[web]"``).
"""

from __future__ import annotations

import sys

from beastybar_jax.cli import OneLineParser, finite_float, int_in_range


def check_listenable(host: str, port: int) -> None:
    """Raise ``OSError`` (``socket.gaierror`` for a host that does not resolve) where the
    server could not listen on ``host``:``port``: each address the host resolves to is
    bound and listened on once, as asyncio will (``SO_REUSEADDR``, IPv6 only on IPv6
    addresses), then let go. Two servers started at the same moment can still both pass;
    uvicorn then refuses the second (exit code 3)."""
    import socket

    found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    for family, kind, proto, _, address in dict.fromkeys(found):  # each address once
        with socket.socket(family, kind, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                probe.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            probe.bind(address)
            probe.listen(1)


def main(argv=None) -> int:
    parser = OneLineParser(description="Serve the web app (play, watch, analyse, records).")
    parser.add_argument("--agent", default=None,
                        help="default opponent, any registry spec (default: champion if registered, "
                             "else the strongest shipped agent)")
    parser.add_argument("--host", default="127.0.0.1", help="interface to listen on (default: %(default)s)")
    parser.add_argument("--port", type=int_in_range(1, 65535), default=8000,
                        help="port (default: %(default)s)")
    parser.add_argument("--ttl-minutes", type=finite_float(above=0, maximum=525_600), default=60.0,
                        help="idle games expire after this long")
    parser.add_argument("--max-games", type=int_in_range(1, 1_000_000), default=500,
                        help="games kept at most (oldest idle go first)")
    parser.add_argument("--check", action="store_true",
                        help="check that --host:--port can be listened on and build the app (check --agent), "
                             "then exit without serving")
    args = parser.parse_args(argv)
    if args.agent is not None and not args.agent.strip():
        parser.error("--agent: empty agent spec (leave it out for the default)")
    try:
        import uvicorn
    except ImportError:
        print('error: the web app needs its extra: pip install -e ".[web]"', file=sys.stderr)
        return 2
    from beastybar_jax.training.compilation import enable_compilation_cache
    from beastybar_jax.training.interrupt import active_command, signal_name
    from beastybar_jax.web.app import create_app
    from beastybar_jax.web.engine import AgentUnavailable

    try:  # before the agents load (seconds): a port in use, a host not on this machine, is told at once
        check_listenable(args.host, args.port)
    except OSError as e:
        print(f"error: cannot listen on {args.host}:{args.port}: {e.strerror or e}", file=sys.stderr)
        return 2
    enable_compilation_cache()  # agents compile once, not at every start
    try:
        app = create_app(args.agent, ttl_seconds=args.ttl_minutes * 60, max_games=args.max_games, warm=not args.check)
    except (AgentUnavailable, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.check:
        print(f"ok: {args.host}:{args.port} can be listened on; default agents {app.state.defaults}")
        return 0
    print(f"Serving on http://{args.host}:{args.port}  (default opponent: {app.state.defaults['beastybar']}; "
          "Ctrl-C stops)", flush=True)
    # uvicorn answers SIGINT / SIGTERM itself (it stops serving, then hands the signal on);
    # the command's contract then ends it with one line and 130 / 143.
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning")
    signals = active_command()
    if signals is not None and signals.requested:
        signals.acknowledge()
        print(f"interrupted by {signal_name(signals.signum)}: the server stopped (its games were in memory only)",
              file=sys.stderr)
        return 128 + signals.signum
    return 0


if __name__ == "__main__":
    from beastybar_jax.training.interrupt import run_command

    run_command(main)
