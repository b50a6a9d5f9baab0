# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # beastybar_jax quickstart
#
# Beasty Bar as pure JAX functions, with AlphaZero-style training (mctx search in self-play,
# an optax learner) compiled into one function per iteration. In this notebook you:
#
# 1. play a few thousand random games at once and read one of them move by move;
# 2. train the `quick` config for a few iterations, watching the losses and the win rate
#    against two baseline opponents;
# 3. restore the trained network from its orbax checkpoint;
# 4. measure it in the arena against the baselines (duplicate deals, Elo table);
# 5. look inside the search at one position: visits, policy and value per legal move;
# 6. play a move against it.
#
# It runs on a GPU when one is present (on Colab: *Runtime → Change runtime type → GPU*) and on
# the CPU otherwise; every number below is small enough for a CPU.

# %% [markdown]
# ## Install
#
# On Colab, set `REPO` to the git URL of this repository and run the cell: it clones the
# repository (the configs live in it) and installs the package, with the CUDA build of JAX when
# `nvidia-smi` finds a GPU. Run from a checkout (`notebooks/` of the repository), it installs that
# checkout. When `beastybar_jax` is already importable it does nothing. If pip replaced a package
# that Colab had already imported, Colab asks to restart the session: do so and run all cells again.

# %% tags=["install"]
REPO = "https://github.com/<you>/beastybar_jax.git"  # <- the git URL of this repository (for Colab)
CLONE_DIR = "beastybar_jax_repo"  # where a clone goes

import importlib
import importlib.util
import os
import pathlib
import shutil
import subprocess
import sys


def gpu_present() -> bool:
    if shutil.which("nvidia-smi") is None:
        return False
    return subprocess.run(["nvidia-smi", "-L"], capture_output=True).returncode == 0


def find_repo_root() -> pathlib.Path | None:
    """The checkout holding configs/: $BEASTYBAR_REPO, this notebook's parent directory, the
    working directory, a clone made by this cell, or the installed package's parent."""
    candidates = [pathlib.Path(os.environ["BEASTYBAR_REPO"])] if os.environ.get("BEASTYBAR_REPO") else []
    candidates += [pathlib.Path.cwd().parent, pathlib.Path.cwd(), pathlib.Path(CLONE_DIR)]
    spec = importlib.util.find_spec("beastybar_jax")
    if spec is not None and spec.origin:
        candidates.append(pathlib.Path(spec.origin).resolve().parent.parent)
    for root in candidates:
        if (root / "configs").is_dir() and (root / "beastybar_jax").is_dir() and (root / "pyproject.toml").is_file():
            return root.resolve()
    return None


