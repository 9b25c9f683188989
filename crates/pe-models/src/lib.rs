//! Reference models built only from candle-nn layers and candle-pe's exact positional
//! encodings, checked against transformers 5.23's outputs (`tests/transformers.rs`,
//! `tests/m2m100.rs`, the fixtures in `crates/pe-testkit/fixtures/models`): decoders with rotary
//! embeddings ([`candle_pe_nn::RotaryEmbedding`]) and an encoder with sinusoidal ones
//! ([`candle_pe_nn::SinusoidalEmbedding`]).
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

mod avx2_matmul;
mod config;
mod family;
mod generate;
pub mod generate_cli;
mod gguf;
mod gguf_vocab;
mod kv_buffer;
mod layers;
mod llama;
mod m2m100;
mod pre_tokenizers;
mod proj;
mod stream;
mod tokenizer;

pub use avx2_matmul::quantized_matmul;
pub use config::{eos_token_ids, LayerType, LlamaConfig, M2M100Config, ModelType};
pub use family::{Bias, Family, Window, FAMILIES};
pub use generate::{greedy, Generation};
pub use gguf::gguf_eos_token_ids;
pub use llama::LlamaFamily;
pub use m2m100::M2M100Encoder;
pub use stream::{CachePolicy, SinkPositions};
pub use tokenizer::{ChatMessage, TextTokenizer};
