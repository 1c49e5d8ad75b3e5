"""The backbone used zero-shot, as a model directory every stage can load.

`madr evaluate`, `madr experiment` and `madr adapt` compare a trained model with the bundled
backbone used as its authors ship it (mean pooling, no training: variant "zero-shot",
`model.bibert.ZeroShotEncoder`), on the same queries, through the same embed and search path. The
directory is made once per backbone and truncation and kept under $MADR_CACHE, like the ONNX
graphs, so a nightly evaluation does not write 90 MB of weights into every run folder.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from model import new_encoder
from model.backbone import bundled_backbone_path
from model.onnx_runtime import cache_root
from schemas import write_manifest
from schemas.manifest import sha256_file

ZERO_SHOT_VARIANT = "zero-shot"


def zero_shot_model(
    max_query_length: int = 32,
    max_document_length: int = 128,
    backbone: str | Path | None = None,
    cache: str | Path | None = None,
) -> str:
    """The zero-shot model directory for these truncation lengths, made on first use.

    It is keyed by the backbone weights' sha256 and the lengths, written to a temporary folder
    and renamed into place, so concurrent workers never see half a model.
    """
    path = Path(backbone or bundled_backbone_path())
    weights = next((p for p in (path / "model.safetensors", path / "pytorch_model.bin") if p.is_file()), None)
    if weights is None:
        raise FileNotFoundError(f"{path} holds no model.safetensors: it is not a backbone folder")
    key = f"{sha256_file(weights)[:16]}-q{max_query_length}-d{max_document_length}"
    root = Path(cache or cache_root()) / ZERO_SHOT_VARIANT
    target = root / key
    if (target / "manifest.json").is_file():
        return str(target)
    root.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{key}-", dir=root))
    try:
        encoder, tokenizer = new_encoder(
            ZERO_SHOT_VARIANT,
            backbone_path=path,
            max_query_length=max_query_length,
            max_document_length=max_document_length,
        )
        encoder.save_pretrained(staging, tokenizer)
        write_manifest(
            staging,
            kind="madr-model",
            info={"variant": ZERO_SHOT_VARIANT, "backbone": str(path), "trained": False},
        )
        try:
            os.replace(staging, target)
        except OSError:  # another process put it there first: theirs is the same model
            if not (target / "manifest.json").is_file():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return str(target)
