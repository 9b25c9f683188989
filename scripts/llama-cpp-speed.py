"""llama.cpp's greedy decode speed on a GGUF file, for comparing with our own benchmark on the same machine.

Usage (with the venv of scripts/fixtures/requirements-real_models.txt, which `bash scripts/make-fixtures.sh
real_models` makes at ~/.cache/candle-pe/fixtures-venv-real_models):

    <venv>/bin/python scripts/llama-cpp-speed.py FILE.gguf [--rounds R] [--steps 64] [--threads 2] [--prefill 512]

Each round makes a fresh context, evaluates the prompt "The capital of France is" (tokenize add_bos=True,
special=True) as one batch, then decodes --steps tokens greedily (argmax of the raw logits), one llama_decode per
token. Only the decode steps are timed (not the prompt). Then, in another fresh context, it times the prefill of
--prefill prompt ids (the prompt's, repeated) as one batch, the logits of the last alone. Prints each round's
tokens/s and the medians, on stdout:
    round 1: 123.4 tok/s, prefill 456.7 tok/s
    ...
    median: 123.4 tok/s (FILE, 64 steps, 2 threads, llama-cpp-python X)
    median prefill: 456.7 tok/s (512 tokens)
"""

import argparse
import ctypes
import statistics
import time

import numpy as np

import llama_cpp

PROMPT = "The capital of France is"


@llama_cpp.llama_log_callback
def _quiet(level, text, user_data):
    if level == 4:  # GGML_LOG_LEVEL_ERROR only
        print(text.decode("utf-8", "replace"), end="")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("file")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=64)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--prefill", type=int, default=512)
    args = parser.parse_args()
    llama_cpp.llama_log_set(_quiet, ctypes.c_void_p(0))
    size = max(512, args.prefill)
    llm = llama_cpp.Llama(model_path=args.file, n_ctx=size, n_batch=size, n_ubatch=size, n_threads=args.threads,
                          n_threads_batch=args.threads, verbose=False)
    ids = llm.tokenize(PROMPT.encode(), add_bos=True, special=True)
    n_vocab = llm.n_vocab()
    long = (ids * (args.prefill // len(ids) + 1))[:args.prefill]
    speeds, prefills = [], []
    for r in range(args.rounds):
        ctx = llama_cpp.llama_init_from_model(llm._model.model, llm.context_params)
        batch = llama_cpp.llama_batch_init(size, 0, 1)

        def decode(tokens, pos0):
            batch.n_tokens = len(tokens)
            for i, t in enumerate(tokens):
                batch.token[i], batch.pos[i], batch.n_seq_id[i] = t, pos0 + i, 1
                batch.seq_id[i][0] = 0
                batch.logits[i] = i == len(tokens) - 1
            if llama_cpp.llama_decode(ctx, batch) != 0:
                raise SystemExit("llama_decode failed")
            return np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(ctx, len(tokens) - 1), shape=(n_vocab,))

        logits = decode(ids, 0)
        pos = len(ids)
        start = time.perf_counter()
        for _ in range(args.steps):
            tok = int(np.argmax(logits))
            logits = decode([tok], pos)
            pos += 1
        elapsed = time.perf_counter() - start
        llama_cpp.llama_free(ctx)
        speeds.append(args.steps / elapsed)
        ctx = llama_cpp.llama_init_from_model(llm._model.model, llm.context_params)
        start = time.perf_counter()
        decode(long, 0)
        prefills.append(len(long) / (time.perf_counter() - start))
        llama_cpp.llama_batch_free(batch)
        llama_cpp.llama_free(ctx)
        print(f"round {r + 1}: {speeds[-1]:.1f} tok/s, prefill {prefills[-1]:.1f} tok/s", flush=True)
    print(f"median: {statistics.median(speeds):.1f} tok/s ({args.file}, {args.steps} steps, {args.threads} threads, "
          f"llama-cpp-python {llama_cpp.__version__})")
    print(f"median prefill: {statistics.median(prefills):.1f} tok/s ({len(long)} tokens)")


if __name__ == "__main__":
    main()
