"""madr's Beam stages and their shared plumbing.

One subpackage per stage family: `embed` (embed, enrich, export), `index` (ScaNN, partitioned and
inverted index builds), `evaluate` (the evaluate stage and the evaluations built on it) and `train`
(pre-training and fine-tuning), `nightly`, `report`, `experiment` and `cluster` (Beam on Dask). What
they share: `settings` (every command's settings and the flags generated from them), `storage` (where
stages write and what vouches for it), `io` (records in and out), `serve` (`madr search`, the serving
bundle), and at this level inference, the runner and progress. The commands that drive them are the
`jobs` package.

Importing this package first checks that `schemas`, `model`, `index_builder`, `product_data` and
`evaluation` are madr's own (`pipelines.installation`).
"""

from pipelines.installation import check_sibling_packages

check_sibling_packages()
