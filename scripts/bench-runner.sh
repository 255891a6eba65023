#!/usr/bin/env bash
# bench/runner.ts on the machine's Node, then on Node 24 when scripts/node24.sh has fetched it
# (`scripts/node24.sh` fetches it from the npm registry). The runner bench loads no native module,
# so one node_modules serves both runtimes. Arguments go to bench/runner.ts (e.g. --rounds 5).
# Last, the `summary:` lines of both runs again (runtime, load average, throughput ratio, extra
# CPU, and what they rest on): what docs/performance.md's runner table takes.
set -euo pipefail
cd "$(dirname "$0")/.."
out="$(mktemp)"
trap 'rm -f "$out"' EXIT
npx tsx bench/runner.ts "$@" | tee -a "$out"
if node24="$(scripts/node24.sh --present)"; then
  echo
  PATH="$node24/bin:$PATH" npx tsx bench/runner.ts "$@" | tee -a "$out"
else
  echo
  echo "bench/runner.ts: no Node 24 here (run scripts/node24.sh to fetch it from the npm registry); measured on $(node --version) only"
fi
echo
grep '^summary:' "$out" || true
