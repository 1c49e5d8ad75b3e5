"""Beam's primitives as dask Bag operations: what `pipelines.cluster.dask_runner` runs on a cluster.

Every PCollection is one Bag of `WindowedValue`s, keyed by the PCollection itself. Beam's own
DaskRunner (2.77) keyed bags by the transform that made them, so every consumer of a multi-output
ParDo received every output; it read a bundle's output before `finish_bundle` (the last batch of
`BatchElements` and every sink's file were lost), computed only the last-built branch, translated
`Read` to nothing and collected no metrics. Here a ParDo bundle is a Bag partition run through Beam's
`DoFnRunner` whole (setup, start, every element, finish, teardown) with outputs tagged, and its metric
updates travel as one more tagged output; side inputs are computed once in the job's graph; a bounded
source is split on the driver and read bundle by bundle; GroupByKey hashes each key's deterministic
encoding (Python's own `hash` of a string differs between worker processes).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import threading
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import apache_beam as beam
import dask
import dask.bag as db
from apache_beam import coders, typehints
from apache_beam.internal import pickler
from apache_beam.io.iobase import SourceBundle
from apache_beam.metrics.execution import MetricsContainer
from apache_beam.pipeline import AppliedPTransform, PipelineVisitor
from apache_beam.pvalue import PCollection
from apache_beam.runners.common import DoFnRunner, DoFnSignature, DoFnState, Receiver
from apache_beam.runners.dask.overrides import _Create, _Flatten, _GroupByKeyOnly, _Read, _Reshuffle
from apache_beam.runners.worker import statesampler
from apache_beam.transforms.core import Windowing
from apache_beam.transforms.sideinputs import SideInputMap
from apache_beam.transforms.window import GlobalWindows
from apache_beam.utils.counters import CounterFactory
from apache_beam.utils.windowed_value import WindowedValue

# The tag of a bundle's metric updates among its outputs (Beam's output tags are strings, main is None).
METRICS_TAG = "__madr_dask_metrics__"
# Bytes of a bounded source per bundle (one Bag partition, one task).
SOURCE_BUNDLE_BYTES = 64 << 20
# Partitions per worker thread that a ParDo's input is split up to (`BagGraph._pardo`).
SPLIT_UP_TO = 4


class _TaggingReceiver(Receiver):
    def __init__(self, tag: str | None, outputs: list[tuple[str | None, Any]]) -> None:
        self.tag, self.outputs = tag, outputs

    def receive(self, windowed_value: WindowedValue) -> None:
        self.outputs.append((self.tag, windowed_value))


class _Receivers(dict):
    """Tag -> receiver, made on first use: a DoFn may emit to tags the transform did not declare."""

    def __init__(self, outputs: list[tuple[str | None, Any]]) -> None:
        super().__init__()
        self.outputs = outputs

    def __missing__(self, tag: str | None) -> _TaggingReceiver:
        self[tag] = receiver = _TaggingReceiver(tag, self.outputs)
        return receiver


@dataclass(frozen=True)
class BundleWork:
    """What every bundle of one ParDo needs, pickled once on the driver with Beam's own pickler."""

    label: str
    payload: bytes  # pickler.dumps((fn, args, kwargs, windowing))
    side_views: tuple[tuple[type, dict[str, Any]], ...]  # (view class, view options) per side input
    token: str = field(default_factory=lambda: uuid.uuid4().hex)  # this ParDo in this job


def _kept_dofns() -> dict[tuple[str, int], Any] | None:
    """This dask worker's set-up DoFns by (ParDo token, thread), or None outside a worker.

    A DoFn is kept for the worker thread's next bundles, set up once, as Beam's SDK harness keeps its
    bundle processors (a DoFn that loads a model in setup would otherwise load it for every bundle);
    `drop_dofns` tears a job's down when it ends."""
    try:
        from distributed import get_worker

        worker = get_worker()
    except (ImportError, ValueError):
        return None
    return worker.__dict__.setdefault("madr_dofns", {})


def drop_dofns(tokens: list[str], dask_worker: Any = None) -> int:
    """Tear down and forget a finished job's DoFns on one worker (`Client.run`); how many."""
    kept = dask_worker.__dict__.get("madr_dofns", {}) if dask_worker is not None else {}
    dropped = 0
    for key in [key for key in kept if key[0] in set(tokens)]:
        fn = kept.pop(key)[0]
        with contextlib.suppress(Exception):  # teardown is best effort, as in Beam
            fn.teardown()
        dropped += 1
    return dropped


