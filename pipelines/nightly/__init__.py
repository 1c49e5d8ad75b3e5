"""The nightly job: its config (`job`: the job's settings and each stage's config) and its run (`run`:
embed, index, evaluate, publish), and what it decides between its stages: whether tonight's catalog
is the one a run folder is for (`inputs`), whether a run may be published (`publish_guard`: the
catalog's size; `quality_guard`: retrieval against last night and zero-shot), and how LATEST is
replaced (`latest`). `madr nightly`'s flags are `NightlyJob`'s fields (`job`)."""
