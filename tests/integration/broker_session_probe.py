"""Not collected by the suite: run in a child pytest session by test_broker_lifecycle.py.

It asks for the session broker and records its PID and port so the parent can check, after the child
session ended, that the broker process is gone and its port is free.
"""

import json
import os


def test_record_broker(kafka_broker):
    with open(os.environ["RRM_PROBE_OUT"], "w") as out:
        json.dump({"pid": kafka_broker.pid, "port": kafka_broker.port}, out)
