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
#
# Modes: no argument installs all three; `--go` builds only the Go tools (2 and 3), one build at a time (a lock in
# .cache/go-bin: a second caller waits for the running build, then finds the binaries there); `--go-in-background`
# (`make test`) installs 1 and, when a Go tool is missing, starts `--go` in the background with its output in
# .cache/go-bin/build.log: the Go module downloads and builds (minutes on a fresh machine) overlap the suite's first
# tiers, and the tests that run a Go tool call `--go` themselves, which waits for that build
# (tests/support/go_tools.py).
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-all}
case "$mode" in all | --go | --go-in-background) ;; *) echo "usage: $0 [--go | --go-in-background]" >&2; exit 2 ;; esac

# dashboard-linter (pinned in scripts/dashboard-linter/go.mod with every dependency's checksum in go.sum): the
# Go module proxy these machines reach serves this commit of it but no tagged release, and the checksum
# database has no entry for it, so its checksum comes from our go.sum alone (GONOSUMDB for this module only).
DASHBOARD_LINTER_VERSION=v0.0.0-20241224134444-1765d94aec4a
ALERTMANAGER_VERSION=v0.28.1

prom_dir=.cache/prometheus
if [ "$mode" != --go ] && { [ ! -x "$prom_dir/usr/bin/promtool" ] || [ ! -x "$prom_dir/usr/bin/prometheus" ]; }; then
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
linter=.cache/go-bin/dashboard-linter
stamp=".cache/go-bin/.dashboard-linter-$DASHBOARD_LINTER_VERSION"
go_tools_built() {
  [ -x .cache/go-bin/alertmanager ] && [ -x .cache/go-bin/amtool ] && [ -f "$am_stamp" ] && [ -x "$linter" ] && [ -f "$stamp" ]
}
mkdir -p .cache/go-bin
if [ "$mode" = --go-in-background ]; then
  # a build already running (its lock held) is left to finish, not queued behind
  if ! go_tools_built && (exec 9>.cache/go-bin/.build-lock && flock -n 9); then
    command -v go >/dev/null || { echo "setup: 'go' is required to build alertmanager and dashboard-linter" >&2; exit 1; }
    echo "setup: alertmanager, amtool and dashboard-linter building in the background (.cache/go-bin/build.log)"
    # niced: the suite beside it is what the caller waits for
    nohup nice -n 10 bash "$PWD/scripts/install_observability_tools.sh" --go >.cache/go-bin/build.log 2>&1 </dev/null &
  fi
  exit 0
fi
exec 9>.cache/go-bin/.build-lock
flock 9  # one build at a time: a caller arriving during a build waits for it, then finds the binaries built

if [ ! -x .cache/go-bin/alertmanager ] || [ ! -x .cache/go-bin/amtool ] || [ ! -f "$am_stamp" ]; then
  command -v go >/dev/null || { echo "setup: 'go' is required to build alertmanager" >&2; exit 1; }
  echo "setup: alertmanager and amtool $ALERTMANAGER_VERSION (first time: a Go build of a few minutes)"
  GOBIN="$PWD/.cache/go-bin" go install \
    "github.com/prometheus/alertmanager/cmd/alertmanager@$ALERTMANAGER_VERSION" \
    "github.com/prometheus/alertmanager/cmd/amtool@$ALERTMANAGER_VERSION"
  rm -f .cache/go-bin/.alertmanager-*
  touch "$am_stamp"
fi

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
