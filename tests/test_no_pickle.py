"""Nothing madr reads from disk is unpickled (issue 13): planted pickles never run, and no code loads one.

Every load site gets a payload whose unpickling creates a marker file. Loading must then either
ignore the file or refuse it with an error naming it, and the marker must never appear. The
static check at the end keeps the unsafe calls from coming back.
"""

from __future__ import annotations

import json
import pickle
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from bench.reliability_binding import load_while_planting
from index_builder import IndexArtifactError, InvertedIndex, ScannIndex, ScannIndexBuilder
from index_builder.artifact import file_entry
from model import new_encoder
from model.training import QueryExamples, Trainer, TrainingConfig
from model.training.checkpoints import (
    LEGACY_STATE_FILE,
    STATE_FILE,
    TENSORS_FILE,
    CheckpointError,
    checkpoint_dir,
)
from model.weights_file import WeightsError
from schemas.manifest import files_digest
from tests.conftest import tiny_backbone

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = [
    QueryExamples(f"{color} {item}", (f"{color} {item} for sale",), (f"{item} in another shade",))
    for color in ("red", "blue", "green", "black")
    for item in ("socks", "juicer", "lamp")
]
CONFIG = TrainingConfig(
    epochs=1, batch_size=4, learning_rate=3e-3, show_progress=False, seed=5, checkpoint_every=1
)


class Payload:
    """Unpickling this creates `marker`: what an attacker's code would do, made visible."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[object, tuple[object, ...]]:
        return Path.touch, (self.marker,)


@pytest.fixture
def marker(tmp_path: Path) -> Path:
    return tmp_path / "payload-ran"


def test_the_payload_runs_when_unpickled(marker: Path) -> None:
    """Without this, a test below could pass because the payload is inert, not because it is never loaded."""
    pickle.loads(pickle.dumps(Payload(marker)))
    assert marker.exists()


# Checkpoints (model.training.checkpoints)


def _trainer(output_dir: Path) -> Trainer:
    torch.manual_seed(0)
    encoder, tokenizer = new_encoder("bibert", pretrained=False, backbone=tiny_backbone(), projection_dim=8)
    return Trainer(encoder, tokenizer, CONFIG, output_dir)


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The output directory of a finished run: its last checkpoint is resumable (and a no-op to resume)."""
    output_dir = tmp_path_factory.mktemp("trained") / "run"
    assert _trainer(output_dir).fit(EXAMPLES).steps == 3
    return output_dir


@pytest.fixture
def run_dir(trained: Path, tmp_path: Path) -> Path:
    """A private copy of the finished run that a test may plant files in."""
    return Path(shutil.copytree(trained, tmp_path / "run"))


def test_a_checkpoint_holds_json_and_safetensors_only(trained: Path) -> None:
    files = {path.name: path.read_bytes() for path in checkpoint_dir(trained).iterdir()}
    assert {STATE_FILE, TENSORS_FILE} <= files.keys() and LEGACY_STATE_FILE not in files
    for name, data in files.items():
        # A pickle starts with the PROTO opcode 0x80; torch.save writes a zip ("PK") around one.
        assert not data.startswith((b"\x80", b"PK")), f"{name} looks pickled"
    state = json.loads(files[STATE_FILE], parse_constant=lambda constant: pytest.fail(constant))
    assert state["state"]["step"] == 3


def _plant(path: Path, marker: Path) -> None:
    # torch.save is how the old checkpoints were written: this is what torch.load(weights_only=False) ran.
    torch.save({"step": Payload(marker)}, path)


def test_a_pickled_state_beside_the_checkpoint_is_ignored(run_dir: Path, marker: Path) -> None:
    last = checkpoint_dir(run_dir)
    _plant(last / LEGACY_STATE_FILE, marker)
    _plant(last / "pytorch_model.bin", marker)
    assert _trainer(run_dir).fit(EXAMPLES).steps == 3
    assert not marker.exists()


def test_a_pickled_state_alone_is_refused_unread(run_dir: Path, marker: Path) -> None:
    last = checkpoint_dir(run_dir)
    (last / STATE_FILE).unlink()
    (last / TENSORS_FILE).unlink()
    _plant(last / LEGACY_STATE_FILE, marker)
    with pytest.raises(CheckpointError, match=rf"pickled checkpoint \({re.escape(LEGACY_STATE_FILE)}\)"):
        _trainer(run_dir).fit(EXAMPLES)
    assert not marker.exists()


@pytest.mark.parametrize(
    ("name", "error"),
    [(STATE_FILE, CheckpointError), (TENSORS_FILE, CheckpointError), ("model.safetensors", WeightsError)],
)
def test_a_pickle_in_place_of_a_checkpoint_file_is_refused(
    run_dir: Path, marker: Path, name: str, error: type[Exception]
) -> None:
    _plant(checkpoint_dir(run_dir) / name, marker)
    with pytest.raises(error):
        _trainer(run_dir).fit(EXAMPLES)
    assert not marker.exists()


# Index artifacts (index_builder)


