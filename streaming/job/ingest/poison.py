"""The last line of defence: records that validation passed and processing still cannot take.

``isolate`` runs a batch's processing; when it raises, it runs it again on parts of the batch to find the
records whose presence makes it fail, sets each aside with the exception's summary (to be dead-lettered as
``PROCESSING_ERROR``) and processes the batch without them. The search is deterministic -- the same records
and state give the same culprits -- so a replayed batch writes the same dead letters and the same results.
A failure the batch shows without any of its records is not about its data, and is raised as before.
The tests plant such records (``planted``). Design and limits: ``docs/design/poison-pills.md``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Generic, TypeVar

PROCESSING_ERROR = "PROCESSING_ERROR"
MAX_DETAIL_CHARS = 1_000


# The tests' seam, never set from configuration: records whose text holds the planted marker make processing raise,
# as a record no rule foresaw might. The poison-pill tests plant it around the job they start (``planted``); the
# consumer's state function takes it along to its Python workers.
_marker: str | None = None


@contextmanager
def planted(marker: str | None) -> Iterator[None]:
    """A block in which processing raises on records whose text holds ``marker`` (None: on none)."""
    global _marker
    previous, _marker = _marker, marker
    try:
        yield
    finally:
        _marker = previous


def planted_marker() -> str | None:
    """The marker planted now (``planted``), if any."""
    return _marker


def raise_if_planted(text: str, what: str) -> None:
    """Raise when ``text`` holds the planted marker (``what``: the record's kind, for the message)."""
    if _marker is not None and _marker in text:
        raise ValueError(f"test poison marker {_marker!r} in {what}")


class SearchAbandoned(Exception):
    """The search stopped because the job is stopping: an attempt that fails then may have failed because the
    stop interrupted it, so no record is refused on its word; the batch is replayed from the checkpoint."""


# Failures that say nothing about the records: the search would only repeat them.
_NOT_ABOUT_DATA: tuple[type[BaseException], ...] = (MemoryError, SearchAbandoned)

Item = TypeVar("Item")
Result = TypeVar("Result")


@dataclass(frozen=True)
class Refused(Generic[Item]):
    """A record set aside: processing fails with it and succeeds without it."""

    item: Item
    detail: str


def error_summary(error: BaseException) -> str:
    """The exception's class and the first line of its message, for a dead letter's detail."""
    lines = str(error).strip().splitlines()
    text = f"{type(error).__name__}: {lines[0]}" if lines else type(error).__name__
    return text[:MAX_DETAIL_CHARS]


def isolate(
    items: Sequence[Item],
    attempt: Callable[[Sequence[Item]], Result],
    abandon: Callable[[], bool] | None = None,
) -> tuple[Result, list[Refused[Item]]]:
    """``attempt(items)``, or ``attempt`` of ``items`` without those that make it raise, and those.

    ``attempt`` must be a function of its argument (it starts again from the same state each call, e.g. a
    state restored anew) and keep the items' order. A culprit is found by halving: the shortest prefix of the
    items that fails ends with it (``1 + log2(n)`` attempts each). When ``attempt`` fails on no items at all,
    the failure is not the batch's data and the original error is raised. When ``abandon()`` is true after an
    attempt failed, ``SearchAbandoned`` is raised from that failure and nothing is refused.
    """
    if abandon is not None:
        attempt = _abandoning(attempt, abandon)
    kept = list(items)
    refused: list[Refused[Item]] = []
    while True:
        try:
            return attempt(kept), refused
        except _NOT_ABOUT_DATA:
            raise
        except Exception as error:
            culprit = _first_failing(kept, attempt, error)
            if culprit is None:
                raise
            index, culprit_error = culprit
            refused.append(Refused(kept[index], error_summary(culprit_error)))
            del kept[index]


def _first_failing(
    items: list[Item], attempt: Callable[[Sequence[Item]], object], error: Exception
) -> tuple[int, Exception] | None:
    """(index, error) of the item that ends the shortest failing prefix of ``items`` (which fail as a
    whole with ``error``); None when even no items fail."""
    try:
        attempt([])
    except _NOT_ABOUT_DATA:
        raise
    except Exception:  # noqa: BLE001 - the batch fails without its records: not a data failure
        return None
    passing, failing, failing_error = 0, len(items), error  # items[:passing] pass, items[:failing] fail
    while failing - passing > 1:
        middle = (passing + failing) // 2
        try:
            attempt(items[:middle])
        except _NOT_ABOUT_DATA:
            raise
        except Exception as prefix_error:  # noqa: BLE001 - any failure of the prefix counts
            failing, failing_error = middle, prefix_error
        else:
            passing = middle
    return failing - 1, failing_error


def _abandoning(
    attempt: Callable[[Sequence[Item]], Result], abandon: Callable[[], bool]
) -> Callable[[Sequence[Item]], Result]:
    """``attempt``, whose failures become ``SearchAbandoned`` once ``abandon()`` is true."""

    def checked(items: Sequence[Item]) -> Result:
        try:
            return attempt(items)
        except _NOT_ABOUT_DATA:
            raise
        except Exception as error:
            if abandon():
                raise SearchAbandoned(f"the job is stopping; the search ended at: {error_summary(error)}") from error
            raise

    return checked
