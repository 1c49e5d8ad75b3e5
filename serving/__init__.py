"""What a search server runs: a serving bundle (query encoder as ONNX, the index artifact, BM25, the
catalog's filterable values) verified and loaded without torch or Beam, the search `madr search` also
answers with, and the HTTP server of `madr serve`.

Imports only `schemas` and `index_builder` (and ONNX Runtime, tokenizers, ScaNN, bm25s, pyarrow, numpy):
a serving image needs none of the training and pipeline dependencies.
"""
