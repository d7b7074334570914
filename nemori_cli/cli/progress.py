"""Progress bars on stderr, one look for every command: description, bar, done/of, elapsed, eta."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from nemori_cli.cli.render import console


def wanted(flag: bool | None) -> bool:
    """--progress/--quiet, or by default a bar only when stderr is a terminal."""
    import sys

    return sys.stderr.isatty() if flag is None else flag


def rich_bar():
    """A rich progress display with the columns every command shows (not started)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("eta"),
        TimeRemainingColumn(),
        console=console(stderr=True),
        transient=False,
    )


# Off a terminal (stderr sent to a log file), a redrawn bar reaches the file
# only when it ends; plain lines, at most one every LINE_EVERY_S seconds, reach
# it as the work goes.
LINE_EVERY_S = 10.0


def line_progress(
    label: str, write: Callable[[str], object] | None = None, clock: Callable[[], float] | None = None
) -> Callable[[int, int], None]:
    """A (done, total) callback that writes 'label: done/total (pct), elapsed, eta' lines, flushed, rate-limited."""
    import sys
    import time

    now = clock or time.monotonic
    emit = write or (lambda line: (sys.stderr.write(line), sys.stderr.flush()))
    started, last = now(), [float("-inf"), -1]

    def update(done: int, total: int) -> None:
        t = now()
        finished = bool(total) and done >= total
        if done == last[1] or (t - last[0] < LINE_EVERY_S and not finished):
            return
        last[0], last[1] = t, done
        elapsed = t - started
        share = f" ({done / total:.0%})" if total else ""
        eta = f", eta {_clock(elapsed / done * (total - done))}" if total and done and not finished else ""
        emit(f"{label}: {done}/{total or '?'}{share}, {_clock(elapsed)} elapsed{eta}\n")

    return update


def _clock(seconds: float) -> str:
    minutes, sec = divmod(int(seconds + 0.5), 60)
    return f"{minutes // 60}:{minutes % 60:02d}:{sec:02d}"


@contextmanager
def progress_bar(enabled: bool, label: str) -> Iterator[Callable[[int, int], None] | None]:
    """One bar with ETA on stderr, updated through the (done, total) callback yielded; None when disabled.

    On a terminal a rich bar; otherwise lines a log file gets as they happen.
    """
    import sys

    if not enabled:
        yield None
        return
    if not sys.stderr.isatty():
        yield line_progress(label)
        return
    with rich_bar() as bar:
        task = bar.add_task(label, total=None)

        def update(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        yield update


class BenchBar:
    """A benchmark run's progress (bench.run.RunProgress) as rich bars on stderr, or nothing.

    Two bars: every question of the run, and the step under way (a memory
    being built, a system's questions). close() stops the display.
    """

    def __init__(self, enabled: bool):
        self.bar = None
        if enabled:
            self.bar = rich_bar()
            self.bar.start()
            self.overall = self.bar.add_task("all questions", total=0)
            self.task = self.bar.add_task("", total=None)

    def set_total(self, questions: int) -> None:
        if self.bar:
            self.bar.update(self.overall, total=questions)

    def step(self, description: str, total: int | None) -> Callable[[int, int], None] | None:
        bar = self.bar  # a local: the closure below keeps the narrowing to not None
        if not bar:
            return None
        bar.reset(self.task, description=description, total=total, completed=0)

        def update(done: int, of: int) -> None:
            bar.update(self.task, completed=done, total=of)

        return update

    def question_done(self) -> None:
        if self.bar:
            self.bar.advance(self.overall)

    def close(self) -> None:
        if self.bar:
            self.bar.stop()


# Work longer than this with nothing on the screen reads as a hang: `ask` loading its model, with stdout piped.
SLOW_S = 1.0


@contextmanager
def slow_note(enabled: bool, line: str, after: float | None = None) -> Iterator[None]:
    """One line on stderr ("nemori: loading the model...") once the work inside has taken more than ``after``
    seconds (SLOW_S); nothing when it is quicker, or when not ``enabled``."""
    if not enabled:
        yield
        return
    import sys
    import threading

    def say() -> None:
        sys.stderr.write(f"nemori: {line}\n")
        sys.stderr.flush()

    timer = threading.Timer(SLOW_S if after is None else after, say)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()
