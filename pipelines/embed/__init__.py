"""The embed stage on Beam, and the stages that read what it writes.

`stage` is `madr embed` (catalog Parquet -> embeddings and aspect annotations as Parquet shards);
`incremental`, `dedupe` and `key_index` plan which rows to embed and which to reuse from the
previous run. `enrich` (`madr enrich`) fills the catalog's aspect gaps from the annotations and
`export` (`madr export-vertex`) writes Vertex AI Vector Search input files from the embeddings.

The package imports none of its modules: a command imports the one it runs (`jobs.command_table`).
"""
