"""The released client jars give every golden vector's recorded answer (``tests/data/conformance/``).

The unit tier holds the Python reproduction to the vectors; this holds the vectors to the real classes: each
line's inputs go to the 4.9.8 jars (``rocketmq-all-4.9.8`` files) or the 5.3.3 jars (``develop`` files) as
``tests.jvm.conformance_vectors`` feeds them, and every answer field must equal the recorded one.
"""

from __future__ import annotations

import pytest

from tests.jvm.conformance_vectors import VECTOR_FILES, check_file, summary


@pytest.mark.parametrize("file_name", list(VECTOR_FILES))
def test_the_client_jars_answer_every_vector_as_recorded(file_name):
    check = check_file(file_name)
    assert len(check.cases) >= 1000
    assert len(check.answers) == len(check.cases)
    assert check.differences == [], "\n".join(summary(check, shown=20))