def _relist(directory: Path, relative: str) -> None:
    """Record `relative`'s current bytes in the manifest, as an attacker who can write it would."""
    manifest = json.loads((directory / "manifest.json").read_text())
    entry = file_entry(directory / relative)
    manifest["files"][relative] = entry.to_dict()
    manifest["files_digest"] = files_digest(manifest["files"])
    (directory / "manifest.json").write_text(json.dumps(manifest))


def test_a_listed_scann_docids_pickle_is_refused(tmp_path: Path, marker: Path) -> None:
    # ScaNN's load_searcher unpickles scann/scann_docids.pkl whenever it exists.
    vectors = np.random.default_rng(3).normal(size=(200, 8)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    index = ScannIndexBuilder.for_corpus(200, 8, depth=10).build(vectors, [f"sku-{i}" for i in range(200)])
    index.save(tmp_path / "index", model_id="m", model_version="1")
    (tmp_path / "index" / "scann" / "scann_docids.pkl").write_bytes(pickle.dumps(Payload(marker)))
    _relist(tmp_path / "index", "scann/scann_docids.pkl")
    with pytest.raises(IndexArtifactError, match=r"scann_docids\.pkl is a pickle"):
        ScannIndex.load(tmp_path / "index")
    assert not marker.exists()


def test_a_pickle_planted_while_an_index_loads_never_runs(tmp_path: Path, marker: Path) -> None:
    """Verification and loading read the same bytes: a scann_docids.pkl that appears between the
    check and ScaNN's load (renamed in and out in a loop, alongside 200 loads) never reaches ScaNN."""
    vectors = np.random.default_rng(4).normal(size=(200, 8)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    index = ScannIndexBuilder.for_corpus(200, 8, depth=10).build(vectors, [f"sku-{i}" for i in range(200)])
    index.save(tmp_path / "index", model_id="m", model_version="1")
    loaded, refused = load_while_planting(tmp_path / "index", Payload(marker), 200)
    assert not marker.exists()
    assert loaded + refused == 200 and loaded > 0  # the race was live: some loads got past the check


@pytest.mark.parametrize("name", ["indptr.npy", "docs.npy"])
def test_a_listed_object_array_in_an_inverted_index_is_refused(
    tmp_path: Path, marker: Path, name: str
) -> None:
    documents = [[np.array([1, 2]), np.array([0])], [np.array([2]), np.array([3])]]
    InvertedIndex.build(documents, ["a", "b"], buckets=2, dimensions=4).save(tmp_path / "index", "m", "1")
    payload = np.empty(1, dtype=object)
    payload[0] = Payload(marker)
    np.save(tmp_path / "index" / name, payload, allow_pickle=True)
    _relist(tmp_path / "index", name)
    with pytest.raises(IndexArtifactError, match=rf"{re.escape(name)} is not a plain \.npy array"):
        InvertedIndex.load(tmp_path / "index")
    assert not marker.exists()


# The static check: no unpickling call anywhere in madr's own code


UNSAFE_LOADS = {
    "torch.load(weights_only=False)": re.compile(r"weights_only\s*=\s*False"),
    "pickle.load/loads": re.compile(r"\bpickle\.loads?\s*\("),
    "dill": re.compile(r"^\s*(?:import|from)\s+dill\b", re.MULTILINE),
    "np.load(allow_pickle=True)": re.compile(r"allow_pickle\s*=\s*True"),
    "joblib.load": re.compile(r"\bjoblib\.load\s*\("),
    "pandas.read_pickle": re.compile(r"\bread_pickle\s*\("),
}
# Not madr's code: environments, build outputs, run outputs, and the tests (which plant pickles).
SKIPPED_DIRS = {"tests", "build", "dist", "runs", "node_modules", "__pycache__"}


def unsafe_loads(root: Path) -> list[str]:
    """`path:line: what` for every unsafe load call in the .py files under `root`."""
    found = []
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root).parts[:-1]
        if any(part in SKIPPED_DIRS or part.startswith(".") or part.endswith(".egg-info") for part in parts):
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        for what, pattern in UNSAFE_LOADS.items():
            for match in pattern.finditer(text):
                line = text.count("\n", 0, match.start()) + 1
                found.append(f"{path.relative_to(root)}:{line}: {what}")
    return found


def test_madr_code_never_unpickles_a_file() -> None:
    assert unsafe_loads(REPO) == []


def test_the_static_check_finds_each_unsafe_call(tmp_path: Path) -> None:
    calls = [
        "state = torch.load(path, weights_only=False)",
        "data = pickle.load(handle)",
        "import dill",
        "rows = np.load(path, allow_pickle=True)",
        "model = joblib.load(path)",
        "frame = pandas.read_pickle(path)",
    ]
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "loads.py").write_text("\n".join(calls) + "\n")
    (tmp_path / ".venv").mkdir()
    (tmp_path / ".venv" / "ignored.py").write_text("import dill\n")
    assert unsafe_loads(tmp_path) == [
        f"pkg/loads.py:{line}: {what}" for line, what in enumerate(UNSAFE_LOADS, 1)
    ]
