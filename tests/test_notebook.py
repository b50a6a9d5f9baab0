"""The quickstart notebook runs top to bottom (tiny config, CPU) and matches its text twin.

``notebooks/quickstart.py`` (jupytext percent format) is what is reviewed and edited;
``notebooks/quickstart.ipynb`` is produced from it with
``jupytext --to ipynb --update notebooks/quickstart.py`` and must hold the same cells,
without outputs.

The notebook is executed with nbclient in a kernel started from this interpreter (a
temporary kernelspec, so the test does not depend on which ``python3`` kernel is
installed), in a temporary working directory, with the parameters cell's values
overridden by an injected cell after it (papermill's convention): the tiny config, a
few iterations, few games and simulations, a run directory under the temp dir.
"""

from __future__ import annotations

import importlib.util
import json
import pathlib
import sys

import pytest

from helpers import REPO_ROOT, running_in_ci
from helpers.tiny_training import FAST_COMPILE_FLAG

NOTEBOOK = REPO_ROOT / "notebooks" / "quickstart.ipynb"
TEXT_TWIN = REPO_ROOT / "notebooks" / "quickstart.py"
KERNEL_NAME = "beastybar-notebook-test"
TIMEOUT_PER_CELL = 600  # seconds; a cell error or a hang fails the test


def _require(*modules: str) -> None:
    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if missing:
        message = f"the notebook test needs {', '.join(missing)} (pip install -e '.[dev]')"
        if running_in_ci():
            pytest.fail(message)
        pytest.skip(message, allow_module_level=True)


_require("nbformat", "nbclient", "ipykernel", "matplotlib", "jupytext")

import nbformat  # noqa: E402

pytestmark = pytest.mark.slow  # the whole notebook in a kernel (CI runs it; the quick loop skips it)


def _write_kernelspec(root: pathlib.Path) -> pathlib.Path:
    """A kernelspec running ipykernel on this interpreter, CPU only, fast XLA compiles."""
    kernel_dir = root / "kernels" / KERNEL_NAME
    kernel_dir.mkdir(parents=True)
    spec = {
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "beastybar notebook test",
        "language": "python",
        "env": {
            "JAX_PLATFORMS": "cpu",
            "XLA_FLAGS": FAST_COMPILE_FLAG,  # unoptimised XLA code compiles ~3x faster; the tiny run is tiny
            "MPLBACKEND": "module://matplotlib_inline.backend_inline",
            "BEASTYBAR_REPO": str(REPO_ROOT),
        },
    }
    (kernel_dir / "kernel.json").write_text(json.dumps(spec))
    return root


def _parameters_cell_index(nb) -> int:
    tagged = [i for i, c in enumerate(nb.cells) if "parameters" in c.metadata.get("tags", [])]
    assert len(tagged) == 1, "the notebook must have exactly one cell tagged 'parameters'"
    return tagged[0]


def _cells(nb) -> list[tuple[str, str, list[str]]]:
    return [(c.cell_type, c.source, list(c.metadata.get("tags", []))) for c in nb.cells]


def test_notebook_and_its_text_twin_hold_the_same_cells_without_outputs():
    import jupytext

    committed = nbformat.read(NOTEBOOK, as_version=4)
    twin = jupytext.read(TEXT_TWIN)
    assert _cells(committed) == _cells(twin), \
        "notebooks/quickstart.ipynb is stale: run jupytext --to ipynb --update notebooks/quickstart.py"
    assert committed.metadata.get("jupytext", {}).get("formats") == "ipynb,py:percent"
    for cell in committed.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, f"cell {cell.id} has stored outputs"


def test_quickstart_runs_top_to_bottom_with_the_tiny_config(tmp_path, monkeypatch):
    from nbclient import NotebookClient

    nb = nbformat.read(NOTEBOOK, as_version=4)
    run_dir = tmp_path / "run"
    injected = nbformat.v4.new_code_cell("\n".join([
        "# injected by tests/test_notebook.py",
        f"CONFIG = {str(REPO_ROOT / 'configs' / 'tiny.yaml')!r}",
        "ITERATIONS = 4",
        "OPPONENTS = ['random']  # each baseline costs compile time; the heuristic has its own tests",
        "EVAL_EVERY = 2",
        "EVAL_GAMES = 8",
        "MATCH_DEALS = 4",
        "SEARCH_SIMULATIONS = 8",
        f"RUN_DIR = {str(run_dir)!r}",
        "OVERRIDES = ['tensorboard=false']",
        "TICTACTOE_ITERATIONS = 2  # runs the section; the learning itself is tests/test_tictactoe_learning.py",
    ]))
    injected.id = "injected-parameters"
    nb.cells.insert(_parameters_cell_index(nb) + 1, injected)

    workdir = tmp_path / "work"
    workdir.mkdir()
    monkeypatch.setenv("JUPYTER_PATH", str(_write_kernelspec(tmp_path / "jupyter")))
    client = NotebookClient(nb, kernel_name=KERNEL_NAME, timeout=TIMEOUT_PER_CELL,
                            resources={"metadata": {"path": str(workdir)}})
    client.execute()  # raises CellExecutionError on any cell error

    def cell(tag: str):
        (found,) = [c for c in nb.cells if tag in c.metadata.get("tags", [])]
        return found

    def text_of(tag: str) -> str:
        return "".join(o.get("text", "") for o in cell(tag).outputs if o.output_type == "stream")

    def has_image(tag: str) -> bool:
        return any("image/png" in o.get("data", {}) for o in cell(tag).outputs)

    assert "all ended: True" in text_of("random-games")
    assert "4 iterations in" in text_of("train") and has_image("train")
    assert "win rate vs random" in text_of("train")  # the evaluation ran and was logged
    assert "all equal to the trained ones" in text_of("restore")
    assert (run_dir / "checkpoints" / "4").is_dir()
    assert "Elo" in text_of("arena") and "network+search8" in text_of("arena")
    assert "search value" in text_of("search-view") and has_image("search-view")
    assert "You play" in text_of("your-move")
    assert "tic-tac-toe: 2 iterations" in text_of("tictactoe") and "vs minimax:" in text_of("tictactoe")
    assert not (workdir / "runs").exists()  # everything went to RUN_DIR
