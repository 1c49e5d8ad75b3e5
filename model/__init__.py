"""Multi-aspect dense retrieval encoders (PyTorch + Hugging Face transformers).

`new_encoder` builds a variant by name, `load_encoder` opens a saved model
directory; both return the encoder and its tokenizer.

The names below are imported on first use, not with the package: `model.abstention` and
`model.hardware` are read by every command's flags (`pipelines.options`), and importing the
encoders with them put transformers' model code (about 4 s) in front of `madr --help`.
"""

from __future__ import annotations

from schemas.package_exports import exported_on_use

# Each exported name and the submodule that defines it.
_EXPORTS = {
    "AspectLabels": "model.aspects",
    "AspectVocabulary": "model.aspects",
    "FusionType": "model.aspects",
    "Granularity": "model.aspects",
    "ImplicitSlot": "model.aspects",
    "Representation": "model.aspects",
    "EncoderOutput": "model.batch",
    "Side": "model.batch",
    "TokenizedBatch": "model.batch",
    "pick_device": "model.batch",
    "EncoderConfig": "model.config",
    "DenseEncoder": "model.encoder",
    "MultiAspectConfig": "model.madral",
    "MultiAspectEncoder": "model.madral",
    "VARIANTS": "model.registry",
    "load_config": "model.registry",
    "load_encoder": "model.registry",
    "new_encoder": "model.registry",
    "variant_class": "model.registry",
    "content_hash": "model.text",
    "document_text": "model.text",
    "document_text_with_aspects": "model.text",
    "text_for_model": "model.text",
}

__getattr__, __dir__ = exported_on_use(__name__, _EXPORTS)


__all__ = sorted(_EXPORTS)
