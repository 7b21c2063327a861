"""The agent bench's acceptance figures: medians over rounds, each round's hook side against its own plain side."""

from __future__ import annotations

from bench.bench_agent import TARGET_THROUGHPUT_RATIO, summarise

MESSAGES = 100_000


def _round(number: int, hook: bool, sends_per_s: float, agent_ns: int = 0, hook_cpu_ns: int = 0) -> dict:
    return {
        "kind": "round",
        "round": number,
        "hook": hook,
        "messages": MESSAGES,
        "sends_per_s": sends_per_s,
        "p50_us": 100,
        "p99_us": 400,
        "process_cpu_ns": 50_000 * MESSAGES,
        "sending_thread_cpu_ns": 8_000 * MESSAGES,
        "agent_threads_cpu_ns": agent_ns,
        "hook_wall_ns": hook_cpu_ns // 2,
        "hook_cpu_ns": hook_cpu_ns,
    }


def _lines(plain_and_hook: list[tuple[float, float]], dropped: int = 0) -> list[dict]:
    rounds = []
    for number, (plain, hook) in enumerate(plain_and_hook):
        rounds.append(_round(number, False, plain))
        rounds.append(_round(number, True, hook, agent_ns=2_000 * MESSAGES, hook_cpu_ns=1_000 * MESSAGES))
    counters = {"published": 5 * MESSAGES - dropped, "dropped": dropped}
    return [*rounds, {"kind": "summary", "messages_per_round": MESSAGES, "cpu_read_ns": 600, "agent": counters}]


def test_the_ratio_is_the_median_of_each_round_s_pair_not_a_ratio_of_medians():
    # Plain and hook medians are both 5,000/s, but in 3 of 5 rounds the hook side kept 0.95 of its plain side.
    pairs = [(5000, 4750), (6000, 5700), (4000, 3800), (5000, 5000), (3000, 3000)]
    acceptance = summarise(_lines(pairs))["acceptance"]
    assert acceptance["throughput_ratio"] == 0.95
    assert acceptance["agent_cpu_us_per_send"] == 3.0  # 2 µs in the agent's threads + 1 µs of hook per send
    assert acceptance["meets"] == {"agent_cpu_us_per_send": True, "throughput_ratio": False, "dropped": True}


def test_an_event_dropped_fails_the_run_whatever_its_speed():
    pairs = [(5000, 5000)] * 5
    acceptance = summarise(_lines(pairs, dropped=1))["acceptance"]
    assert acceptance["throughput_ratio"] >= TARGET_THROUGHPUT_RATIO
    assert acceptance["dropped"] == 1
    assert acceptance["meets"]["dropped"] is False
