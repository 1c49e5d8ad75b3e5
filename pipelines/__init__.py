"""madr's Beam stages and their shared plumbing.

One subpackage per stage family: `embed` (embed, enrich, export), `index` (ScaNN, partitioned and
inverted index builds), `evaluate` (the evaluate stage and the evaluations built on it) and `train`
(pre-training and fine-tuning); the modules at this level are what they share (options, catalog
reading, inference, artifacts, verification). The commands that drive them are the `jobs` package.

Importing this package first checks that `schemas`, `model`, `index_builder`, `product_data` and
`evaluation` are madr's own (`pipelines.installation`).
"""

from pipelines.installation import check_sibling_packages

check_sibling_packages()
