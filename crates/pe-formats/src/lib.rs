//! Reads the positional encodings of checkpoints for [`candle_pe_core`]: HF `config.json` as
//! transformers reads it, GGUF metadata as llama.cpp reads it, and Qwen-VL's position ids from
//! the input ids and the vision grids.
//!
//! This crate is the format layer (`docs/layers.md`): it knows the keys, the model types and the
//! architectures, and builds the engine's descriptions ([`RopeConfig`](candle_pe_core::RopeConfig),
//! [`RopeType`](candle_pe_core::RopeType), [`QueryScale`](candle_pe_core::QueryScale)); the
//! engine computes the tables and knows no format. Each format's knowledge is a table of data
//! read by short functions:
//!
//! - `model_types.rs`: one [`HfModelType`] row per HF `model_type` (defaults, layer types,
//!   which rope type a dict reads as); [`HfTextConfig`] finds the text model's fields;
//! - `rope_dicts.rs`: how a rope dict names and spells each rope type;
//! - `config.rs`: [`RopeConfigs`] (a model's ropes per layer) and [`FromHfConfig`];
//! - `config_fields.rs`: [`ConfigFields`], the typed reader of JSON fields behind every error
//!   that names a field;
//! - `gguf_arch.rs`: one row per GGUF `general.architecture` (pair layout, head width, quirks);
//! - `gguf_meta.rs`: [`GgufMeta`], the one reader of GGUF metadata values;
//! - `gguf.rs`: [`GgufRope`] and [`FromGguf`], a GGUF file's ropes;
//! - `qwen_vl.rs`: [`QwenVlConfig`] and [`QwenVlPositions`], M-RoPE position ids.
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

mod config;
mod config_fields;
mod gguf;
mod gguf_arch;
mod gguf_meta;
mod model_types;
mod qwen_vl;
mod rope_dicts;

use candle_pe_core::{Error, Result};

pub use config::{FromHfConfig, RopeConfigs};
pub use config_fields::ConfigFields;
pub use gguf::{FreqFactors, FromGguf, GgufRope, PairLayout, ValueSource};
pub use gguf_meta::GgufMeta;
pub use model_types::{HfModelType, HfTextConfig, QwenVlVersion};
pub use qwen_vl::{QwenVlConfig, QwenVlPositions};
