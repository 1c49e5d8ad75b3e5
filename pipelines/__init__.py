"""madr's Beam pipelines, commands and drivers.

Importing this package first checks that `schemas`, `model` and `index_builder` are madr's own
(`pipelines.installation`).
"""

from pipelines.installation import check_sibling_packages

check_sibling_packages()