def run_bundle(elements: list[WindowedValue], work: BundleWork, *side_values: list) -> list[tuple]:
    """One bundle through Beam's DoFnRunner: (tag, WindowedValue) outputs, then (METRICS_TAG, updates).

    An empty partition runs nothing: Beam never starts a bundle without elements, and a sink's DoFn would
    otherwise open (and write) an empty file for it."""
    if not elements:
        return []
    kept, key = _kept_dofns(), (work.token, threading.get_ident())
    new = kept is None or key not in kept
    fn, args, kwargs, windowing = pickler.loads(work.payload) if new else kept[key]
    outputs: list[tuple[str | None, Any]] = []
    side_inputs = [
        SideInputMap(view, options, values)
        for (view, options), values in zip(work.side_views, side_values, strict=True)
    ]
    container = MetricsContainer(work.label)
    sampler = statesampler.StateSampler(work.label, CounterFactory())
    statesampler.set_current_tracker(sampler)  # Metrics.counter(...).inc() finds the container through it
    try:
        with sampler.scoped_state(work.label, "process", metrics_container=container):
            runner = DoFnRunner(
                fn,
                args,
                kwargs,
                side_inputs,
                windowing,
                tagged_receivers=_Receivers(outputs),
                step_name=work.label,
                state=DoFnState(CounterFactory()),
            )
            if new:
                runner.setup()
                if kept is not None:  # kept only once its setup succeeded
                    kept[key] = (fn, args, kwargs, windowing)
            runner.start()
            for element in elements:
                runner.process(element)
            runner.finish()  # after it, not before: finish_bundle's outputs belong to the bundle
            if kept is None:  # not in a worker: nothing outlives the bundle
                runner.teardown()
    finally:
        statesampler.set_current_tracker(None)
    outputs.append((METRICS_TAG, container.get_cumulative()))
    return outputs


def _tagged(tag: str | None, output: tuple) -> bool:
    return output[0] == tag


def _second(pair: tuple) -> Any:
    return pair[1]


def concatenated(partitions: list[list[Any]]) -> list[Any]:
    return [value for partition in partitions for value in partition]


def _read_bundles(bundles: Iterable[SourceBundle]) -> list[WindowedValue]:
    values = []
    for bundle in bundles:
        tracker = bundle.source.get_range_tracker(bundle.start_position, bundle.stop_position)
        values.extend(GlobalWindows.windowed_value(item) for item in bundle.source.read(tracker))
    return values


def _bucketed(coder: coders.Coder, buckets: int, element: WindowedValue) -> tuple[int, bytes, Any]:
    key, value = element.value
    encoded = coder.encode(key)
    bucket = int.from_bytes(hashlib.blake2b(encoded, digest_size=8).digest(), "big") % buckets
    return bucket, encoded, (key, value)


def _grouped(groups: Iterable[tuple[int, list[tuple[int, bytes, Any]]]]) -> list[WindowedValue]:
    """(bucket, entries) groups -> one (key, values) WindowedValue per key, keys told apart by encoding."""
    by_key: dict[bytes, tuple[Any, list]] = {}
    for _, entries in groups:
        for _, encoded, (key, value) in entries:
            by_key.setdefault(encoded, (key, []))[1].append(value)
    return [GlobalWindows.windowed_value(pair) for pair in by_key.values()]


def _key_coder(pcoll: PCollection, label: str) -> coders.Coder:
    try:
        key_type = typehints.trivial_inference.key_value_types(pcoll.element_type)[0]
    except (TypeError, ValueError, AttributeError):
        key_type = typehints.Any
    return coders.registry.get_coder(key_type).as_deterministic_coder(label)


def _windowing(pcoll: PCollection) -> Windowing:
    """The PCollection's windowing; global for the output of Beam's `_Read` override, which cannot say
    (its input is the pipeline's start, which has none)."""
    try:
        return pcoll.windowing
    except AttributeError:
        return Windowing(GlobalWindows())


