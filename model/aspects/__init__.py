"""The parts multi-aspect encoders are composed of (madral-kdd22 §4-§7, repro-ecir24 §4-§6).

Vocabularies and labels (what is predicted), extractors (where aspect embeddings
come from), heads (what they predict), fusion networks (how they become one
embedding), the tower that chains them, and the aspect losses.
"""

from model.aspects.extraction import (
    AspectExtractionNetwork,
    ClsAsAspects,
    ExtractedSlots,
    FirstTokens,
    MultiTokenPooling,
    Representation,
)
from model.aspects.fusion import (
    CLS,
    OTHER,
    ClsGating,
    FusionType,
    ImplicitSlot,
    PresenceWeighting,
    WeightedSum,
)
from model.aspects.heads import AspectPredictionHeads, PresenceHeads
from model.aspects.labels import IGNORE_INDEX, AspectLabels
from model.aspects.losses import (
    aspect_learning_loss,
    aspect_prediction_loss,
    aspect_presence_loss,
    pointwise_relevance_loss,
)
from model.aspects.tower import AspectTower, TowerOutput
from model.aspects.vocabulary import UNSEEN, VOCABULARY_FILE, AspectValues, AspectVocabulary, Granularity

__all__ = [
    "CLS",
    "IGNORE_INDEX",
    "OTHER",
    "UNSEEN",
    "VOCABULARY_FILE",
    "AspectExtractionNetwork",
    "AspectLabels",
    "AspectPredictionHeads",
    "AspectTower",
    "AspectValues",
    "AspectVocabulary",
    "ClsAsAspects",
    "ClsGating",
    "ExtractedSlots",
    "FirstTokens",
    "FusionType",
    "Granularity",
    "ImplicitSlot",
    "MultiTokenPooling",
    "PresenceHeads",
    "PresenceWeighting",
    "Representation",
    "TowerOutput",
    "WeightedSum",
    "aspect_learning_loss",
    "aspect_prediction_loss",
    "aspect_presence_loss",
    "pointwise_relevance_loss",
]
