#!/usr/bin/env bash
# bench/runner.ts on the machine's Node, then on Node 24 when scripts/node24.sh has fetched it
# (`scripts/node24.sh` fetches it from the npm registry). The runner bench loads no native module,
# so one node_modules serves both runtimes. Arguments go to bench/runner.ts (e.g. --rounds 5).
set -euo pipefail
cd "$(dirname "$0")/.."
npx tsx bench/runner.ts "$@"
if node24="$(scripts/node24.sh --present)"; then
  echo
  PATH="$node24/bin:$PATH" npx tsx bench/runner.ts "$@"
else
  echo
  echo "bench/runner.ts: no Node 24 here (run scripts/node24.sh to fetch it from the npm registry); measured on $(node --version) only"
fi
