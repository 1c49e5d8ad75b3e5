"""Variants by name: the only place that maps a `--variant` string to code.

Adding a variant means adding one entry here; the training loop, the Beam
pipelines and the artifact loader never branch on variant names.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from transformers import PreTrainedTokenizerBase

from model.backbone import backbone_config_dict, bundled_backbone_path, load_tokenizer
from model.bibert import BiBertEncoder
from model.config import read_config_dict
from model.encoder import DenseEncoder, pick_device

VARIANTS: dict[str, type[DenseEncoder]] = {
    BiBertEncoder.config_class.variant: BiBertEncoder,
}


def variant_class(name: str) -> type[DenseEncoder]:
    try:
        return VARIANTS[name]
    except KeyError:
        raise ValueError(f"unknown variant {name!r}; known variants: {', '.join(sorted(VARIANTS))}") from None


def new_encoder(
    variant: str,
    backbone_path: str | Path | None = None,
    pretrained: bool = True,
    **settings: Any,
) -> tuple[DenseEncoder, PreTrainedTokenizerBase]:
    """A fresh encoder of `variant` on a backbone folder (the bundled MiniLM by default).

    `settings` are the variant config's fields (projection_dim, shared_towers, ...).
    With `pretrained=False` the towers keep their random initialisation, which is
    what unit tests with tiny `BertConfig`s want.
    """
    cls = variant_class(variant)
    path = backbone_path or bundled_backbone_path()
    settings.setdefault("backbone", backbone_config_dict(path))
    encoder = cls(cls.config_class(**settings))
    if pretrained:
        encoder.load_backbone_weights(path)
    return encoder.eval(), load_tokenizer(path)


def load_encoder(
    directory: str | Path, device: str | None = None
) -> tuple[DenseEncoder, PreTrainedTokenizerBase]:
    """Load any trained model directory; its config.json says which variant it is."""
    data = read_config_dict(directory)
    encoder = variant_class(data.get("variant", "")).from_config_dict(data)
    encoder.load_weights(directory)
    encoder.to(pick_device(device)).eval()
    return encoder, load_tokenizer(directory)
