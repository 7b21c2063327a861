"""The golden vectors (``tests/data/conformance/``) asked again of the real RocketMQ client classes.

Every line's inputs go to the Java classes of its client line through JPype -- the 4.9.8 files to the
``rocketmq-4`` jars, the develop files to ``rocketmq-5`` (client 5.3.3) -- exactly as the README beside the
vectors describes, and the answer is compared with the recorded one field by field.

``python -m tests.jvm.conformance_vectors`` prints a summary and exits with 1 when any line differs;
``--write`` rewrites the files with the jars' answers, keeping each line's inputs and key order.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jpype

from tests.reference.producer import QueueData
from tests.reference.vectors import CONFORMANCE_OFFSET_MS
from tests.support.rocketmq_java_allocation import java_allocate, java_strategy, message_queues
from tests.support.rocketmq_java_producer import JavaProducer, get_index, java_exception_name, set_index

CONFORMANCE_DIR = Path(__file__).resolve().parents[1] / "data" / "conformance"
# vector file -> the client line whose jars answer it
VECTOR_FILES = {
    "allocate-rocketmq-all-4.9.8.jsonl": "4.9",
    "allocate-develop.jsonl": "5",
    "producer-select-rocketmq-all-4.9.8.jsonl": "4.9",
    "producer-select-develop.jsonl": "5",
}
ALLOCATION_ANSWER_FIELDS = ("result", "exception")
SELECTION_ANSWER_FIELDS = ("selected", "sendWhichQueueEnd", "whichItemWorstEnd")


def answer_fields(file_name: str) -> tuple[str, ...]:
    return ALLOCATION_ANSWER_FIELDS if file_name.startswith("allocate-") else SELECTION_ANSWER_FIELDS


@dataclass(frozen=True)
class Difference:
    line_number: int
    field: str
    recorded: Any
    answered: Any

    def __str__(self) -> str:
        recorded, answered = _short(self.recorded), _short(self.answered)
        return f"line {self.line_number} {self.field}: recorded {recorded}, jar answered {answered}"


@dataclass
class FileCheck:
    """One vector file's lines, the jars' answer to each, and where the two differ."""

    file_name: str
    cases: list[dict[str, Any]]
    answers: list[dict[str, Any]] = field(default_factory=list)
    differences: list[Difference] = field(default_factory=list)

    @property
    def differing_lines(self) -> list[int]:
        return sorted({d.line_number for d in self.differences})


class _Absent:
    """A field the line or the answer does not have (a result where the other has an exception)."""

    def __repr__(self) -> str:
        return "<absent>"


ABSENT = _Absent()


def _short(value: Any, limit: int = 160) -> str:
    text = repr(value) if value is ABSENT else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= limit else text[: limit - 3] + "..."


# --------------------------------------------------------------------------------------------------
# Asking the jars
# --------------------------------------------------------------------------------------------------


class AllocationAnswers:
    """``allocate("G", currentCID, mqAll, cidAll)`` of the strategy a line names (built once per strategy and extra)."""

    def __init__(self, line: str) -> None:
        self.line = line
        self._strategies: dict[tuple[str, str], Any] = {}

    def strategy(self, name: str, extra: str):
        key = (name, extra)
        if key not in self._strategies:
            if name == "CH":
                param: Any = int(extra) if extra else None  # "": the default constructor
            elif name == "MR":
                param = [idc for idc in extra.split(",") if idc]  # "": no consumer IDC
            else:
                param = None
            self._strategies[key] = java_strategy(self.line, name, param)
        return self._strategies[key]

    def __call__(self, case: Mapping[str, Any]) -> dict[str, Any]:
        strategy = self.strategy(case["strategy"], case.get("extra") or "")
        kind, value = java_allocate(
            self.line, strategy, case["currentCID"], case["cidAll"], message_queues(case["mqAll"])
        )
        return {"exception": value} if kind == "exception" else {"result": [list(q) for q in value]}


class SelectionAnswers:
    """``selectOneMessageQueue`` ``calls`` times on this thread, after seeding faults and thread-local indexes."""

    def __init__(self, line: str) -> None:
        self.producer = JavaProducer(line)

    def seed_faults(self, faults: Mapping[str, Mapping[str, Any]]) -> None:
        for broker, fault in faults.items():
            if self.producer.line == "4.9":  # the item's start 1e9 ms before or after now
                duration = -CONFORMANCE_OFFSET_MS if fault["available"] else CONFORMANCE_OFFSET_MS
                self.producer.update_fault_item(broker, fault["latency"], duration)
            else:
                duration = 0 if fault["available"] else CONFORMANCE_OFFSET_MS
                self.producer.update_fault_item(broker, fault["latency"], duration, bool(fault["reachable"]))

    def __call__(self, case: Mapping[str, Any]) -> dict[str, Any]:
        producer = self.producer
        producer.reset(bool(case["sendLatencyFaultEnable"]))
        self.seed_faults(case["faults"])
        route = [QueueData(broker, queues, queues, perm) for broker, queues, perm in case["route"]]
        info = producer.route(route, {qd.broker_name: True for qd in route}, None)
        send_which_queue = info.getSendWhichQueue()
        set_index(producer.jvm, send_which_queue, case["sendWhichQueueStart"])
        tracks_worst_item = "whichItemWorstStart" in case
        if tracks_worst_item:
            set_index(producer.jvm, producer.which_item_worst, case["whichItemWorstStart"])
        selected: list[Any] = []
        for _ in range(int(case["calls"])):
            try:
                mq = producer.select_one_message_queue(info, case["lastBrokerName"])
            except jpype.JException as error:
                selected.append(java_exception_name(error))
                break
            selected.append([str(mq.getBrokerName()), int(mq.getQueueId())])
        answer: dict[str, Any] = {"selected": selected, "sendWhichQueueEnd": get_index(producer.jvm, send_which_queue)}
        if tracks_worst_item:
            answer["whichItemWorstEnd"] = get_index(producer.jvm, producer.which_item_worst)
        return answer


def answerer(file_name: str):
    line = VECTOR_FILES[file_name]
    return AllocationAnswers(line) if file_name.startswith("allocate-") else SelectionAnswers(line)


# --------------------------------------------------------------------------------------------------
# Comparing and rewriting
# --------------------------------------------------------------------------------------------------


def read_cases(path: Path) -> list[dict[str, Any]]:
    return [json.loads(text) for text in path.read_text(encoding="utf-8").splitlines() if text.strip()]


def differences(
    line_number: int, fields: Sequence[str], case: Mapping[str, Any], answer: Mapping[str, Any]
) -> list[Difference]:
    return [
        Difference(line_number, name, case.get(name, ABSENT), answer.get(name, ABSENT))
        for name in fields
        if case.get(name, ABSENT) != answer.get(name, ABSENT)
    ]


def check_file(file_name: str, path: Path | None = None) -> FileCheck:
    """Ask the jars of ``file_name``'s line for every line of ``path`` (default: the committed file)."""
    check = FileCheck(file_name, read_cases(path or CONFORMANCE_DIR / file_name))
    answer = answerer(file_name)
    fields = answer_fields(file_name)
    for number, case in enumerate(check.cases, start=1):
        check.answers.append(answer(case))
        check.differences.extend(differences(number, fields, case, check.answers[-1]))
    return check


