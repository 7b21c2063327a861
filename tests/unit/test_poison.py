"""The last line of defence: which records ``poison.isolate`` sets aside, and which failures it raises."""

from __future__ import annotations

import pytest

from streaming.job.ingest.poison import MAX_DETAIL_CHARS, SearchAbandoned, error_summary, isolate


class Ledger:
    """Processing with state: each attempt starts from the same balance and applies the amounts in order; an
    amount it cannot take raises half-way, after the earlier ones changed its working copy."""

    def __init__(self, balance: int = 0) -> None:
        self.balance = balance
        self.attempts = 0

    def attempt(self, amounts):  # type: ignore[no-untyped-def]
        self.attempts += 1
        working = self.balance
        for amount in amounts:
            if not isinstance(amount, int):
                raise TypeError(f"not an amount: {amount!r}\nsecond line")
            working += amount
            if working < 0:
                raise ValueError(f"overdrawn by {-working}")
        return working


def test_a_batch_that_processes_is_processed_once_and_nothing_is_refused():
    ledger = Ledger()
    assert isolate([1, 2, 3], ledger.attempt) == (6, [])
    assert ledger.attempts == 1


@pytest.mark.parametrize("position", [0, 1, 17, 63])
def test_the_record_that_makes_a_batch_fail_is_refused_with_the_error_and_the_rest_processed(position):
    amounts: list[object] = list(range(1, 65))
    amounts[position] = "seven"
    result, refused = isolate(amounts, Ledger().attempt)
    assert result == sum(range(1, 65)) - (position + 1)
    assert [(r.item, r.detail) for r in refused] == [("seven", "TypeError: not an amount: 'seven'")]


def test_several_culprits_and_a_culprit_only_in_context_are_all_refused_in_a_replayable_order():
    # -5 fails only after the "x" is gone and only from a balance of 3: it is a culprit in context, and a
    # replay of the same batch finds the same culprits in the same order.
    amounts = [1, "x", 2, -5, 3, None, 4]
    first = isolate(amounts, Ledger().attempt)
    again = isolate(amounts, Ledger().attempt)
    assert first == again
    result, refused = first
    assert [r.item for r in refused] == ["x", -5, None]
    assert result == 1 + 2 + 3 + 4
    assert refused[1].detail == "ValueError: overdrawn by 2"


def test_halving_finds_a_culprit_in_a_logarithmic_number_of_attempts():
    ledger = Ledger()
    amounts: list[object] = [1] * 1024
    amounts[700] = "bad"
    isolate(amounts, ledger.attempt)
    # the failing whole, the empty batch, ten halvings, the batch without the culprit
    assert ledger.attempts == 1 + 1 + 10 + 1


def test_a_failure_without_any_record_is_not_the_data_and_is_raised():
    def attempt(amounts):  # type: ignore[no-untyped-def]
        raise OSError("table not writable")

    with pytest.raises(OSError, match="table not writable"):
        isolate([1, 2], attempt)


def test_running_out_of_memory_is_raised_without_a_search():
    calls = []

    def attempt(amounts):  # type: ignore[no-untyped-def]
        calls.append(list(amounts))
        raise MemoryError

    with pytest.raises(MemoryError):
        isolate([1, 2, 3], attempt)
    assert calls == [[1, 2, 3]]


def test_a_stop_during_the_search_refuses_nothing_and_raises_abandoned():
    # The stop comes after the whole batch failed: the halving's failures may be the stop's, not the data's.
    ledger, attempts_when_stopped = Ledger(), 2
    amounts: list[object] = [1, 2, "bad", 3]

    def stopping() -> bool:
        return ledger.attempts >= attempts_when_stopped

    with pytest.raises(SearchAbandoned, match="the job is stopping") as raised:
        isolate(amounts, ledger.attempt, abandon=stopping)
    assert isinstance(raised.value.__cause__, (TypeError, ValueError))
    # the whole fails, the empty batch and [1, 2] pass, [1, 2, "bad"] fails with the stop seen: the end
    assert ledger.attempts == 4


def test_a_batch_that_fails_while_stopping_is_raised_at_once_without_refusing():
    ledger = Ledger()
    with pytest.raises(SearchAbandoned) as raised:
        isolate([1, "bad"], ledger.attempt, abandon=lambda: True)
    assert isinstance(raised.value.__cause__, TypeError)
    assert ledger.attempts == 1


def test_a_search_that_is_not_abandoned_refuses_as_before():
    amounts: list[object] = [1, "bad", 2]
    assert isolate(amounts, Ledger().attempt, abandon=lambda: False) == isolate(amounts, Ledger().attempt)
    assert isolate([1, 2], Ledger().attempt, abandon=lambda: True) == (3, [])  # nothing failed, nothing abandoned


def test_a_summary_is_the_class_and_the_first_line_of_the_message_bounded():
    assert error_summary(KeyError("queue_id")) == "KeyError: 'queue_id'"
    assert error_summary(ValueError("")) == "ValueError"
    assert error_summary(ValueError("a\nb")) == "ValueError: a"
    assert len(error_summary(ValueError("x" * 5000))) == MAX_DETAIL_CHARS
