"""How long the web app's agent takes to reply, once compiled:

    python tests/web_latency.py champion@sims=32 [more specs...] [--games 2]

For each spec, plays ``--games`` games of Beasty Bar through the HTTP API (FastAPI's
TestClient, the same routes the page uses; the human plays random legal moves) and
prints the compile time and the agent's reply times (median, 90th percentile, max),
as measured by the server around the compiled call, with the machine's load average.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
from fastapi.testclient import TestClient

from beastybar_jax.web.app import create_app


def measure(client: TestClient, spec: str, games: int) -> dict:
    rng = np.random.default_rng(0)
    times, compile_seconds = [], None
    for seed in range(games):
        view = client.post("/api/games", json={"mode": "play", "agent": spec, "seed": seed, "seat": "second"}).json()
        while not view["finished"]:
            if view["waiting_for"] == "human":
                action = int(rng.choice([m["action"] for m in view["legal"]]))
                response = client.post(f"/api/games/{view['id']}/move", json={"action": action})
            else:
                response = client.post(f"/api/games/{view['id']}/advance", json={})
                if response.status_code == 202:
                    time.sleep(0.2)
                    view = response.json()
                    continue
                times.append(response.json()["agent_seconds"])
            assert response.status_code == 200, response.text
            view = response.json()
    for entry in client.get("/api/agents").json()["agents"]:
        if entry["spec"] == spec and entry["kind"] == "act":
            compile_seconds = entry["compile_seconds"]
    t = np.array(times) * 1000
    return {"spec": spec, "moves": len(t), "compile_s": compile_seconds, "median_ms": float(np.median(t)),
            "p90_ms": float(np.percentile(t, 90)), "max_ms": float(t.max())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("specs", nargs="+")
    parser.add_argument("--games", type=int, default=2)
    args = parser.parse_args()
    client = TestClient(create_app("random", warm=False))
    print(f"load average before: {os.getloadavg()}; {os.cpu_count()} CPUs")
    for spec in args.specs:
        result = measure(client, spec, args.games)
        print(f"{result['spec']}: compile {result['compile_s']} s; reply over {result['moves']} moves: median "
              f"{result['median_ms']:.0f} ms, p90 {result['p90_ms']:.0f} ms, max {result['max_ms']:.0f} ms; "
              f"load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
