#!/usr/bin/env bash
# Regenerates the committed test fixtures from the real Python reference implementations (Hugging Face transformers
# and diffusers on PyTorch), so the Rust tests can compare against them without Python in CI.
#
#   bash scripts/make-fixtures.sh           # run every generator, scripts/fixtures/<name>.py
#   bash scripts/make-fixtures.sh rope      # run only scripts/fixtures/rope.py (several names may be given)
#
# The first run creates a venv at ${XDG_CACHE_HOME:-$HOME/.cache}/candle-pe/fixtures-venv (override with
# FIXTURES_VENV) and installs the pins from scripts/fixtures/requirements.txt into it (torch pulls large CUDA wheels
# from PyPI; the generators only use the CPU). Later runs reuse it, and reinstall only when requirements.txt changes.
#
# What is written is up to each generator (its docstring says). Today:
#   rope  ->  crates/pe-testkit/fixtures/rope/<case>.json + <case>.safetensors: inv_freq and cos/sin tables of the
#             rotary classes of Llama 3.1, Qwen2.5 (YaRN), DeepSeek-V3, gpt-oss, Phi-3/Phi-4-mini (longrope),
#             Phi-3.5-MoE (longrope with short_mscale / long_mscale),
#             Gemma 3 (both config forms), Gemma 4 (as given and as saved), Qwen2-VL and Qwen3-VL (M-RoPE),
#             M-RoPE with yarn and linear (Qwen2.5-VL, Qwen3-VL), dynamic NTK and HunYuan (ntk_alpha).
#   query_scale -> crates/pe-testkit/fixtures/rope/query_scale_<family>.json + .safetensors: the factor on the queries
#             per position that Ministral 3, Mistral 4 and Llama 4 (NoPE layers) compute.
#   models -> crates/pe-testkit/fixtures/models/<case>/{config.json, model.safetensors, outputs.safetensors, outputs.json}: tiny
#             random checkpoints saved by transformers (Llama 3.1, Qwen2.5 YaRN, Qwen3 qk-norm, Gemma 3, Phi-3 / Phi-4-mini longrope, Mistral
#             sliding window, SmolLM3 NoPE layers, Ministral 3 query scale, dense Llama 4, M2M100) and the logits / encoder states transformers computes with them (prefill,
#             cached greedy decode, left-padded batch, far positions).
#   mrope_models -> crates/pe-testkit/fixtures/models/{qwen2_vl,qwen3_vl}/ (as models): the language models of tiny
#             random Qwen2-VL and Qwen3-VL called with M-RoPE ids from get_rope_index (image runs), prefill, cached
#             decode with rope_deltas, and the same at ids + 20,000.
#   gguf_files -> crates/pe-testkit/fixtures/gguf/<model>_<f32|q8_0>.{gguf,json,safetensors}: the tiny Llama 3.1, Qwen2.5
#             YaRN, Phi-3 LongRoPE, Mistral, Qwen3 and Gemma 3 checkpoints above converted as llama.cpp's converter does
#             (gguf's GGUFWriter),
#             and transformers' logits on their dequantized weights; rope-only files for real Llama 3 heads.
#   gguf_none_values -> crates/pe-testkit/fixtures/gguf/phi3_longrope_f32_swa0.gguf: a copy of phi3_longrope_f32.gguf
#             with the 0 llama.cpp's converter writes for "no sliding window" (phi3.attention.sliding_window = 0),
#             written by gguf's own reader and writer (its own venv: gguf and numpy only).
#   model_types -> crates/pe-testkit/fixtures/model_types/transformers.json: every model type of transformers whose
#             text config has a rotary embedding, its config.json as its config class saves it, and what the class
#             reads from it, from the same file without rope_theta and rope_interleave (its defaults), without its
#             rope dict (the one the class fills in) and with a flat legacy rope_scaling instead, with how its
#             modeling code pairs the channels it turns (its own venv: transformers 5.24.0, no torch).
#   vision_ropes -> crates/pe-testkit/fixtures/vision_ropes/transformers.json: every vision tower of transformers with
#             an axial rope, its config as saved, the models that nest it and where, and the cos and sin its rotary
#             class computes at five patch positions (its own venv: torch and transformers 5.24.0).
#   gguf_archs -> crates/pe-testkit/fixtures/gguf/arch_<case>.{gguf,json}: metadata-only GGUF files of qwen35,
#             qwen35moe, gemma4, mistral4, glm4moe (with and without sections) and hunyuan_vl, written with gguf's
#             GGUFWriter as llama.cpp's converter writes them, and what llama.cpp's loader reads from each (its own
#             venv: gguf and numpy only).
#   grids ->  crates/pe-testkit/fixtures/grids/<case>.json + <case>.safetensors: diffusers' FLUX.1 / FLUX.2 /
#             Qwen-Image multi-axis rotary tables, transformers' Pixtral and Llama 4 vision-tower 2D ropes, diffusers'
#             2D / 3D sin-cos grid embeddings, and transformers' BLOOM and MPT ALiBi slopes and biases
#             (non-power-of-two head counts included).
#   video ->  crates/pe-testkit/fixtures/video/<case>.json + <case>.safetensors: diffusers' 3-D rotary tables of Wan,
#             HunyuanVideo, CogVideoX (crop rule and slice grids), LTX-Video and LTX-2 (fractional coordinates,
#             rope_double_precision, interleaved and split), and LTX-2's split layout applied by
#             apply_split_rotary_emb to tiny queries.
#   qwen_vl -> crates/pe-testkit/fixtures/qwen_vl/<case>/{config.json, positions.json, positions.safetensors}: the
#             M-RoPE position ids and rope_deltas of transformers' Qwen2-VL, Qwen2.5-VL and Qwen3-VL get_rope_index on
#             tiny configs (images, videos, second_per_grid_ts, left padding); <case>_generate/{config.json,
#             generate.json, generate.safetensors}: the position ids generate feeds the language model of tiny
#             random full models at prefill and each decode step.
#
#   real_models -> crates/pe-testkit/fixtures/real/<stem>.json: llama.cpp (llama-cpp-python) and transformers' GGUF
#             loader on the real GGUF files of scripts/real-models.sh (run it first): tokenization, the chat template,
#             32 greedy steps with their top-10 logits, at far positions too (its own venv: llama-cpp-python built
#             from source, which takes a while).
#
#   sink  ->  crates/pe-testkit/fixtures/sink/<case>/{config.json, model.safetensors, outputs.json}: greedy ids of
#             transformers 4.52.4's SinkCache on tiny random Llamas (llama3 rope; a short context generated past).
#
# A generator with its own pins, scripts/fixtures/requirements-<name>.txt (sink: transformers 4.52.4), runs in a venv of
# its own, <venv>-<name>, made and kept up to date the same way.
#
# Nothing is downloaded except the pinned packages: configs are written in the generators, and the Hub is switched
# off (HF_HUB_OFFLINE). Outputs are deterministic on one machine, so regenerating there with unchanged pins leaves
# `git status` clean; another CPU may change the models' recorded logits in their last bits (seen: up to 2.3e-6 in
# the recorded checks between an Intel Xeon and an AMD EPYC), so regenerate only the cases you changed
# (python scripts/fixtures/models.py qwen3, say, with the venv's python).
#
# Adding a generator: drop scripts/fixtures/<name>.py (runnable as a script, writing its own files; shared helpers
# are in scripts/fixtures/_common.py, and files starting with `_` are not generators) and it runs with the others.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
dir="$root/scripts/fixtures"
requirements="$dir/requirements.txt"
venv=${FIXTURES_VENV:-"${XDG_CACHE_HOME:-$HOME/.cache}/candle-pe/fixtures-venv"}

