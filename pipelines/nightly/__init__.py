"""What the nightly job decides between its stages, apart from running them (`jobs.nightly` does that):
whether tonight's catalog is the one a run folder is for (`inputs`), whether a run may be published
(`publish_guard`: the catalog's size; `quality_guard`: retrieval against last night and zero-shot), and
how LATEST is replaced (`latest`)."""
