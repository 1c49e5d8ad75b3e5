"""A query in words to its vector with ONNX Runtime and the Rust tokenizer alone: no torch, no transformers.

The bundle's graph is the query side of the model exported to ONNX (`model.onnx_runtime.export_graph`, the
graph `madr embed --runtime onnxruntime` runs), and its tokenizer the model's own Rust tokenizer
(`tokenizer.json`). Texts are tokenized as `model.batch_tokenizer.BatchTokenizer` does (truncated to the
model's query length, special tokens included, padded on the right), then padded to the graph's shortest
input (`min_length`, for encoders that read the first k positions), so the vector is the one `madr search`
encodes, to float32 rounding.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from schemas.token_batches import right_padded


@dataclass(frozen=True)
class QueryEncoderSpec:
    """How the bundle's graph reads its input: as `serving.bundle` records it in the manifest."""

    graph: str  # file in the bundle
    tokenizer: str  # file in the bundle
    precision: str  # fp32 or int8 (ONNX Runtime's dynamic quantisation)
    max_length: int  # wordpieces, special tokens included
    min_length: int  # the graph's shortest input
    pad_id: int
    dimension: int

    def to_dict(self) -> dict[str, object]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, object]) -> QueryEncoderSpec:
        """The spec a manifest records (its other keys, such as the precision's reason, left out)."""
        kinds = {"int": int, "str": str}
        return cls(**{f.name: kinds[str(f.type)](data[f.name]) for f in dataclasses.fields(cls)})


class OnnxQueryEncoder:
    """Queries to unit-length float32 vectors (one row each) with the bundle's graph and tokenizer.

    `graph` and `tokenizer_json` are the bytes the bundle's manifest vouched for, read once: the session
    runs what was checked. `threads`: ONNX Runtime's intra-op threads for one call.
    """

    def __init__(self, spec: QueryEncoderSpec, graph: bytes, tokenizer_json: str, threads: int = 1) -> None:
        import onnxruntime
        from tokenizers import Tokenizer

        self.spec = spec
        self.tokenizer = Tokenizer.from_str(tokenizer_json)
        self.tokenizer.no_padding()
        self.tokenizer.enable_truncation(spec.max_length)
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
        # A server's requests come one after another on a few threads each: a session that spins between
        # runs holds a core the next request's tokenizing and search need.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self.session = onnxruntime.InferenceSession(graph, options, providers=["CPUExecutionProvider"])

    def tokenize(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """(input_ids, attention_mask), int64, padded on the right to the longest text (at least
        `min_length`)."""
        ids = [encoding.ids for encoding in self.tokenizer.encode_batch_fast(list(texts))]
        return right_padded(ids, self.spec.pad_id, self.spec.min_length)

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """(len(texts), dimension) float32, each row of unit length."""
        input_ids, attention_mask = self.tokenize(texts)
        (embedding,) = self.session.run(
            ["embedding"], {"input_ids": input_ids, "attention_mask": attention_mask}
        )
        # The graph normalises, as the model's forward does: renormalising here would move the last bit and
        # reorder products tied to it, away from what `madr search` ranks.
        return np.asarray(embedding, dtype=np.float32)
