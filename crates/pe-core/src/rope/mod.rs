//! Rotary position embeddings: the cos/sin tables of `candle_nn::rotary_emb::{rope, rope_i,
//! rope_thd}`, exact at every position below 2^31, for the rope types real checkpoints use,
//! read from an HF `config.json`.
//!
//! - `config.rs`: [`RopeConfig`], in the words of `config.json`, and how it is read, and
//!   [`RopeConfigs`], a model's ropes per layer (Gemma 3 and 4 have one per layer type);
//! - `gguf.rs`: [`GgufRope`], the same configs read from a GGUF file's metadata and rope
//!   tensors, with the pair layout of its weights;
//! - `types.rs`: each rope type's parameters and frequency formula ([`RopeType`]);
//! - `tables.rs`: [`Rope`], a checked config that builds the tables (M-RoPE's from 3-D ids too);
//! - `query_scale.rs`: [`QueryScale`], a factor on the queries per position (query temperature),
//!   and `scales.rs` its tensors;
//! - `cache.rs`: [`RopeCache`], the tables kept per device and dtype, served as views;
//! - `shift.rs`: the tables of the turn that moves keys rotated at one position to another.
//!
//! ```
//! use candle_core::{DType, Device};
//! use candle_pe_core::{Rope, RopeConfig};
//!
//! // The relevant fields of a Llama 3.1 config.json.
//! let json = r#"{"hidden_size": 4096, "num_attention_heads": 32, "rope_theta": 500000.0,
//!   "max_position_embeddings": 131072,
//!   "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
//!                    "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}}"#;
//! let config = RopeConfig::from_hf_config(&serde_json::from_str(json).unwrap())?;
//! let rope = Rope::new(config)?;
//! let (cos, sin) = rope.range(100_000, 16, DType::BF16, &Device::Cpu)?;
//! assert_eq!(cos.dims(), &[16, 64]);
//! assert_eq!(sin.dims(), &[16, 64]);
//! # Ok::<(), candle_pe_core::Error>(())
//! ```

mod axes;
mod cache;
mod config;
mod gguf;
mod query_scale;
mod qwen_vl;
mod scales;
mod shift;
mod tables;
mod types;

pub use axes::{cogvideox_coordinates, patch_positions, video_patch_positions, AxesRope};
pub use cache::RopeCache;
pub use config::{RopeConfig, RopeConfigs, DEFAULT_ROPE_THETA};
pub use gguf::{FreqFactors, GgufRope, PairLayout, ValueSource};
pub use query_scale::QueryScale;
pub use qwen_vl::{QwenVlConfig, QwenVlPositions};
pub use tables::Rope;
pub use types::{
    Dynamic, LinearScaling, Llama3, Longrope, LongropePolicy, NtkAlpha, Proportional, RopeType,
    Yarn,
};