def pip_install(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", *args], check=True)


if importlib.util.find_spec("beastybar_jax") is None:
    root = find_repo_root()
    if root is None:
        if "<you>" in REPO:
            raise RuntimeError("beastybar_jax is not installed: set REPO (first line of this cell) to the "
                               "repository's git URL, or open this notebook from a checkout")
        subprocess.run(["git", "clone", "--depth", "1", REPO, CLONE_DIR], check=True)
        root = pathlib.Path(CLONE_DIR).resolve()
    extra = "[cuda]" if gpu_present() else ""
    print(f"installing {root}{extra} (a minute or two) ...")
    pip_install("-e", f"{root}{extra}")
    sys.path.insert(0, str(root))  # this kernel started before the install: make the package visible now
    importlib.invalidate_caches()
if importlib.util.find_spec("matplotlib") is None:  # for the charts (preinstalled on Colab)
    pip_install("matplotlib")
    importlib.invalidate_caches()

REPO_ROOT = find_repo_root()
print("configs:", REPO_ROOT / "configs" if REPO_ROOT else "not found (pass CONFIG as a path to a YAML file)")

# %% [markdown]
# ## Parameters
#
# `CONFIG` names a file in `configs/` (`tiny`, `quick`, `h100`) or is a path to a YAML file.
# The `quick` config trains 64 games side by side with 16 simulations per move; its full run is
# 120 iterations. Everything below reads these values.

# %% tags=["parameters"]
CONFIG = "quick"          # configs/<CONFIG>.yaml, or a path to a YAML config
ITERATIONS = 60           # training iterations (the quick config's own run: 120)
OPPONENTS = ["random", "heuristic"]  # baselines (agent registry names), weakest first
EVAL_EVERY = 5            # during training, play the OPPONENTS every EVAL_EVERY iterations
EVAL_GAMES = 64           # games per opponent in those evaluations
MATCH_DEALS = 64          # arena: deals per match, each played twice with seats swapped
SEARCH_SIMULATIONS = 32   # the search we look inside, the search agent of the arena and your opponent
RUN_DIR = "runs/notebook" # this notebook's run; deleted and recreated when you train again
SEED = 0
OVERRIDES = []            # more config overrides, e.g. ["num_games=128", "network.width=128"]
TICTACTOE_ITERATIONS = 50 # the tic-tac-toe sanity check (its config's full run: about a minute on a CPU)

# %% tags=["imports"]
import time

import jax
import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np
from IPython.display import clear_output, display

from beastybar_jax import arena, search
from beastybar_jax.agents import make_agent, network_agent
from beastybar_jax.checkpoint import load_agent
from beastybar_jax.config import load_config
from beastybar_jax.games import beastybar as game
from beastybar_jax.training.loop import TrainLoop
from beastybar_jax.training.metrics import read_jsonl

print(f"jax {jax.__version__}, backend: {jax.default_backend()}, devices: {jax.devices()}")

# %% [markdown]
# ## 1. Random games
#
# The engine is a set of pure functions on one small `game.State` (`init`, `step`,
# `legal_action_mask`, `observe`, `sample_world`, ...). Batching is `jax.vmap`, playing is a
# `jax.lax.scan` over the 24 turns a game lasts at most, and the whole thing compiles into one
# function. Here 4,096 games are played at once by random legal moves.

# %% tags=["random-games"]
NUM_RANDOM_GAMES = 4096


def random_turn(states, key):
    """One random legal move in every game (finished games are left as they are)."""
    legal = jax.vmap(game.legal_action_mask)(states)
    actions = jax.random.categorical(key, jnp.where(legal, 0.0, -jnp.inf), axis=-1)
    actions = jnp.where(states.terminated, 0, actions)  # no legal move in a finished game
    return jax.vmap(game.step)(states, actions), (states, actions)


@jax.jit
def play_random_games(key):
    """``(states before each turn [24, G], actions [24, G], final states [G])``."""
    deal_key, play_key = jax.random.split(key)
    states = jax.vmap(game.init)(jax.random.split(deal_key, NUM_RANDOM_GAMES))
    final, (before, actions) = jax.lax.scan(random_turn, states, jax.random.split(play_key, 24))
    return before, actions, final


start = time.perf_counter()
random_before, random_actions, random_final = jax.block_until_ready(play_random_games(jax.random.key(SEED)))
seconds = time.perf_counter() - start

rewards = np.asarray(random_final.rewards)         # [G, 2]: +1 / 0 / -1
first = np.asarray(random_before.current_player[0])  # who moved first in each game
lengths = np.asarray((~random_before.terminated).sum(axis=0))
print(f"{NUM_RANDOM_GAMES} random games in {seconds:.2f} s (compile included)")
print(f"all ended: {bool(np.asarray(random_final.terminated).all())}; length {lengths.min()}-{lengths.max()} turns")
print(f"draws: {np.mean(rewards[:, 0] == 0):.1%}; "
      f"first mover wins: {np.mean(rewards[np.arange(NUM_RANDOM_GAMES), first] > 0):.1%}; "
      f"mean bar points per player: {np.asarray(random_final.scores).mean():.2f}")


# %% tags=["render-game"]
def state_at(tree, *index):
    """One state out of a batched (or stacked) State."""
    return jax.tree.map(lambda x: x[index], tree)


g = 0  # the game to read
print(game.render_state(state_at(random_before, 0, g)))  # viewer=None: every card shown
print()
for t in range(int(lengths[g])):
    before = state_at(random_before, t, g)
    action = int(random_actions[t, g])
    print(f"turn {t:2d}  P{int(before.current_player)} plays {game.render_action(action, before)}")
print()
final = state_at(random_final, g)  # the last line says who won
print(game.render_state(final))

# %% [markdown]
# ## 2. Train
#
# `TrainLoop` compiles one iteration (self-play with search → replay buffer → SGD steps) and runs
# it `ITERATIONS` times; Python only logs scalars, saves orbax checkpoints and calls hooks. The hook
# below redraws the losses after every iteration; the win rates come from the loop's evaluation
# (`eval_every`), which plays the raw policy against the `OPPONENTS` (by default `random` and
# `heuristic`) on fixed deals.
# Training starts once the replay buffer holds `min_buffer_size` positions, so the first points
# have no loss. The first iteration includes compilation (tens of seconds on a CPU).

# %% tags=["config"]
config_path = pathlib.Path(CONFIG)
if not config_path.suffix:
    if REPO_ROOT is None:
        raise FileNotFoundError(f"no configs/ directory found; set CONFIG to a YAML file path instead of {CONFIG!r}")
    config_path = REPO_ROOT / "configs" / f"{CONFIG}.yaml"
config = load_config(config_path, [
    f"num_iterations={ITERATIONS}",
    f"run_dir={RUN_DIR}",
    f"seed={SEED}",
    f"eval_every={EVAL_EVERY}",
    f"eval_games={EVAL_GAMES}",
    f"eval_opponents=[{', '.join(OPPONENTS)}]",
    *OVERRIDES,
])
az = config.alphazero  # the AlphaZero section of the config
print(f"{config_path.name}: {config.num_games} games x {az.moves_per_iteration} moves per iteration, "
      f"{config.search.num_simulations} simulations per move ({config.search.algorithm}), "
      f"network {config.network.torso} width {config.network.width} depth {config.network.depth}, "
      f"{az.updates_per_iteration} updates of batch {az.batch_size} per iteration")

# %% tags=["train"]
LOSSES = ("loss", "policy_loss", "value_loss", "aux_loss")


class LivePlot:
    """A TrainLoop hook: keeps each iteration's metrics and redraws the charts."""

    def __init__(self, total: int):
        self.total = total
        self.rows: list[dict] = []

    def __call__(self, loop, iteration, metrics):
        # The loop adds the evaluation hook's results to this same dict (that hook may run
        # after this one), so it is kept as is and read when drawing.
        self.rows.append((iteration, metrics))
        self.draw(self.rows)
        return None

    def draw(self, rows):
        """``rows``: (iteration, metrics) pairs."""
        fig, (ax_loss, ax_eval) = plt.subplots(1, 2, figsize=(12, 3.8))
        trained = [(i, r) for i, r in rows if r.get("trained", 0) > 0]
        for name in LOSSES:  # aux_loss only with the score-margin head
            if trained and name in trained[0][1]:
                ax_loss.plot([i for i, _ in trained], [r[name] for _, r in trained], label=name)
        ax_loss.set(xlabel="iteration", title="training losses", xlim=(0, self.total))
        ax_loss.legend(loc="best")
        for opponent in OPPONENTS:
            key = f"eval_{opponent}_win_rate"
            points = [(i, r[key]) for i, r in rows if key in r]
            if points:
                ax_eval.plot(*zip(*points), marker="o", label=f"vs {opponent}")
        ax_eval.axhline(0.5, color="grey", lw=0.8, ls="--")
        ax_eval.set(xlabel="iteration", title="win rate of the raw policy", ylim=(0, 1), xlim=(0, self.total))
        ax_eval.legend(loc="lower right")
        iteration, last = rows[-1]
        fig.suptitle(f"iteration {iteration}/{self.total}: {last['total_games']:.0f} games played, "
                     f"{last['simulations_per_second']:,.0f} simulations/s")
        fig.tight_layout()
        clear_output(wait=True)
        display(fig)
        plt.close(fig)


run_path = pathlib.Path(config.resolved_run_dir)
if run_path.exists():  # a fresh run every time this cell runs; refuse to delete anything but a run
    if any(run_path.iterdir()) and not (run_path / "metrics.jsonl").exists():
        raise FileExistsError(f"{run_path} exists and is not a training run: choose another RUN_DIR")
    shutil.rmtree(run_path)
live_plot = LivePlot(config.num_iterations)
loop = TrainLoop(config, hooks=[live_plot], console=False)
print("compiling the training iteration ...")
start = time.perf_counter()
try:
    trained_state = loop.run()  # saves a checkpoint at the end (and every checkpoint_every iterations)
finally:
    loop.close()
history = read_jsonl(os.path.join(loop.run_dir, "metrics.jsonl"))  # what the loop logged, evaluation included
live_plot.draw([(int(r["iteration"]), r) for r in history])
print(f"{config.num_iterations} iterations in {time.perf_counter() - start:.0f} s (compile included); "
      f"run directory: {loop.run_dir}")
for r in history:
    if f"eval_{OPPONENTS[0]}_win_rate" in r:
        print(f"  iteration {r['iteration']:4.0f}: win rate " + ", ".join(
            f"vs {opponent} {r[f'eval_{opponent}_win_rate']:.0%}" for opponent in OPPONENTS))

# %% [markdown]
# ## 3. Save and restore
#
# The loop saved the whole train state with orbax (parameters, optimizer, games in progress,
# replay buffer, config) under `RUN_DIR/checkpoints/<iteration>`. `load_agent` restores just the
# network of the latest checkpoint; the restored parameters are the trained ones, bit for bit.
# A run is continued with `TrainLoop(config, resume=True)` (or `experiments/train.py --resume`).

# %% tags=["restore"]
print("checkpoints:", sorted(os.listdir(os.path.join(loop.run_dir, "checkpoints"))))
model = load_agent(loop.run_dir)  # the run directory: its latest checkpoint

trained_leaves = jax.tree_util.tree_flatten_with_path(jax.device_get(trained_state.params))[0]
restored_leaves = jax.tree.leaves(jax.device_get(model.params))
assert len(trained_leaves) == len(restored_leaves)
for (path, trained), restored in zip(trained_leaves, restored_leaves):
    assert trained.shape == restored.shape and np.array_equal(trained, restored), jax.tree_util.keystr(path)
num_params = sum(x.size for x in restored_leaves)
path, leaf = trained_leaves[0]
print(f"restored iteration {model.iteration} from {model.path}")
print(f"{len(restored_leaves)} arrays, {num_params:,} parameters, all equal to the trained ones; e.g. "
      f"{jax.tree_util.keystr(path)}[:3]:")
print("  trained ", np.asarray(leaf).ravel()[:3])
print("  restored", np.asarray(restored_leaves[0]).ravel()[:3])

# %% [markdown]
# ## 4. Arena
#
# `arena.play_match` plays every deal twice with the seats swapped (duplicate format), all games
# at once on the device. The network plays either its raw policy (argmax over legal moves) or
# with search (`SEARCH_SIMULATIONS` simulations on worlds sampled from what it may know). The
# score counts draws as half; `elo_table` fits ratings to all results (random = 0 when it plays).

# %% tags=["arena"]
search_config = model.config.search.replace(num_simulations=SEARCH_SIMULATIONS)
policy_agent = network_agent(model.network, model.params, name="network", game=game.BEASTYBAR)
search_agent = network_agent(model.network, model.params, search=search_config,
                             name=f"network+search{SEARCH_SIMULATIONS}", game=game.BEASTYBAR)
baselines = [make_agent(name) for name in OPPONENTS]

# Each pair of agents compiles its own match function (the heuristic and search agents take a
# while on a CPU), so the search agent meets only the strongest baseline.
pairs = [(policy_agent, b) for b in baselines] + [(search_agent, baselines[-1])]
pairs += [(b, a) for i, a in enumerate(baselines) for b in baselines[i + 1:]]  # baselines among themselves
results = []
start = time.perf_counter()
for i, (a, b) in enumerate(pairs):
    results.append(arena.play_match(a, b, MATCH_DEALS, jax.random.fold_in(jax.random.key(SEED), i),
                                    game=game.BEASTYBAR))
print(f"{len(pairs)} matches of {2 * MATCH_DEALS} games in {time.perf_counter() - start:.0f} s (compile included)\n")

print(f"{'agent':<22}{'opponent':<12}{'games':>6}{'W-D-L':>12}{'win rate':>10}{'score [95% CI]':>22}{'margin':>8}")
for r in results:
    wdl = f"{r.wins}-{r.draws}-{r.losses}"
    ci = f"{r.score:.2f} [{r.score_ci95[0]:.2f}, {r.score_ci95[1]:.2f}]"
    print(f"{r.agent:<22}{r.opponent:<12}{r.games:>6}{wdl:>12}{r.win_rate:>10.0%}{ci:>22}{r.mean_margin:>+8.2f}")

print(f"\n{'Elo':>6}  agent")
for row in arena.elo_table(results):
    print(f"{row.elo:>6.0f}  {row.name}  ({row.games} games, score {row.score:.2f})")

# %% [markdown]
# ## 5. Inside the search
#
# One position from the random game above, seen by the player to move. The search never looks at
# the hidden cards: it draws worlds consistent with what the mover knows (`sample_world`) and
# searches those. Left: root visits per legal move. Right: the network's prior and the search's
# improved policy (the training target). With Gumbel MuZero (the configs' default) that policy
# comes from the prior and the completed Q-values, so it can be sharper than the visit shares.
# Values are the expected result for the mover, in [-1, 1].

# %% tags=["search-view"]
position = state_at(random_before, 8, g)  # turn 8 of the game shown above
mover = int(position.current_player)
print(game.render_state(position, viewer=mover))

evaluate = search.network_evaluator(game.BEASTYBAR, model.network, model.params)
# Evaluation play (no exploration noise), as the search agent of the arena plays.
search_batch = jax.jit(lambda states, key: search.run_search(
    game.BEASTYBAR, evaluate, states, key, search_config, add_noise=False))


def batch_of_one(state):
    return jax.tree.map(lambda x: x[None], state)


result = jax.device_get(search_batch(batch_of_one(position), jax.random.key(SEED)))

legal = np.flatnonzero(np.asarray(game.legal_action_mask(position)))
labels = [game.render_action(int(a), position) for a in legal]
net = model.network.apply(model.params, game.observe(position, mover)[None])
prior = np.asarray(jax.nn.softmax(np.asarray(net.policy_logits[0])[legal]))
visits = result.visit_counts[0][legal]
weights = result.action_weights[0][legal]

fig, (ax_visits, ax_policy) = plt.subplots(1, 2, figsize=(12, 0.5 * len(legal) + 1.5), sharey=True)
y = np.arange(len(legal))
ax_visits.barh(y, visits, color="tab:blue")
ax_visits.set(yticks=y, yticklabels=labels, xlabel="root visits", title=f"{visits.sum()} simulations")
ax_visits.invert_yaxis()
ax_policy.barh(y - 0.2, prior, height=0.4, label="network prior", color="tab:grey")
ax_policy.barh(y + 0.2, weights, height=0.4, label="search policy", color="tab:orange")
ax_policy.set(xlabel="probability", xlim=(0, 1),
              title=f"value for P{mover}: network {float(net.value[0]):+.2f}, search {float(result.root_value[0]):+.2f}")
ax_policy.legend(loc="best")
fig.tight_layout()
plt.show()

print(f"P{mover} to move. Network value: {float(net.value[0]):+.3f}; search value: {float(result.root_value[0]):+.3f}")
print(f"search's choice: {game.render_action(int(result.action[0]), position)}")

# %% [markdown]
# ## 6. Your move
#
# The next cell deals a new game in which you move first against the network with search. Then
# set `MY_MOVE` in the cell after it (a move's name such as `"lion"` or
# `"parrot on queue place 1"`, a unique beginning of it, or an action id) and run it: it plays your
# move and the agent's reply. Run it again with another `MY_MOVE` to go on; the game lasts 24
# turns at most. For whole games, see the end of the notebook.

# %% tags=["deal"]
play_state = game.init(jax.random.key(SEED + 1))
ME = int(play_state.current_player)  # you move first
step = jax.jit(game.step)
agent_key = jax.random.key(SEED + 2)
print(f"You are P{ME}; your opponent is {search_agent.name}.\n")
print(game.render_state(play_state, viewer=ME))

# %% tags=["your-move"]
MY_MOVE = None  # e.g. "lion", "parrot on queue place 1" or an action id such as 30; None: your first legal move


def legal_moves(state) -> list[int]:
    return [int(a) for a in np.flatnonzero(np.asarray(game.legal_action_mask(state)))]


def choose(move, state) -> int:
    """An action id from an id or a (beginning of a) move's name; raises ValueError otherwise."""
    legal = legal_moves(state)
    names = {a: game.render_action(a, state).lower() for a in legal}
    if move is None:
        print(f"MY_MOVE is None: playing your first legal move, {names[legal[0]]!r}")
        return legal[0]
    if isinstance(move, (int, np.integer)) or str(move).strip().isdigit():
        if int(move) in legal:
            return int(move)
        raise ValueError(f"action {move} is not legal now; legal: {', '.join(f'{a} {names[a]}' for a in legal)}")
    text = " ".join(str(move).lower().split())
    matches = [a for a in legal if names[a] == text] or [a for a in legal if names[a].startswith(text)]
    if len(matches) == 1:
        return matches[0]
    raise ValueError(f"{move!r} matches {len(matches)} legal moves; legal: {', '.join(names.values())}")


if bool(play_state.terminated):
    print("This game is over; run the deal cell above for a new one.")
else:
    assert int(play_state.current_player) == ME
    print("Your legal moves:", ", ".join(f"{a}: {game.render_action(a, play_state)}" for a in legal_moves(play_state)))
    action = choose(MY_MOVE, play_state)
    print(f"You play {game.render_action(action, play_state)}.")
    play_state = step(play_state, action)
    if not bool(play_state.terminated):
        agent_key, key = jax.random.split(agent_key)
        reply = jax.device_get(search_batch(batch_of_one(play_state), key))  # the search agent's move
        action = int(reply.action[0])
        print(f"{search_agent.name} replies {game.render_action(action, play_state)} "
              f"(its search value: {float(reply.root_value[0]):+.2f}).")
        play_state = step(play_state, action)
    print()
    print(game.render_state(play_state, viewer=ME))
    if bool(play_state.terminated):
        mine = float(np.asarray(play_state.rewards)[ME])
        print({1.0: "You win!", 0.0: "A draw.", -1.0: "You lose."}[mine])

# %% [markdown]
# ## Sanity check: tic-tac-toe
#
# Tic-tac-toe is solved, which makes it the classic first experiment on an AlphaZero
# pipeline: the same code (search, self-play, replay, learner, arena) trains it with
# `game: tictactoe` in the config, and the result can be compared with perfect play. After
# its full run (`TICTACTOE_ITERATIONS = 50`, about a minute on a CPU) the raw network
# draws every game against `minimax`, from both seats, and values the empty board near 0.

# %% tags=["tictactoe"]
ttt_config = load_config((REPO_ROOT or pathlib.Path(".")) / "configs" / "tictactoe.yaml", [
    f"num_iterations={TICTACTOE_ITERATIONS}", f"run_dir={RUN_DIR}-tictactoe", "tensorboard=false"])
shutil.rmtree(ttt_config.resolved_run_dir, ignore_errors=True)
start = time.perf_counter()
ttt_loop = TrainLoop(ttt_config, console=False)
ttt_state = ttt_loop.run()
ttt_loop.close()
ttt_game = ttt_loop.trainer.game
print(f"tic-tac-toe: {TICTACTOE_ITERATIONS} iterations in {time.perf_counter() - start:.0f} s")
ttt_network = network_agent(ttt_loop.trainer.network, ttt_state.params, name="network", game=ttt_game)
for opponent in ("minimax", "random"):
    result = arena.play_match(ttt_network, make_agent(opponent, game=ttt_game), 100, jax.random.key(SEED),
                              game=ttt_game)
    print(f"vs {opponent}: {result.wins} wins, {result.draws} draws, {result.losses} losses of {result.games}")
empty = ttt_game.init(jax.random.key(0))
value = ttt_loop.trainer.network.apply(ttt_state.params, ttt_game.observe(empty, 0)[None]).value[0]
print(f"value of the empty board for the first player: {float(value):+.2f} (a draw is 0)")

# %% [markdown]
# ## Next
#
# - Longer runs: `python experiments/train.py --config configs/quick.yaml` (all 120 iterations),
#   `configs/h100.yaml` on a GPU; `--set key=value` overrides any config key.
# - Evaluation: `python experiments/evaluate.py --agent checkpoint:<run dir>@sims=64 --opponents random,heuristic`,
#   or `--round-robin random,heuristic,mcts-200,checkpoint:<run dir>` for an Elo table of any
#   registry agents. `<run dir>` is the directory the training cell printed.
# - Whole games against your agent in a terminal:
#   `python experiments/play.py --opponent checkpoint:<run dir>@sims=64`.
