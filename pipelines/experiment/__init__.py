"""The parts of `madr experiment` that are not its driver (`jobs.experiment` runs the stages; its config
and flags are `jobs.experiment_config`, which holds the generator's settings): each variant's training
settings (`variant`), the pre-training the variants share (`pretraining`), and the archive of seeds kept
across sessions (`runs`)."""
