//! Reads the positional encodings of checkpoints for [`candle_pe_core`]: HF `config.json` as
//! transformers reads it, GGUF metadata as llama.cpp reads it, and Qwen-VL's position ids from
//! the input ids and the vision grids.
//!
//! This crate is the format layer (`docs/layers.md`): it knows the keys, the model types and the
//! architectures, and builds the engine's descriptions ([`RopeConfig`](candle_pe_core::RopeConfig),
//! [`RopeType`](candle_pe_core::RopeType), [`QueryScale`](candle_pe_core::QueryScale)); the
//! engine computes the tables and knows no format. Each format's knowledge is a table of data
//! read by short functions, in two folders:
//!
//! - `hf/`: HF `config.json`. `config_fields.rs` ([`ConfigFields`], the typed reader of JSON
//!   fields behind every error that names a field), `model_types.rs` (one [`HfModelType`] row
//!   per `model_type`; [`HfTextConfig`] finds the text model's fields), `rope_dicts.rs` (how a
//!   rope dict names and spells each rope type), `config.rs` ([`FromHfConfig`], a model's
//!   ropes per layer, [`RopeConfigs`](candle_pe_core::RopeConfigs)), `sinusoidal.rs`
//!   (candle-pe-nn's [`SinusoidalEmbeddingConfig`](candle_pe_nn::SinusoidalEmbeddingConfig)),
//!   `qwen_vl.rs` ([`QwenVlConfig`] and [`QwenVlPositions`]: Qwen-VL's M-RoPE position ids from
//!   the input ids and the vision grids); [`HfRope`] is a config's ropes with where each value
//!   came from;
//! - `gguf/`: GGUF metadata. `arch.rs` (one row per `general.architecture`: pair layout, head
//!   width, the quirks), `meta.rs` ([`GgufMeta`], the one reader of metadata values),
//!   `converter.rs` (llama.cpp's converter's f32 arithmetic, to read its values back exactly),
//!   `rope.rs` ([`GgufRope`] and [`FromGguf`]: a file's ropes);
//! - `value_source.rs`: [`ValueSource`], where a value came from, as both readers record it;
//! - `error.rs`: [`Error`], the engine's errors and the readers' own (a field missing or given
//!   twice, a GGUF key, Qwen-VL's vision tokens).
//!
//! ```
//! use candle_core::{DType, Device};
//! use candle_pe_core::{Rope, RopeConfig};
//! use candle_pe_formats::FromHfConfig;
//!
//! // The relevant fields of a Llama 3.1 config.json.
//! let json = r#"{"hidden_size": 4096, "num_attention_heads": 32, "rope_theta": 500000.0,
//!   "max_position_embeddings": 131072,
//!   "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
//!                    "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}}"#;
//! let config = RopeConfig::from_hf_config(&serde_json::from_str(json)?)?;
//! let (cos, _sin) = Rope::new(config)?.range(100_000, 16, DType::BF16, &Device::Cpu)?;
//! assert_eq!(cos.dims(), &[16, 64]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![warn(missing_docs)]

mod error;
mod gguf;
mod hf;
mod rope_override;
mod value_source;

pub use error::{Error, Result};
pub use gguf::{FreqFactors, FromGguf, GgufMeta, GgufRope};
pub use hf::{
    ConfigFields, FromHfConfig, HfConfig, HfModelType, HfRope, HfTextConfig, LegacyUses,
    QwenVlConfig, QwenVlPositions, QwenVlVersion, Sliding, VisionLayout, VisionRopeConfig,
};
pub use rope_override::{RopeOverride, RopeScaling};
pub use value_source::ValueSource;
