"""Variants by name: the only place that maps a `--variant` string to code.

Adding a variant means adding one entry here; the training loop, the Beam
pipelines and the artifact loader never branch on variant names.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from transformers import PreTrainedTokenizerBase

from model.aspects.vocabulary import AspectVocabulary
from model.backbone import backbone_config_dict, bundled_backbone_path, load_tokenizer
from model.baselines import BASELINE_ENCODERS
from model.batch import pick_device
from model.bibert import BiBertEncoder, ZeroShotEncoder
from model.condenser import CondenserEncoder
from model.config import EncoderConfig, read_config_dict
from model.encoder import DenseEncoder
from model.madral import MADRAL_ENCODERS
from model.mural import MuralConcatEncoder, MuralEncoder, MurEncoder
from model.uhd import UhdEncoder

VARIANTS: dict[str, type[DenseEncoder]] = {
    cls.config_class.variant: cls
    for cls in (
        ZeroShotEncoder,
        BiBertEncoder,
        CondenserEncoder,
        *MADRAL_ENCODERS,
        *BASELINE_ENCODERS,
        MuralEncoder,
        MuralConcatEncoder,
        MurEncoder,
        UhdEncoder,
    )
}


ZERO_SHOT = ZeroShotEncoder.config_class.variant


@dataclass(frozen=True)
class ExperimentRole:
    """What the comparison experiment (`madr experiment`) does with a variant, kept with the variant.

    Attributes:
        trained: False for a variant used as it is (the zero-shot backbone, the row to beat).
        pretrained_from: the variant whose pre-trained model it fine-tunes from (warm start by name and
            shape: repro-ecir24 §8.1's en-v1 "only differs during fine-tuning" from MADRAL-ori); None:
            it starts from the backbone.
        budget_options: config fields the 2-core budget sets (UHD at the paper's 6 x 81,920 takes hours
            to encode 20k products here; the smallest n of its grid, uhd-bert A.1, and one bucket fit).
        embeddings_from: a variant whose trained word embeddings it starts from, when that variant's
            model is there (DSSM from BiBERT's, madral-kdd22 §8.2).
        pointwise_loss: whether madral-kdd22's L_CE is added in fine-tuning; UHD-BERT's objective is its
            hinge loss alone (uhd-bert Eq. 8).
        paper_preset: the paper whose settings it is run with (`pipelines.train.presets`, `--preset paper`):
            the paper that introduced it, or, for a baseline, the first paper of the family that ran it.
        paper_pretraining: the pre-trained model it starts from under the paper profile, where the paper
            pre-trains it and the budget does not (None: as `pretrained_from`).
        paper_options: config fields the paper profile sets for this variant alone, after its preset's
            (a preset's options apply to every variant of its paper).
    """

    trained: bool = True
    pretrained_from: str | None = None
    budget_options: tuple[tuple[str, Any], ...] = ()
    embeddings_from: str | None = None
    pointwise_loss: bool = True
    paper_preset: str | None = "madral-kdd22"
    paper_pretraining: str | None = None
    paper_options: tuple[tuple[str, Any], ...] = ()


# The experiment's variants, in the order of its table.
EXPERIMENT_ROLES: dict[str, ExperimentRole] = {
    ZERO_SHOT: ExperimentRole(trained=False, paper_preset=None),
    "bibert": ExperimentRole(pretrained_from="bibert"),
    "dssm": ExperimentRole(embeddings_from="bibert"),
    # repro-ecir24 §8.1's "advanced pre-trained model": BiBERT fine-tuning from Condenser's pre-training.
    "condenser": ExperimentRole(pretrained_from="condenser", paper_preset="repro-ecir24"),
    # madral-kdd22 §8.2: MpBERT and MADR are trained "the same way as BiBERT", pre-training included.
    "mpbert": ExperimentRole(paper_pretraining="mpbert"),
    "mtbert": ExperimentRole(pretrained_from="mtbert"),
    "bibert-concat": ExperimentRole(pretrained_from="bibert", paper_preset="repro-ecir24"),
    "madr": ExperimentRole(paper_pretraining="madr"),
    "madral": ExperimentRole(pretrained_from="madral"),
    "madral-en-v1": ExperimentRole(pretrained_from="madral", paper_preset="repro-ecir24"),
    # repro-ecir24 Table 3: the first k tokens read as (category, color, brand), its best order.
    "madral-en-v2": ExperimentRole(
        pretrained_from="madral-en-v2",
        paper_preset="repro-ecir24",
        paper_options=(("first_token_order", ("category", "color", "brand")),),
    ),
    "no-fusion": ExperimentRole(pretrained_from="madral", paper_preset="repro-ecir24"),
    "mural": ExperimentRole(pretrained_from="mural", paper_preset="mural-wsdm24"),
    # Its aspect strings are part of the document text it pre-trains on, so it has its own pre-trained model.
    "mural-concat": ExperimentRole(pretrained_from="mural-concat", paper_preset="mural-wsdm24"),
    "mur": ExperimentRole(pretrained_from="mur", paper_preset="mural-wsdm24"),
    "uhd": ExperimentRole(
        budget_options=(("dimensions", 8192), ("bucket_layers", [6])),
        pointwise_loss=False,
        paper_preset="uhd",
    ),
}


# Variants whose embedding is the summary encoding itself, projected: the shipped recipe (mean pooling, an
# identity projection, so that step 0 is the backbone used zero-shot) applies to these.
SUMMARY_ENCODING_VARIANTS = frozenset({"bibert", "mtbert"})


def embeds_summary_encoding(variant: str) -> bool:
    """Whether `variant`'s embedding is its projected summary encoding (CLS or mean; `model.pooling`)."""
    variant_class(variant)  # an unknown name is refused, naming the known ones
    return variant in SUMMARY_ENCODING_VARIANTS


def experiment_role(variant: str) -> ExperimentRole:
    """The variant's role in the experiment (a variant it does not list is trained from the backbone)."""
    variant_class(variant)  # an unknown name is refused, naming the known ones
    return EXPERIMENT_ROLES.get(variant, ExperimentRole())


def variant_class(name: str) -> type[DenseEncoder]:
    try:
        return VARIANTS[name]
    except KeyError:
        raise ValueError(f"unknown variant {name!r}; known variants: {', '.join(sorted(VARIANTS))}") from None


def new_encoder(
    variant: str,
    backbone_path: str | Path | None = None,
    pretrained: bool = True,
    vocabulary: AspectVocabulary | None = None,
    initialise_aspects: bool = True,
    **settings: Any,
) -> tuple[DenseEncoder, PreTrainedTokenizerBase]:
    """A fresh encoder of `variant` on a backbone folder (the bundled MiniLM by default).

    `settings` are the variant config's fields (projection_dim, shared_towers, ...).
    With `pretrained=False` the towers keep their random initialisation, which is
    what unit tests with tiny `BertConfig`s want. A `vocabulary` sizes the aspect
    prediction heads of variants that learn aspects and is saved with the model;
    variants without aspect heads ignore it. With `initialise_aspects` (and `pretrained`),
    the aspect layers start from the backbone's states for the value names
    (`model.aspects.initialisation`); False keeps their random start, for ablations.
    """
    cls = variant_class(variant)
    path = backbone_path or bundled_backbone_path()
    settings.setdefault("backbone", backbone_config_dict(path))
    tokenizer = load_tokenizer(path)
    if vocabulary is not None:
        for name, value in cls.vocabulary_settings(vocabulary, settings, tokenizer).items():
            settings.setdefault(name, value)
    encoder = cls(cls.config_class(**settings))
    # Backbone weights first: MURAL's value tables and MADRAL's aspect layers start from them.
    if pretrained:
        encoder.load_backbone_weights(path)
    if vocabulary is not None:
        encoder.attach_vocabulary(vocabulary, tokenizer)
    if pretrained and initialise_aspects:
        encoder.initialise_from_backbone(tokenizer)
    return encoder.eval(), tokenizer


def _config_defaults(variant: str) -> dict[str, Any]:
    return {f.name: f.default for f in dataclasses.fields(variant_class(variant).config_class)}


def learns_aspects_by_default(variant: str) -> bool:
    """Whether a variant's default config trains aspect heads from annotations (so λf applies to it)."""
    defaults = _config_defaults(variant)
    return bool(defaults.get("aspect_learning") or defaults.get("presence_learning"))


def drops_last_layer_by_default(variant: str) -> bool:
    """Whether a variant's default config drops the backbone's last layer (madral-kdd22 §7.2)."""
    return bool(_config_defaults(variant).get("drop_last_layer"))


def load_config(directory: str | Path) -> EncoderConfig:
    """A model directory's full config (its variant's dataclass), without loading any weights."""
    data = read_config_dict(directory)
    return variant_class(data.get("variant", "")).config_class.from_dict(data)


def load_vocabulary(directory: str | Path) -> AspectVocabulary | None:
    """The vocabulary that names a trained model's predicted aspect values (its `vocabulary`), read without
    its weights; None when its variant predicts none or the folder has no vocabulary file."""
    name = variant_class(read_config_dict(directory).get("variant", "")).vocabulary_file
    path = Path(directory) / name if name else None
    return AspectVocabulary.load(path) if path is not None and path.is_file() else None


def load_encoder(
    directory: str | Path, device: str | None = None
) -> tuple[DenseEncoder, PreTrainedTokenizerBase]:
    """Load any trained model directory; its config.json says which variant it is."""
    data = read_config_dict(directory)
    encoder = variant_class(data.get("variant", "")).from_config_dict(data)
    encoder.load_weights(directory)
    encoder.to(pick_device(device)).eval()
    return encoder, load_tokenizer(directory)
