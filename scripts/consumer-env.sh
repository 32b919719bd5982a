#!/usr/bin/env bash
# The consumers' own dataset code, for tests/consumers: verl and OpenRLHF installed WITHOUT their
# heavy dependencies (ray, vllm, deepspeed, flash-attn) into an isolated path, .consumers/, that
# only tests/consumers puts on sys.path: verl's wheel also installs top-level `tests` and `scripts`
# packages, which must not shadow the project's own. Needs only the package registry.
# Usage: scripts/consumer-env.sh [PYTHON]   (idempotent: a stamp records the pinned set)
set -euo pipefail
PYTHON="${1:-${PYTHON:-python3}}"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
TARGET="$ROOT/.consumers"
# Pinned: the releases the exports were checked against (issue 15). omegaconf + pillow: verl's
# dataset module; pylatexenc: OpenRLHF's datasets package.
PINS="verl==0.9.1 openrlhf==0.11.2 omegaconf==2.4.0 pillow==13.0.0 pylatexenc==2.11"
STAMP="$TARGET/.pins"
if [[ -f "$STAMP" && "$(cat "$STAMP")" == "$PINS" ]]; then
  exit 0
fi
rm -rf "$TARGET.tmp"
# shellcheck disable=SC2086
"$PYTHON" -m pip install -q --disable-pip-version-check --no-deps --target "$TARGET.tmp" $PINS
echo "$PINS" > "$TARGET.tmp/.pins"
rm -rf "$TARGET"
mv "$TARGET.tmp" "$TARGET"
echo "consumer packages in $TARGET: $PINS"