def with_answer(case: Mapping[str, Any], answer: Mapping[str, Any], fields: Sequence[str]) -> dict[str, Any]:
    """``case`` with its recorded answer replaced by ``answer``: inputs and key order kept, a new field last."""
    rewritten: dict[str, Any] = {}
    for key, value in case.items():
        if key not in fields:
            rewritten[key] = value
        elif key in answer:
            rewritten[key] = answer[key]
    rewritten.update({key: value for key, value in answer.items() if key not in rewritten})
    return rewritten


def write_answers(check: FileCheck, path: Path) -> None:
    fields = answer_fields(check.file_name)
    lines = [with_answer(case, answer, fields) for case, answer in zip(check.cases, check.answers, strict=True)]
    path.write_text("".join(json.dumps(case, ensure_ascii=False) + "\n" for case in lines), encoding="utf-8")


def summary(check: FileCheck, shown: int = 5) -> list[str]:
    """One line for the file, then its first ``shown`` differing fields."""
    text = [f"{check.file_name}: {len(check.cases)} lines checked, {len(check.differing_lines)} differ"]
    text += [f"  {d}" for d in check.differences[:shown]]
    if len(check.differences) > shown:
        text.append(f"  ... and {len(check.differences) - shown} more differing fields")
    return text


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.jvm.conformance_vectors",
        description="Compare the golden vectors with the answers of the real RocketMQ client jars.",
    )
    parser.add_argument("--write", action="store_true", help="rewrite the vector files with the jars' answers")
    args = parser.parse_args(argv)
    differing = 0
    for file_name in VECTOR_FILES:
        check = check_file(file_name)
        print("\n".join(summary(check)))
        differing += len(check.differing_lines)
        if args.write and check.differences:
            write_answers(check, CONFORMANCE_DIR / file_name)
            print(f"  rewritten with the jars' answers: {file_name}")
    return 0 if args.write or not differing else 1


if __name__ == "__main__":
    sys.exit(main())
