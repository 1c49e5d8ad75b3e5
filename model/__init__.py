"""Multi-aspect dense retrieval encoders (PyTorch + Hugging Face transformers).

`new_encoder` builds a variant by name, `load_encoder` opens a saved model
directory; both return the encoder and its tokenizer.
"""

from model.aspects import (
    AspectLabels,
    AspectVocabulary,
    FusionType,
    Granularity,
    ImplicitSlot,
    Representation,
)
from model.batch import EncoderOutput, Side, TokenizedBatch, pick_device
from model.config import EncoderConfig
from model.encoder import DenseEncoder
from model.madral import MultiAspectConfig, MultiAspectEncoder
from model.registry import VARIANTS, load_config, load_encoder, new_encoder, variant_class
from model.text import content_hash, document_text, document_text_with_aspects, text_for_model

__all__ = [
    "VARIANTS",
    "AspectLabels",
    "AspectVocabulary",
    "DenseEncoder",
    "EncoderConfig",
    "EncoderOutput",
    "FusionType",
    "Granularity",
    "ImplicitSlot",
    "MultiAspectConfig",
    "MultiAspectEncoder",
    "Representation",
    "Side",
    "TokenizedBatch",
    "content_hash",
    "document_text",
    "document_text_with_aspects",
    "load_config",
    "load_encoder",
    "new_encoder",
    "pick_device",
    "text_for_model",
    "variant_class",
]
