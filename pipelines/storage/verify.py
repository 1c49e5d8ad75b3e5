"""Verify before use: a stage checks every artifact it reads against that artifact's manifest.

Each stage calls these on the driver, once per input, before it builds its pipeline, so a changed
file stops the job before any work is done or any output is written. The checks themselves are
`schemas.manifest`'s (the one manifest API): a listed file that is missing, a file the manifest does
not list, or a sha256 other than the recorded one is refused with the file, both hashes and the fix.

What is checked where:

- a model directory (weights, config, tokenizer, aspect vocabularies): `verify_model`, by embed
  and evaluate. Workers trust the driver's check: `EncoderModelHandler.load_model` does not hash
  again. On the local runners the workers load the very files the driver hashed; on a cluster they
  load the same path from their container, which must be built from the verified folder.
- a model directory read outside Beam: `verify_model` too, by explain, neighbours,
  build-sparse-index and train --init_from, whose configs have the same --no_verify
  (`pipelines.settings.stage_config.input_checks`).
- an embed output (shards and dead letters): `verified_stage_manifest`, by build-index, evaluate
  (--embeddings), enrich, export-vertex and embed (--previous). Workers that read the shards later
  trust the driver's check too.
- an index artifact: its own loader (`index_builder.artifact`) verifies it on every open, on the
  driver and on workers alike; --no_verify does not skip that, since ScaNN would otherwise load
  (and unpickle) whatever files it finds.

`--no_verify` (a config's `verify` field, `pipelines.settings.stage_config.input_checks`) skips the first two,
with a WARNING that names what was used unchecked.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from apache_beam.io.filesystems import FileSystems

from model.weights_file import WEIGHTS_FILE, check_weights_readable
from pipelines.storage.stage_manifests import read_stage_manifest, verify_stage_folder
from schemas.manifest import (
    FILES_DIGEST,
    MANIFEST_FILE,
    ArtifactError,
    files_digest,
    read_manifest,
    verify_manifest,
)

LOGGER = logging.getLogger(__name__)
MODEL_KIND = "madr-model"
MODEL_FIX = "copy the model directory again from where `madr train` wrote it, or train it again"
# What to do about a changed stage folder, by manifest kind; other kinds get the generic advice.
STAGE_FIXES = {"madr-embeddings": "run `madr embed` again into a new folder"}
GENERIC_FIX = "run the stage that wrote it again, into a new folder"


def _unchecked(what: str, path: str) -> None:
    LOGGER.warning(
        "--no_verify: %s %s is used without checking its files' sha256 against its manifest; "
        "a changed or damaged file will go unnoticed",
        what,
        path,
    )


def verify_model(model_dir: str, verify: bool = True) -> dict[str, Any] | None:
    """Check a model directory against its manifest; return the manifest (None under --no_verify).

    Every file must be listed, not only those listed present: the loaders open the tokenizer's and the
    vocabularies' files by name, so an added one would change the model unchecked.
    """
    if not verify:
        _unchecked("the model", model_dir)
        return None
    manifest = verify_manifest(model_dir, MODEL_KIND, MODEL_FIX, allow_unlisted=False)
    # A listed file can still be damaged (cut short before the manifest was written, or copied in
    # from elsewhere with its entry): said here, on the driver, rather than by each worker.
    weights = Path(model_dir) / WEIGHTS_FILE
    if weights.is_file():
        check_weights_readable(weights)
    return manifest


def verified_stage_manifest(folder: str, kind: str, verify: bool = True) -> dict[str, Any]:
    """A stage folder's manifest, its files checked against it first unless `verify` is False.

    A drop-in for `read_stage_manifest` where a stage reads a folder as input: with --no_verify it
    still refuses a folder without a manifest or with a listed file missing, as that does.
    """
    if not verify:
        _unchecked(f"the {kind} folder", folder)
        return read_stage_manifest(folder, kind)
    return verify_stage_folder(folder, kind, STAGE_FIXES.get(kind, GENERIC_FIX))


class ModelMismatchError(ArtifactError):
    """Artifacts combined in one stage were made by different models."""


def model_fingerprint(model_dir: str) -> str | None:
    """One sha256 over a model's files as its manifest lists them (weights, config, tokenizer,
    vocabularies): embeddings and indexes record it, and a stage that combines them checks it.
    None for a model directory without a manifest."""
    try:
        manifest = read_manifest(model_dir, MODEL_KIND)
    except (ArtifactError, OSError):
        return None
    return files_digest(manifest.get("files") or {})


def _recorded(folder: str, key: str) -> str | None:
    """`key` as an embeddings folder's or an index's manifest records it (an index keeps it in
    "extra"); None when the folder has no manifest or the manifest does not record it."""
    path = FileSystems.join(folder, MANIFEST_FILE)
    if not FileSystems.exists(path):
        return None
    with FileSystems.open(path) as handle:
        manifest = json.loads(handle.read())
    return manifest.get(key) or (manifest.get("extra") or {}).get(key)


def recorded_fingerprint(folder: str) -> str | None:
    """The model fingerprint an embeddings folder or an index records; None when it records none
    (written before madr recorded it)."""
    return _recorded(folder, "model_fingerprint")


def embeddings_digest(manifest: dict[str, Any]) -> str:
    """The identity of an embed output: the digest of its files (`schemas.manifest.files_digest`), which
    an index built from it records as `embeddings_digest`."""
    return manifest.get(FILES_DIGEST) or files_digest(manifest.get("files") or {})


def check_same_model(
    model_dir: str,
    inputs: dict[str, str | None],
    allow: bool = False,
    embeddings: str | None = None,
    override: str | None = None,
) -> list[str]:
    """Refuse `inputs` (what -> folder) made by another model than `model_dir`, and an `--index` input
    built from other embeddings than `embeddings`; with `allow`, return the mismatches instead, for the
    output's manifest. Inputs that record no model are let through, with a warning. `override`: the flag
    of the calling command that allows a mismatch, offered in the refusal (None: the command has none)."""
    fingerprint = model_fingerprint(model_dir)
    mismatches = []
    for what, folder in inputs.items():
        recorded = recorded_fingerprint(folder) if folder else None
        if folder and recorded is None:
            LOGGER.warning(
                "%s %s does not record the model that made it: not checked against %s",
                what,
                folder,
                model_dir,
            )
        elif recorded and fingerprint and recorded != fingerprint:
            mismatches.append(
                f"{what} {folder} was made by the model with fingerprint {recorded[:16]}, "
                f"not by {model_dir} ({fingerprint[:16]})"
            )
    index = inputs.get("--index")
    if index and embeddings:
        built_from = _recorded(index, "embeddings_digest")
        given = embeddings_digest(read_stage_manifest(embeddings, "madr-embeddings"))
        if built_from and built_from != given:
            mismatches.append(
                f"--index {index} was built from the embeddings with digest {built_from[:16]}, not from "
                f"--embeddings {embeddings} ({given[:16]})"
            )
    if mismatches and not allow:
        way_out = f", or pass {override} (recorded in the output's manifest)" if override else ""
        raise ModelMismatchError(
            "; ".join(mismatches) + ". Give --model the model that made them, or rebuild them with this "
            f"one{way_out}"
        )
    for mismatch in mismatches:
        LOGGER.warning("allowed by --allow_model_mismatch: %s", mismatch)
    return mismatches
