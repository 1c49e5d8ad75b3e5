"""Pre-training and fine-tuning: losses, settings and the training loops shared by every variant."""

from model.ranking_losses import in_batch_softmax_loss
from model.training.config import QueryExamples, TrainingConfig
from model.training.pretrain import (
    Pretrainer,
    PretrainingConfig,
    PretrainingRecord,
    PretrainingReport,
    StepLosses,
)
from model.training.trainer import Trainer, TrainingReport

__all__ = [
    "Pretrainer",
    "PretrainingConfig",
    "PretrainingRecord",
    "PretrainingReport",
    "QueryExamples",
    "StepLosses",
    "Trainer",
    "TrainingConfig",
    "TrainingReport",
    "in_batch_softmax_loss",
]
