#!/usr/bin/env bash
# Regenerates src/backends/tinker/proto/tinker_public_pb.ts from tinker_public.proto beside it,
# with buf and protoc-gen-es (dev dependencies; the runtime is @bufbuild/protobuf).
set -euo pipefail
cd "$(dirname "$0")/.."
dir=src/backends/tinker/proto
template='{"version":"v2","plugins":[{"local":"node_modules/.bin/protoc-gen-es","out":"'"$dir"'","opt":["target=ts","import_extension=js"]}]}'
npx buf generate "$dir" --template "$template"
npx biome format --write "$dir" >/dev/null
