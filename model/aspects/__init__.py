"""The parts multi-aspect encoders are composed of (madral-kdd22 §4-§7, repro-ecir24 §4-§6).

Vocabularies and labels (what is predicted), extractors (where aspect embeddings
come from), heads (what they predict), fusion networks (how they become one
embedding), the tower that chains them, and the aspect losses. The names below are imported on first
use (`schemas.package_exports`): reading a vocabulary needs no torch.
"""

from __future__ import annotations

from schemas.package_exports import exported_on_use

# Each submodule and the names the package exports from it.
_EXPORTS = {
    "extraction": (
        "AspectExtractionNetwork",
        "ClsAsAspects",
        "ExtractedSlots",
        "FirstTokens",
        "MultiTokenPooling",
        "Representation",
    ),
    "fusion": ("CLS", "OTHER", "ClsGating", "FusionType", "ImplicitSlot", "PresenceWeighting", "WeightedSum"),
    "heads": ("AspectPredictionHeads", "PresenceHeads"),
    "labels": ("IGNORE_INDEX", "AspectLabels"),
    "losses": (
        "aspect_learning_loss",
        "aspect_prediction_loss",
        "aspect_presence_loss",
        "pointwise_relevance_loss",
    ),
    "tower": ("AspectTower", "TowerOutput"),
    "vocabulary": ("UNSEEN", "VOCABULARY_FILE", "AspectValues", "AspectVocabulary", "Granularity"),
}

__getattr__, __dir__, __all__ = exported_on_use(__name__, _EXPORTS)
