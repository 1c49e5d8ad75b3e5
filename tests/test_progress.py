"""Progress lines: at most one per interval, with the count, the rate and an ETA when the total is known."""

from __future__ import annotations

from pipelines.progress import ProgressLog, format_duration


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_one_line_per_interval_with_rate_and_eta() -> None:
    clock, lines = FakeClock(), []
    progress = ProgressLog("document texts encoded", total=1000, interval_s=10, clock=clock, log=lines.append)
    clock.now += 4
    progress.add(100)
    assert lines == []  # too early
    clock.now += 6
    progress.add(100)  # 200 in 10 s: 20/s, 800 left: 40 s
    assert lines == ["document texts encoded: 200 of 1,000 (20.0/s, ETA 0m40s)"]
    clock.now += 1
    progress.add(10)
    assert len(lines) == 1


def test_without_a_total_there_is_no_eta() -> None:
    clock, lines = FakeClock(), []
    progress = ProgressLog("texts", interval_s=0, clock=clock, log=lines.append)
    clock.now += 2
    progress.add(3000)
    assert lines == ["texts: 3,000 (1,500.0/s)"]


def test_durations() -> None:
    assert format_duration(59.6) == "1m00s"
    assert format_duration(3725) == "1h02m"


def test_slow_work_reads_per_minute_or_hour() -> None:
    clock, lines = FakeClock(), []
    progress = ProgressLog("variants done", total=4, interval_s=0, clock=clock, log=lines.append)
    clock.now += 600
    progress.add(1)  # one per 10 minutes: 6/h, 30 minutes to go
    clock.now += 1
    assert lines == ["variants done: 1 of 4 (6.0/h, ETA 30m00s)"]
    fast = ProgressLog("texts", interval_s=0, clock=clock, log=lines.append)
    clock.now += 30
    fast.add(2)
    assert lines[-1] == "texts: 2 (4.0/min)"


def test_skipped_work_leaves_the_total_and_does_not_pace_the_eta() -> None:
    clock, lines = FakeClock(), []
    progress = ProgressLog("runs done", total=5, interval_s=0, clock=clock, log=lines.append)
    progress.skip(2)  # found finished: no time spent, so not counted as done at this rate
    clock.now += 600
    progress.add(1)  # one per 10 minutes, 2 of the 3 left: 20 minutes
    assert lines == ["runs done: 1 of 3 (6.0/h, ETA 20m00s)"]


def test_a_detail_ends_the_line_and_an_empty_one_adds_nothing() -> None:
    clock, lines, detail = FakeClock(), [], ["the model ran 40% of the time"]
    progress = ProgressLog("texts", interval_s=0, clock=clock, log=lines.append, detail=lambda: detail[0])
    clock.now += 1
    progress.add(10)
    detail[0] = ""
    clock.now += 1
    progress.add(10)
    assert lines == ["texts: 10 (10.0/s); the model ran 40% of the time", "texts: 20 (10.0/s)"]


def test_the_embed_handler_says_how_much_of_the_time_the_model_ran(tiny_model_dir) -> None:
    from model import Side
    from pipelines.embed.batches import ProductBatch, ProductBatchHandler
    from pipelines.settings.options import ModelSettings

    handler = ProductBatchHandler(
        ModelSettings(str(tiny_model_dir), batch_size=8), Side.DOCUMENT, annotate=True
    )
    assert handler.model_share() == ""  # nothing encoded yet
    loaded = handler.load_model()
    texts = [f"wool socks size {i}" for i in range(8)]
    handler.encode_products(ProductBatch([f"p{i}" for i in range(8)], texts, ["h"] * 8), loaded)
    share = handler.model_share()
    assert share.startswith("the model ran ") and share.endswith(
        "% of the time, it waited on this process the rest"
    )
    assert loaded.model_seconds > 0 and 0 <= int(share.split()[3].rstrip("%")) <= 100
    handler.waited_for_tokens_s = 1e9  # the tokenizing thread ahead of the model kept it waiting
    assert handler.model_share().endswith("it waited on this process the rest (100% of the time for tokens)")
