"""An encoder run by ONNX Runtime: `madr embed --precision int8` (and fp32 through ONNX Runtime).

The encoder is exported once per (weights, side, precision) to ONNX; int8 is ONNX Runtime's
dynamic quantisation of that graph (weights int8, activations quantised per batch), all but the
first layer's feed-forward output projection (`nodes_kept_in_fp32` says why).

Exports are cached in `cache_root()/<sha256 of model.safetensors>/` (`$MADR_CACHE` or
~/.cache/madr), not inside the model folder: that folder is sealed by its manifest
(pipelines.storage.verify refuses unlisted files), and keying the cache by the weights' checksum means a
retrained model can never pick up a stale graph. Each graph has a sidecar JSON that records its
own sha256, checked before every load; a graph whose bytes do not match is exported again.
Files are written under a temporary name and renamed, so two workers exporting at once are safe.

`OnnxRuntimeEncoder` answers a `TokenizedBatch` with an `EncoderOutput` holding everything
`model.annotations.annotate` reads (embedding, aspect logits, presence logits, fusion weights),
so the inference handler treats it like the torch encoder.
"""

from __future__ import annotations

import contextlib
import copy
import json
import logging
import os
import tempfile
import warnings
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn
from transformers import PreTrainedModel

from model.batch import EncoderOutput, Side, TokenizedBatch
from model.encoder import DenseEncoder
from model.weights_file import WEIGHTS_FILE
from schemas.manifest import sha256_file

ONNX_PRECISIONS = ("fp32", "int8")
OPSET = 17
# Version 2: attention exported as its plain operations (eager), not torch's fused attention call.
SIDECAR_FORMAT = "madr-onnx-graph-2"


def cache_root() -> Path:
    """Where exported graphs are kept: $MADR_CACHE, else ~/.cache/madr."""
    return Path(os.environ.get("MADR_CACHE") or Path.home() / ".cache" / "madr")


@dataclass(frozen=True)
class GraphLayout:
    """What the exported graph's outputs are, in order, so they can be put back into an EncoderOutput."""

    aspects: tuple[str, ...]  # one aspect-logits output per name, after the embedding
    presence: bool  # then presence logits, if the encoder has them
    fusion_slots: tuple[str, ...]  # then fusion weights, if any slot is fused
    min_length: int  # the shortest token sequence the encoder reads (first-k readers pad to it)

    @classmethod
    def of(cls, output: EncoderOutput, min_length: int) -> GraphLayout:
        fused = output.fusion_slots if output.fusion_weights is not None else ()
        return cls(tuple(output.aspect_logits), output.presence_logits is not None, tuple(fused), min_length)

    @property
    def output_names(self) -> list[str]:
        names = ["embedding", *(f"aspect_logits.{aspect}" for aspect in self.aspects)]
        return (
            names
            + (["presence_logits"] if self.presence else [])
            + (["fusion_weights"] if self.fusion_slots else [])
        )

    def encoder_output(self, arrays: list[np.ndarray]) -> EncoderOutput:
        tensors = iter(torch.from_numpy(array) for array in arrays)
        embedding = next(tensors)
        aspect_logits = {aspect: next(tensors) for aspect in self.aspects}
        presence = next(tensors) if self.presence else None
        weights = next(tensors) if self.fusion_slots else None
        return EncoderOutput(
            embedding=embedding,
            aspect_logits=aspect_logits,
            presence_logits=presence,
            fusion_weights=weights,
            fusion_slots=self.fusion_slots,
        )


class _FlatOutputs(nn.Module):
    """One side of an encoder as (input_ids, attention_mask) -> a flat tuple of tensors, for export."""

    def __init__(self, encoder: DenseEncoder, side: Side, layout: GraphLayout) -> None:
        super().__init__()
        self.encoder, self.side, self.layout = encoder, side, layout

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> tuple[torch.Tensor, ...]:
        output = self.encoder(TokenizedBatch(input_ids, attention_mask), self.side)
        flat = [output.embedding, *(output.aspect_logits[aspect] for aspect in self.layout.aspects)]
        if self.layout.presence:
            flat.append(output.presence_logits)
        if self.layout.fusion_slots:
            flat.append(output.fusion_weights)
        return tuple(flat)


def minimum_length(encoder: DenseEncoder, side: Side) -> int:
    tower = getattr(encoder, "aspect_tower", None)
    return int(tower(side).min_length) if callable(tower) else 1


def _write_atomically(target: Path, write: Any) -> None:
    handle, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
    os.close(handle)
    try:
        write(Path(temporary))
        os.replace(temporary, target)
    finally:
        if os.path.exists(temporary):
            os.unlink(temporary)


