"""Training jobs: `madr pretrain` and `madr train` on a dataset folder.

`pretrain` (domain pre-training) and `finetune` (fine-tuning a variant) share their flags and
resumption (`encoder_job`), the paper presets (`presets`) and the aspect vocabulary built in Beam
(`vocabulary`); `training_data` reads the training splits. The loops themselves are `model`'s.

The package imports none of its modules: a command imports the one it runs (`jobs.command_table`).
"""
