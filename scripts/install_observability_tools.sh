#!/usr/bin/env bash
# Installs the observability tools only the tests need (`make setup-test`), into git-ignored project-local
# folders, idempotently:
#   1. prometheus and promtool (Debian's `prometheus` package, 2.42) into .cache/prometheus/ with
#      `apt-get download` + `dpkg -x`: the binaries without the package's service scripts;
#   2. alertmanager and amtool, built from the Go module proxy into .cache/go-bin/ (Debian's package looks for
#      its default template under /usr/share, so it cannot run unpacked): the inhibition rules beside the alert
#      rules are checked and exercised with them;
#   3. Grafana's dashboard-linter from the Go module proxy, built into .cache/go-bin/ from the small wrapper
#      module scripts/dashboard-linter/ (go.mod pins it and go.sum every dependency; `go install mod@version`
#      needs the proxy's version list, which these machines cannot read for this module).
# A second run is quick: each step is skipped when its binary is already there.
set -euo pipefail
cd "$(dirname "$0")/.."

# dashboard-linter (pinned in scripts/dashboard-linter/go.mod with every dependency's checksum in go.sum): the
# Go module proxy these machines reach serves this commit of it but no tagged release, and the checksum
# database has no entry for it, so its checksum comes from our go.sum alone (GONOSUMDB for this module only).
DASHBOARD_LINTER_VERSION=v0.0.0-20241224134444-1765d94aec4a
ALERTMANAGER_VERSION=v0.28.1

prom_dir=.cache/prometheus
if [ ! -x "$prom_dir/usr/bin/promtool" ] || [ ! -x "$prom_dir/usr/bin/prometheus" ]; then
  echo "setup: prometheus and promtool (Debian package) into $prom_dir"
  command -v apt-get >/dev/null || { echo "setup: apt-get is required to fetch the prometheus package" >&2; exit 1; }
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  if ! (cd "$work" && apt-get download prometheus >/dev/null 2>&1); then
    apt-get update -qq >/dev/null
    (cd "$work" && apt-get download prometheus >/dev/null)
  fi
  mkdir -p "$prom_dir"
  dpkg -x "$work"/prometheus_*.deb "$prom_dir"
  "$prom_dir/usr/bin/promtool" --version >/dev/null
fi

am_stamp=".cache/go-bin/.alertmanager-$ALERTMANAGER_VERSION"
if [ ! -x .cache/go-bin/alertmanager ] || [ ! -x .cache/go-bin/amtool ] || [ ! -f "$am_stamp" ]; then
  command -v go >/dev/null || { echo "setup: 'go' is required to build alertmanager" >&2; exit 1; }
  echo "setup: alertmanager and amtool $ALERTMANAGER_VERSION (first time: a Go build of a few minutes)"
  mkdir -p .cache/go-bin
  GOBIN="$PWD/.cache/go-bin" go install \
    "github.com/prometheus/alertmanager/cmd/alertmanager@$ALERTMANAGER_VERSION" \
    "github.com/prometheus/alertmanager/cmd/amtool@$ALERTMANAGER_VERSION"
  rm -f .cache/go-bin/.alertmanager-*
  touch "$am_stamp"
fi

linter=.cache/go-bin/dashboard-linter
stamp=".cache/go-bin/.dashboard-linter-$DASHBOARD_LINTER_VERSION"
if [ ! -x "$linter" ] || [ ! -f "$stamp" ]; then
  command -v go >/dev/null || { echo "setup: 'go' is required to build dashboard-linter" >&2; exit 1; }
  echo "setup: dashboard-linter $DASHBOARD_LINTER_VERSION (first time: a Go build of several minutes)"
  mkdir -p .cache/go-bin
  (
    cd scripts/dashboard-linter
    GONOSUMDB=github.com/grafana/dashboard-linter GOFLAGS=-mod=readonly \
      go build -o ../../.cache/go-bin/dashboard-linter github.com/grafana/dashboard-linter
  )
  rm -f .cache/go-bin/.dashboard-linter-*
  touch "$stamp"
fi