# ensure_venv VENV REQUIREMENTS: creates VENV, or reinstalls it when REQUIREMENTS changed.
ensure_venv() {
    local venv=$1 requirements=$2
    local want stamp
    want=$(sha256sum "$requirements" | cut -d' ' -f1)
    stamp="$venv/.requirements.sha256"
    if [ ! -x "$venv/bin/python" ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
        echo "setting up $venv from ${requirements#"$root/"}" >&2
        python3 -m venv "$venv"
        # llama-cpp-python (requirements-real_models.txt) is built from source by pip. Its default, GGML_NATIVE=ON,
        # builds for whatever the compiler detects; on the machines these fixtures were made on that produced AMX tile
        # code that died with SIGILL (in tilezero) at run time, so name the instruction sets instead (AVX2, FMA, F16C:
        # every x86-64 CPU of the last decade). The other pins are wheels and ignore it. Set CMAKE_ARGS to override.
        CMAKE_ARGS=${CMAKE_ARGS:-"-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON"} \
            "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$requirements"
        echo "$want" >"$stamp"
    fi
}

if [ $# -eq 0 ]; then
    names=()
    for script in "$dir"/*.py; do
        base=$(basename "$script" .py)
        case $base in _*) continue ;; esac
        names+=("$base")
    done
else
    names=("$@")
fi

export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1 PYTHONDONTWRITEBYTECODE=1
for name in "${names[@]}"; do
    script="$dir/$name.py"
    if [ ! -f "$script" ] || [[ $name == _* ]]; then
        echo "no generator scripts/fixtures/$name.py" >&2
        exit 2
    fi
    python=$venv/bin/python
    if [ -f "$dir/requirements-$name.txt" ]; then
        ensure_venv "$venv-$name" "$dir/requirements-$name.txt"
        python=$venv-$name/bin/python
    else
        ensure_venv "$venv" "$requirements"
    fi
    echo "== $name" >&2
    (cd "$root" && "$python" "$script")
done
