"""The evaluate stage on Beam, and the evaluations built on it.

`stage` is `madr evaluate` (embed queries, join judgments, search and score each searcher's
batches in `transforms`, with the searchers of `searchers` timed by `calibration`); `report`
combines its per-query rows on the driver. `annotation_quality` and `judged_ranking` score the
aspect annotations and judged re-rankings, `sparse` the inverted indexes of UHD-BERT. The metrics
themselves are the Beam-free `evaluation` package.

The package imports none of its modules: a command imports the one it runs (`jobs.command_table`).
"""
