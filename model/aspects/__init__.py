"""The parts multi-aspect encoders are composed of (madral-kdd22 §4-§7, repro-ecir24 §4-§6).

Vocabularies and labels (what is predicted), extractors (where aspect embeddings
come from), heads (what they predict), fusion networks (how they become one
embedding), the tower that chains them, and the aspect losses. The names below are imported on first
use (`schemas.package_exports`): reading a vocabulary needs no torch.
"""

from __future__ import annotations

from schemas.package_exports import exported_on_use

# Each exported name and the submodule that defines it.
_EXPORTS = {
    "AspectExtractionNetwork": "model.aspects.extraction",
    "ClsAsAspects": "model.aspects.extraction",
    "ExtractedSlots": "model.aspects.extraction",
    "FirstTokens": "model.aspects.extraction",
    "MultiTokenPooling": "model.aspects.extraction",
    "Representation": "model.aspects.extraction",
    "CLS": "model.aspects.fusion",
    "OTHER": "model.aspects.fusion",
    "ClsGating": "model.aspects.fusion",
    "FusionType": "model.aspects.fusion",
    "ImplicitSlot": "model.aspects.fusion",
    "PresenceWeighting": "model.aspects.fusion",
    "WeightedSum": "model.aspects.fusion",
    "AspectPredictionHeads": "model.aspects.heads",
    "PresenceHeads": "model.aspects.heads",
    "IGNORE_INDEX": "model.aspects.labels",
    "AspectLabels": "model.aspects.labels",
    "aspect_learning_loss": "model.aspects.losses",
    "aspect_prediction_loss": "model.aspects.losses",
    "aspect_presence_loss": "model.aspects.losses",
    "pointwise_relevance_loss": "model.aspects.losses",
    "AspectTower": "model.aspects.tower",
    "TowerOutput": "model.aspects.tower",
    "UNSEEN": "model.aspects.vocabulary",
    "VOCABULARY_FILE": "model.aspects.vocabulary",
    "AspectValues": "model.aspects.vocabulary",
    "AspectVocabulary": "model.aspects.vocabulary",
    "Granularity": "model.aspects.vocabulary",
}

__getattr__, __dir__ = exported_on_use(__name__, _EXPORTS)

__all__ = sorted(_EXPORTS)
