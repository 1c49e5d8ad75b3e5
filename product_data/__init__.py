"""Product datasets: the seeded synthetic benchmark and the ESCI, WANDS and generic loaders.

Each writes a dataset folder (products/, queries.parquet, judgments.parquet, manifest.json) that
every stage reads. Pure Python, pyarrow and NumPy: no Beam, no model; depends on `schemas` only.
Not named `datasets`: that is Hugging Face's package, which transformers looks for by name.
"""
