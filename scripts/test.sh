#!/usr/bin/env bash
# The tests: fetches the real GGUF files the real-checkpoint tests run (once; scripts/real-models.sh,
# into $PE_REAL_MODELS, default ~/.cache/candle-pe/real-models), then `cargo test --workspace`
# with any arguments given. The README's test command, and CI's.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/real-models.sh >/dev/null
exec cargo test --workspace "$@"
