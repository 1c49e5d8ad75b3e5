"""Multi-aspect dense retrieval encoders (PyTorch + Hugging Face transformers).

`new_encoder` builds a variant by name, `load_encoder` opens a saved model
directory; both return the encoder and its tokenizer.

The names below are imported on first use, not with the package: `model.abstention` and
`model.hardware` are read by every command's flags (`pipelines.settings.options`), and importing the
encoders with them put transformers' model code (about 4 s) in front of `madr --help`.
"""

from __future__ import annotations

from schemas.package_exports import exported_on_use

# Each submodule and the names the package exports from it.
_EXPORTS = {
    "aspects": (
        "AspectLabels",
        "AspectVocabulary",
        "FusionType",
        "Granularity",
        "ImplicitSlot",
        "Representation",
    ),
    "batch": ("EncoderOutput", "Side", "TokenizedBatch", "pick_device"),
    "config": ("EncoderConfig",),
    "encoder": ("DenseEncoder",),
    "madral": ("MultiAspectConfig", "MultiAspectEncoder"),
    "registry": (
        "VARIANTS",
        "load_config",
        "load_encoder",
        "load_vocabulary",
        "new_encoder",
        "variant_class",
    ),
    "text": (
        "content_hash",
        "document_text",
        "document_text_column",
        "document_text_with_aspects",
        "text_column_for_model",
        "text_for_model",
    ),
}

__getattr__, __dir__, __all__ = exported_on_use(__name__, _EXPORTS)
