//! Rotary position embeddings: the cos/sin tables of `candle_nn::rotary_emb::{rope, rope_i,
//! rope_thd}`, exact at every position below 2^31, for the rope types real checkpoints use
//! (`candle-pe-formats` reads them from a `config.json` or a GGUF file).
//!
//! - `config.rs`: [`RopeConfig`], one rope described with the names of `config.json`;
//! - `configs.rs`: [`RopeConfigs`], a model's ropes per layer (per layer type, NoPE layers);
//! - `layouts.rs`: [`PairLayout`] (which channels turn together) and [`MropeSlots`] (which axis
//!   each M-RoPE slot reads);
//! - `types.rs`: each rope type's parameters and frequency formula ([`RopeType`]);
//! - `at.rs`: [`At`], where the tokens of a call sit (an offset, per-token or M-RoPE positions);
//! - `tables.rs`: [`Rope`], a checked config that builds the tables (M-RoPE's from 3-D ids too);
//! - `query_scale.rs`: [`QueryScale`], a factor on the queries per position (query temperature),
//!   and `scales.rs` its tensors;
//! - `cache.rs`: [`RopeCache`], the tables kept per device and dtype, served as views;
//! - `shift.rs`: the tables of the turn that moves keys rotated at one position to another.
//!
//! ```
//! use candle_core::{DType, Device};
//! use candle_pe_core::{Llama3, Rope, RopeConfig, RopeType};
//!
//! // Llama 3.1's rope.
//! let llama31 = RopeType::Llama3(Llama3 {
//!     factor: 8.0,
//!     low_freq_factor: 1.0,
//!     high_freq_factor: 4.0,
//!     original_max_position_embeddings: 8192,
//! });
//! let rope = Rope::new(RopeConfig::new(128, 500_000.0).with_rope_type(llama31))?;
//! let (cos, sin) = rope.range(100_000, 16, DType::BF16, &Device::Cpu)?;
//! assert_eq!(cos.dims(), &[16, 64]);
//! assert_eq!(sin.dims(), &[16, 64]);
//! # Ok::<(), candle_pe_core::Error>(())
//! ```

mod at;
mod axes;
mod cache;
mod config;
mod configs;
mod layouts;
mod query_scale;
mod scales;
mod shift;
mod tables;
mod types;
mod without_tables;

pub use at::{At, Place};
pub use axes::{cogvideox_coordinates, patch_positions, video_patch_positions, AxesRope};
pub use cache::RopeCache;
pub use config::{RopeConfig, DEFAULT_ROPE_THETA};
pub use configs::{RopeConfigs, MAX_LAYERS};
pub use layouts::{MropeSlots, PairLayout};
pub use query_scale::QueryScale;
pub use tables::Rope;
pub use types::{
    Dynamic, LinearScaling, Llama3, Longrope, LongropePolicy, NtkAlpha, Proportional, RopeType,
    Yarn,
};
