"""Fine-tuning: losses, settings and the training loop shared by every variant."""

from model.training.config import QueryExamples, TrainingConfig
from model.training.losses import in_batch_softmax_loss
from model.training.trainer import Trainer, TrainingReport

__all__ = ["QueryExamples", "Trainer", "TrainingConfig", "TrainingReport", "in_batch_softmax_loss"]
