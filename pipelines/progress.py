"""Progress of long Beam work as log lines: count, rate and, when the total is known, an ETA.

A Beam worker has no terminal to draw a bar on, and on Dataflow its log lines are what a user
sees; so this logs one line per interval (and none more often), the same on a terminal or not.
Each worker process logs its own share; the total, when given, is the whole input's, so with
several workers the ETA of each is an upper bound.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

LOGGER = logging.getLogger("madr.progress")


def format_duration(seconds: float) -> str:
    minutes, seconds = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{seconds:02d}s"


class ProgressLog:
    """Counts work done and logs `what: N [of T] (R/s[, ETA E])` at most once per `interval_s`.

    Args:
        what: the noun of the count, e.g. "document texts encoded".
        total: how many there are in all, when known.
        interval_s: the shortest time between two lines.
        clock, log: injectable for tests.
        detail: more to say at the end of each line (e.g. how busy the model kept the device), or "".
    """

    def __init__(
        self,
        what: str,
        total: int | None = None,
        interval_s: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
        log: Callable[[str], None] | None = None,
        detail: Callable[[], str] | None = None,
    ) -> None:
        self.what, self.total, self.interval_s = what, total, interval_s
        self.clock = clock
        self.log = log or LOGGER.info
        self.detail = detail
        self.done = 0
        self.started = self.last_logged = clock()

    def line(self) -> str:
        elapsed = max(self.clock() - self.started, 1e-9)
        rate = self.done / elapsed
        count = f"{self.done:,}" + (f" of {self.total:,}" if self.total else "")
        # Slow work (variants of an experiment) reads better per minute or per hour than as 0.0/s.
        if rate >= 1 or rate == 0:
            pace = f"{rate:,.1f}/s"
        elif rate * 60 >= 1:
            pace = f"{rate * 60:,.1f}/min"
        else:
            pace = f"{rate * 3600:,.1f}/h"
        text = f"{self.what}: {count} ({pace}"
        if self.total and rate > 0 and self.done < self.total:
            text += f", ETA {format_duration((self.total - self.done) / rate)}"
        more = self.detail() if self.detail else ""
        return text + ")" + (f"; {more}" if more else "")

    def skip(self, count: int) -> None:
        """Takes work that cost nothing (found finished) out of the total, so it does not pace the ETA."""
        if self.total:
            self.total = max(self.total - count, 0)

    def add(self, count: int) -> None:
        self.done += count
        now = self.clock()
        if now - self.last_logged >= self.interval_s:
            self.last_logged = now
            self.log(self.line())