def export_graph(encoder: DenseEncoder, tokenizer: Any, side: Side, target: Path) -> GraphLayout:
    """Export one side of `encoder` (eval mode, on the CPU) to `target` as an fp32 ONNX graph."""
    sample = encoder.tokenize(tokenizer, ["red running shoes for men", "a mug"], side)
    encoder = copy.deepcopy(encoder).cpu().eval()
    for module in encoder.modules():
        # torch's fused attention (sdpa) traces into a graph ONNX Runtime runs about 8 % slower than the
        # plain softmax(QK^T)V it is equal to (1e-7): 10.5 against 9.6 ms a text, batches of 32 x 64
        # tokens, the demo MtBERT, 2 AVX2 cores, 29 Nov. The copy keeps the caller's model as it was.
        if isinstance(module, PreTrainedModel):
            module.set_attn_implementation("eager")
    with torch.inference_mode():
        layout = GraphLayout.of(encoder(sample, side), minimum_length(encoder, side))
    graph = _FlatOutputs(encoder, side, layout).eval()
    batch_axes = {name: {0: "batch"} for name in layout.output_names}
    sequence_axes = {name: {0: "batch", 1: "tokens"} for name in ("input_ids", "attention_mask")}

    def write(path: Path) -> None:
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")  # the tracer's notes on Python branches it fixed
            torch.onnx.export(
                graph,
                (sample.input_ids, sample.attention_mask),
                str(path),
                input_names=["input_ids", "attention_mask"],
                output_names=layout.output_names,
                dynamic_axes={**sequence_axes, **batch_axes},
                opset_version=OPSET,
                dynamo=False,
            )

    _write_atomically(target, write)
    return layout


def nodes_kept_in_fp32(graph: Path) -> list[str]:
    """The MatMuls int8 leaves in fp32: the first layer's feed-forward output projection, and the
    last layer's projections when `model.leading_positions` computed them.

    A feed-forward output projection reads the GELU output, whose range per batch is wide and
    skewed; quantised per tensor it costs accuracy, most of all in the first layer. On the demo
    MtBERT (600 products): every MatMul quantised gave a mean cosine of 0.963 to fp32; the first
    layer's kept in fp32, 0.980; every layer's, 0.995 but 25 % slower. Through `madr embed` and
    `madr evaluate` on the demo benchmark, the first-layer choice kept Recall@100 at 0.922 (fp32
    0.920) and held-out annotation Accuracy@1 within one point (category 0.902 against 0.909),
    at 1.9x the fp32 speed. Per-channel weights gave the same accuracy at half the speed.

    The last layer's projections are not scoped under its name in the graph (the leading-positions
    forward pass calls them directly); they run on a few positions only, so fp32 costs nothing there.
    """
    import onnx

    nodes = onnx.load(str(graph), load_external_data=False).graph.node
    return [
        node.name
        for node in nodes
        if node.op_type == "MatMul"
        and "/output/dense" in node.name
        and "/attention/" not in node.name
        and ("/layer." not in node.name or "/layer.0/" in node.name)
    ]


class _PreprocessingAdvice(logging.Filter):
    """The quantiser's advice to pre-process first, logged on the root logger at every run: for a
    graph ONNX Runtime optimises when it loads it, the advice does not apply."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "pre-processing before quantization" not in record.getMessage()


@contextlib.contextmanager
def _quiet_quantizer() -> Iterator[None]:
    advice = _PreprocessingAdvice()
    logging.getLogger().addFilter(advice)
    try:
        yield
    finally:
        logging.getLogger().removeFilter(advice)


def quantize_graph(source: Path, target: Path, reduce_range: bool = False) -> None:
    """ONNX Runtime's dynamic int8 quantisation: int8 weights, activations quantised per batch.

    `reduce_range` keeps weights to 7 bits, ONNX Runtime's advice for x86 CPUs without VNNI, whose AVX2
    u8 x s8 kernel (vpmaddubsw) can saturate its int16 sums on full-range weights. madr does not take it:
    on a 2-core AMD EPYC without VNNI (28 Nov) the demo MtBERT's int8 document embeddings kept a mean
    cosine of 0.983 to fp32 (lowest 0.968, 64 titles) with full-range weights and only 0.944 with 7-bit
    ones. A tiny random BERT is another matter: its full-range product saturates (cosine 0.72 there,
    0.9997 at 7 bits), which is what the tests check the option with.
    """
    from onnxruntime.quantization import QuantType, quantize_dynamic

    excluded = nodes_kept_in_fp32(source)
    with _quiet_quantizer():
        _write_atomically(
            target,
            lambda path: quantize_dynamic(
                str(source),
                str(path),
                weight_type=QuantType.QInt8,
                nodes_to_exclude=excluded,
                reduce_range=reduce_range,
            ),
        )


def cached_graph(
    model_dir: str | Path, encoder: DenseEncoder, tokenizer: Any, side: Side, precision: str
) -> tuple[Path, GraphLayout]:
    """The ONNX graph of `model_dir`'s `side` at `precision`, exported (and quantised) on first use."""
    if precision not in ONNX_PRECISIONS:
        raise ValueError(f"ONNX Runtime precision must be one of {ONNX_PRECISIONS}, got {precision!r}")
    weights = sha256_file(Path(model_dir) / WEIGHTS_FILE)
    folder = cache_root() / "onnx" / weights[:32]
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as error:  # read-only, full, or not a folder: this process exports into its own
        private = Path(tempfile.mkdtemp(prefix="madr-onnx-")) / weights[:32]
        private.mkdir()
        warnings.warn(
            f"ONNX cache {folder} is not writable ({error}); using {private} for this run", stacklevel=2
        )
        folder = private
    name = f"{Side(side).value}-{precision}"
    graph, sidecar = folder / f"{name}.onnx", folder / f"{name}.json"
    cached = _read_sidecar(graph, sidecar, weights)
    if cached is not None:
        return graph, cached
    if precision == "int8":
        fp32_graph, layout = cached_graph(model_dir, encoder, tokenizer, side, "fp32")
        quantize_graph(fp32_graph, graph)
    else:
        layout = export_graph(encoder, tokenizer, side, graph)
    record = {
        "format": SIDECAR_FORMAT,
        "source_sha256": weights,
        "sha256": sha256_file(graph),
        "layout": asdict(layout),
    }
    _write_atomically(sidecar, lambda path: path.write_text(json.dumps(record, indent=1)))
    return graph, layout


