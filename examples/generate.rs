//! Greedy generation from a local Hugging Face Llama-family checkpoint (`model_type` `llama`,
//! `qwen2`, `qwen3`, `phi3`, `mistral`, `gemma3_text`, `smollm3`, `ministral3` or dense
//! `llama4_text`) with pe-models' `LlamaFamily`: the prompt's token ids in, the new ids out, on
//! the CPU or, built with `--features cuda`, an NVIDIA GPU (`--device cuda`). Without `--model`
//! it runs the tiny random Llama 3.1 test fixture (`crates/pe-testkit/fixtures/models/llama31`).
//!
//! ```text
//! cargo run --release --example generate -- --model DIR --prompt-ids 1,2,3 --max-new 32
//! ```
//!
//! Text in and out: `--prompt TEXT` (tokenized by the checkpoint's tokenizer, a GGUF file's or
//! the folder's `tokenizer.json`, as llama.cpp does by default) or `--chat TEXT` (one user
//! message through the checkpoint's chat template) instead of `--prompt-ids`; the new text is
//! printed as `text: ...` after the ids (docs/models.md).
//!
//! ```text
//! cargo run --release --example generate -- --model FILE.gguf --prompt "Once upon a time" --max-new 32
//! ```
//!
//! `--sink N --window W [--sink-positions contiguous|transformers]` bounds the KV cache to the
//! first N and the last W tokens (StreamingLLM, or transformers 4.52.4's `SinkCache`), and
//! `--keep N [--context-size C]` shifts the context as llama.cpp does when it is full: either
//! generates past the model's context (docs/cache-surgery.md).
//!
//! Generation stops after `--max-new` tokens or at an end-of-sequence id (`--eos`; by default
//! the checkpoint's `eos_token_id`, as transformers' `generate` reads it).
//!
//! stdout holds `ids: <new ids>` (the prompt excluded, an end-of-sequence id that stopped it
//! included), with `--prompt` / `--chat` then `text: <the new ids decoded, as a JSON
//! string>`, then, when something was generated, the prefill's and the decode's speed; the
//! model line, the progress bar and errors (one line, naming the flag and the file or field;
//! exit code 2 for a bad command line, 1 for anything else) go to stderr.

fn main() -> std::process::ExitCode {
    pe_models::generate_cli::main(&pe_testkit::fixture("models/llama31"))
}
