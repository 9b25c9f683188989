//! Reference models built only from candle-nn layers and candle-pe's exact positional
//! encodings, checked against transformers 5.24's outputs (`tests/transformers.rs`,
//! `tests/m2m100.rs`, the fixtures in `crates/pe-testkit/fixtures/models`): decoders with rotary
//! embeddings ([`candle_pe_nn::RotaryEmbedding`]) and an encoder with sinusoidal ones
//! ([`candle_pe_nn::SinusoidalEmbedding`]). They are the proof that candle-pe's encodings give
//! transformers' models their outputs; everything else here serves that proof.
//!
//! [`LlamaFamily`] reads an HF `config.json` with `model_type` `llama`, `qwen2`, `qwen3`,
//! `phi3`, `mistral`, `gemma3_text`, `smollm3` (NoPE layers), `ministral3` (query scale by
//! position) or a dense `llama4_text` (NoPE layers with a query temperature, chunked
//! attention), or the language model of `qwen2_vl`, `qwen2_5_vl` or `qwen3_vl` (M-RoPE)
//! ([`LlamaConfig`]) and the weights under HF's tensor names from a
//! [`candle_nn::VarBuilder`]; its [`forward`](LlamaFamily::forward) takes `input_ids`,
//! `position_ids` and an optional `attention_mask`, as transformers' does, and appends to a
//! KV cache. [`greedy`] generates from a prompt with that cache, at any first position; a
//! [`CachePolicy`] bounds the cache (attention sinks and a window, or llama.cpp's context
//! shift) so that generation runs past the model's context.
//!
//! [`M2M100Encoder`] reads an M2M100 / NLLB `config.json` (`model_type` `m2m_100`,
//! [`M2M100Config`]) and the encoder's weights; its [`forward`](M2M100Encoder::forward) takes
//! `input_ids` and an optional `attention_mask` and returns `last_hidden_state`, with fairseq's
//! padding-aware positions (see its module's example).
//!
//! # Map
//!
//! The proof:
//!
//! - `llama/`: the decoder. `mod.rs` is [`LlamaFamily`] (attention, MLP, layers, masks, the
//!   KV cache); `family.rs` one [`Family`] row per family; `config.rs` reads `config.json`
//!   into [`LlamaConfig`], `gguf.rs` a GGUF file (both look the family row up and name no
//!   family); `kv_buffer.rs` is the cache's storage.
//! - `m2m100/`: the encoder (`mod.rs`) and its [`M2M100Config`] (`config.rs`).
//! - `layers.rs`: the candle-nn layers both load (linear, norms) and the masked softmax;
//!   `checkpoint.rs`: a checkpoint folder's files (weights, configs, end-of-sequence ids).
//!
//! The runtime, which serves the proof (running real checkpoints fast and long enough to be
//! compared) and is not part of it:
//!
//! - `llama/cache_policy.rs` ([`CachePolicy`]: which tokens a bounded cache keeps, at which
//!   positions), `llama/streaming.rs` (the decoder under a policy: it moves each layer's
//!   cached keys before the layers run) and `llama/unrotated.rs` (the keys before rotation that
//!   a policy rotates again).
//! - `quant/`: the projections, dense or quantized, and candle's quantized product with AVX2
//!   integer sums ([`quantized_matmul`]).
//! - `text/`: [`TextTokenizer`] (a `tokenizer.json`, or a GGUF vocabulary as llama.cpp
//!   tokenizes it) and the chat templates ([`ChatMessage`]).
//! - `generate.rs` ([`greedy`]) and `generate_cli.rs` (the `generate` example's command line).
//!
//! No two files import each other (`tests/layout.rs`).
//!
//! ```
//! use candle_core::{DType, Device, Tensor};
//! use pe_models::LlamaFamily;
//!
//! let dev = Device::Cpu;
//! let dir = pe_testkit::fixture("models/llama31");
//! let mut model = LlamaFamily::from_dir(dir, DType::F32, &dev)?;
//!
//! // Prefill two left-padded prompts: positions count real tokens only (pads at 0).
//! let ids = Tensor::new(&[[5u32, 6, 7, 8], [0, 0, 9, 10]], &dev)?;
//! let mask = Tensor::new(&[[1u32, 1, 1, 1], [0, 0, 1, 1]], &dev)?;
//! let pos = Tensor::new(&[[0u32, 1, 2, 3], [0, 0, 0, 1]], &dev)?;
//! let logits = model.forward(&ids, &pos, Some(&mask))?; // (2, 4, vocab)
//!
//! // One greedy step with the KV cache: the mask grows by a column of ones.
//! let next = logits.narrow(1, 3, 1)?.argmax(2)?; // (2, 1)
//! let mask = Tensor::cat(&[&mask, &Tensor::ones((2, 1), DType::U32, &dev)?], 1)?;
//! let pos = Tensor::new(&[[4u32], [2]], &dev)?;
//! let step = model.forward(&next, &pos, Some(&mask))?;
//! assert_eq!(step.dims(), &[2, 1, model.config().vocab_size]);
//! model.clear_cache();
//! # Ok::<(), anyhow::Error>(())
//! ```

#![warn(missing_docs)]

mod checkpoint;
mod generate;
pub mod generate_cli;
mod layers;
mod llama;
mod m2m100;
mod quant;
mod text;

pub use checkpoint::{eos_token_ids, gguf_eos_token_ids};
pub use generate::{greedy, Generation};
pub use llama::{
    Bias, CachePolicy, Family, LayerType, LlamaConfig, LlamaFamily, ModelType, SinkPositions,
    Window, FAMILIES,
};
pub use m2m100::{M2M100Config, M2M100Encoder};
pub use quant::quantized_matmul;
pub use text::{ChatMessage, TextTokenizer};