class BagGraph(PipelineVisitor):
    """Visits a pipeline's leaf transforms in order and builds the Bag of each PCollection.

    `targets()` is what the client computes: every PCollection no transform reads, reduced to its
    element count (so sinks run and no data travels to the client), and every ParDo's metric updates.
    """

    def __init__(self, parallelism: int) -> None:
        self.parallelism = max(1, parallelism)
        self.bags: dict[PCollection, db.Bag] = {}
        self.read: set[PCollection] = set()
        self.metrics: list[db.Bag] = []
        self.tokens: list[str] = []  # each ParDo's, for `drop_dofns` when the job ends

    def visit_transform(self, applied: AppliedPTransform) -> None:
        transform = applied.transform
        main_inputs = [pcoll for pcoll in applied.main_inputs.values() if isinstance(pcoll, PCollection)]
        inputs = [self.bags[pcoll] for pcoll in main_inputs]
        self.read.update(main_inputs)
        self.read.update(view.pvalue for view in applied.side_inputs)
        if isinstance(transform, beam.ParDo):
            self._pardo(applied, inputs[0])
            return
        if isinstance(transform, _Create):
            values = [GlobalWindows.windowed_value(value) for value in transform.values]
            bag = db.from_sequence(values, npartitions=max(1, min(len(values), self.parallelism)))
        elif isinstance(transform, beam.Impulse):
            bag = db.from_sequence([GlobalWindows.windowed_value(b"")], npartitions=1)
        elif isinstance(transform, _Read):
            bundles = list(transform.source.split(SOURCE_BUNDLE_BYTES))
            bag = db.from_sequence(bundles, npartitions=max(1, len(bundles))).map_partitions(_read_bundles)
        elif isinstance(transform, _GroupByKeyOnly):
            coder = _key_coder(next(iter(applied.main_inputs.values())), applied.full_label)
            buckets = self.parallelism
            keyed = inputs[0].map(functools.partial(_bucketed, coder, buckets))
            bag = keyed.groupby(lambda entry: entry[0], npartitions=buckets, shuffle="tasks").map_partitions(
                _grouped
            )
        elif isinstance(transform, _Flatten):
            bag = db.concat(inputs) if inputs else db.from_sequence([], npartitions=1)
        elif isinstance(transform, _Reshuffle):
            bag = inputs[0].repartition(npartitions=max(inputs[0].npartitions, self.parallelism))
        else:
            raise NotImplementedError(
                f"{applied.full_label}: {type(transform).__name__} has no translation on the Dask runner"
            )
        for pcoll in applied.outputs.values():
            self.bags[pcoll] = bag

    def _pardo(self, applied: AppliedPTransform, main: db.Bag) -> None:
        transform = applied.transform
        signature = DoFnSignature(transform.fn)
        if signature.is_stateful_dofn() or signature.is_splittable_dofn():
            raise NotImplementedError(
                f"{applied.full_label}: stateful and splittable DoFns do not run on the Dask runner"
            )
        windowing = _windowing(next(iter(applied.main_inputs.values())))
        work = BundleWork(
            applied.full_label,
            pickler.dumps((transform.fn, transform.args, transform.kwargs, windowing)),
            tuple((type(view), view._view_options()) for view in applied.side_inputs),
        )
        self.tokens.append(work.token)
        if main.npartitions < SPLIT_UP_TO * self.parallelism:
            # A bundle is one partition, run by one worker thread. The embed stage's plan fans one element
            # out to the whole catalog, so every product sat in one partition and one worker encoded all of
            # them (0.36x the local runner on 2 workers). Any split of a bundle's elements is a valid
            # bundling (dask's graph is fixed before it runs, so this is no dynamic rebalancing): each
            # partition is cut in k equal pieces (a multiple of the count: dask would put the remainder
            # in the last), up to `parallelism` pieces and SPLIT_UP_TO partitions per worker thread.
            pieces = min(self.parallelism, -(-SPLIT_UP_TO * self.parallelism // main.npartitions))
            if pieces > 1:
                main = main.repartition(npartitions=main.npartitions * pieces)
        # Each side input once, inside the job's graph: one task (a pure key: every reader shares it)
        # over the bag's own partition keys. `dask.delayed(list)(bag)` optimised the bag into new keys per
        # reader, so a sink's InitializeWrite ran once per reader, each with its own temporary folder,
        # and a finalize ran twice, the second deleting the first's files (4,000 rows written, 0 kept).
        sides = [
            dask.delayed(concatenated, pure=True)(self.bags[view.pvalue].to_delayed(optimize_graph=False))
            for view in applied.side_inputs
        ]
        bundles = main.map_partitions(run_bundle, work, *sides)
        for tag, pcoll in applied.outputs.items():
            self.bags[pcoll] = bundles.filter(functools.partial(_tagged, tag)).map(_second)
        self.metrics.append(bundles.filter(functools.partial(_tagged, METRICS_TAG)).map(_second))

    def targets(self) -> list[Any]:
        unread = [bag for pcoll, bag in self.bags.items() if pcoll not in self.read]
        return [bag.count() for bag in unread] + self.metrics