def _read_sidecar(graph: Path, sidecar: Path, weights: str) -> GraphLayout | None:
    """The layout of a cached graph whose bytes and source still match, else None (export again)."""
    if not (graph.is_file() and sidecar.is_file()):
        return None
    try:
        record = json.loads(sidecar.read_text())
    except json.JSONDecodeError:
        return None
    if record.get("format") != SIDECAR_FORMAT or record.get("source_sha256") != weights:
        return None
    if record.get("sha256") != sha256_file(graph):
        warnings.warn(f"{graph}: sha256 does not match its sidecar; exporting it again", stacklevel=2)
        return None
    layout = record["layout"]
    return GraphLayout(
        tuple(layout["aspects"]),
        bool(layout["presence"]),
        tuple(layout["fusion_slots"]),
        int(layout["min_length"]),
    )


# Texts a loaded graph encodes beside the torch model before it is trusted (`probe_mismatch`).
PROBE_TEXTS = (
    "red merino wool hiking socks, size large",
    "stainless steel espresso machine with milk frother",
)
# Least cosine between the graph's and torch's embedding of each probe text: fp32 graphs agree to about
# 1e-6; int8 ones lose a little to quantisation (0.95 or more on a tiny random model, see the tests).
PROBE_MIN_COSINE = {"fp32": 0.9999, "int8": 0.95}


def probe_mismatch(
    encoder: DenseEncoder, tokenizer: Any, run: OnnxRuntimeEncoder, side: Side, precision: str
) -> float | None:
    """The least cosine between `run`'s and the torch `encoder`'s embeddings of `PROBE_TEXTS` when it is
    too low for `run` to be this model's graph; None when the graph matches. A graph in the cache is
    keyed by the weights' sha256, but the cache is writable: this ties the graph to the weights that
    were verified, whatever its sidecar says."""
    batch = encoder.tokenize(tokenizer, list(PROBE_TEXTS), side)
    with torch.inference_mode():
        expected = encoder(batch, side).embedding.float()
    actual = run(batch, side).embedding.float()
    cosine = float((expected * actual).sum(-1).min())
    return None if cosine >= PROBE_MIN_COSINE[precision] else cosine


class OnnxRuntimeEncoder:
    """One side of an encoder run by ONNX Runtime on the CPU; called like `DenseEncoder` for inference.

    `graph` is a path or the graph's bytes: the loader passes the bytes it read once, so the session
    runs exactly what was checked.
    """

    def __init__(
        self,
        graph: Path | bytes,
        layout: GraphLayout,
        side: Side,
        pad_token_id: int = 0,
        threads: int | None = None,
    ) -> None:
        import onnxruntime

        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = threads or torch.get_num_threads()
        options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
        # Between batches the worker annotates, writes and reads on the same cores; ONNX Runtime's
        # threads would otherwise spin on them after each run, and the Python work waits for a core.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        source = graph if isinstance(graph, bytes) else str(graph)
        self.session = onnxruntime.InferenceSession(source, options, providers=["CPUExecutionProvider"])
        self.layout, self.side, self.pad_token_id = layout, Side(side), pad_token_id

    def __call__(self, batch: TokenizedBatch, side: Side) -> EncoderOutput:
        if Side(side) is not self.side:
            raise ValueError(f"this ONNX graph encodes the {self.side.value} side, not {Side(side).value}")
        batch = batch.padded_to(self.layout.min_length, self.pad_token_id)
        feed = {"input_ids": batch.input_ids.numpy(), "attention_mask": batch.attention_mask.numpy()}
        return self.layout.encoder_output(self.session.run(None, feed))
