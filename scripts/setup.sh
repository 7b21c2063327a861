#!/usr/bin/env bash
# Sets up everything the project needs on a fresh machine, idempotently:
#   1. a virtualenv in .venv with the locked Python dependencies (constraints.txt) and the project;
#   2. the JVM jar sets of jvm/pom.xml from Maven Central into .cache/jars (Spark connectors,
#      the Kafka broker, the RocketMQ 4.9.8 and 5.3.3 clients, the 5.3.3 and 4.9.7 name server and
#      broker, the admin client for the collector) and the project's compiled Java classes;
#   3. the client agent (jvm/agent, into the local Maven repository and .cache/jars/agent) and the
#      RocketMQ client processes compiled against both client lines (demo --rocketmq runs them).
# The tools only the tests use (promtool, Prometheus, dashboard-linter) are `make setup-test`'s.
# A second run is quick: each step is skipped when its inputs have not changed.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
for tool in "$PYTHON" java mvn; do
  command -v "$tool" >/dev/null || { echo "setup: '$tool' is required but not on PATH" >&2; exit 1; }
done

if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv"
  "$PYTHON" -m venv .venv
fi

stamp=".venv/.installed-$(cat pyproject.toml constraints.txt | sha256sum | cut -c1-16)"
if [ ! -f "$stamp" ]; then
  echo "setup: installing Python dependencies (first time: a few minutes, pyspark is large)"
  .venv/bin/python -m pip install --quiet --upgrade pip
  .venv/bin/python -m pip install --quiet -c constraints.txt -e '.[test]'
  rm -f .venv/.installed-*
  touch "$stamp"
fi

echo "setup: JVM artifacts"
.venv/bin/python -m connectors.jvm_artifacts

echo "setup: client agent and RocketMQ test clients"
.venv/bin/python -m localenv.agent_artifacts
