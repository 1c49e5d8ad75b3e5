"""Training jobs: `madr pretrain` and `madr train` on a dataset folder.

`pretrain` (domain pre-training) and `finetune` (fine-tuning a variant) share their flags and
resumption (`encoder_job`), the paper presets (`presets`) and the aspect vocabulary built in Beam
(`vocabulary`); `training_data` reads the training splits. The loops themselves are `model`'s.
"""

from pipelines.train.finetune import TrainJob, add_train_arguments, run_training, train_from_args
from pipelines.train.pretrain import PretrainJob, add_pretrain_arguments, pretrain_from_args, run_pretraining

__all__ = [
    "PretrainJob",
    "TrainJob",
    "add_pretrain_arguments",
    "add_train_arguments",
    "pretrain_from_args",
    "run_pretraining",
    "run_training",
    "train_from_args",
]
