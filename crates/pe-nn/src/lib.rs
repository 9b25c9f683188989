//! The embedding block that starts every encoder and decoder: token embedding, an optional
//! `sqrt(d)` (or any) scale, and an exact sinusoidal positional encoding from pe-core, built
//! from a `candle_nn::VarBuilder` like any candle-nn layer; and [`RotaryEmbedding`], which
//! rotates queries and keys with exact rotary tables, in `(batch, heads, seq, head_dim)` or
//! `(tokens, heads, head_dim)`, at consecutive or per-token positions, and moves cached keys to
//! other positions exactly ([`RotaryEmbedding::shift`]); [`GridEmbedding`], a
//! fixed 2-D sin-cos grid added to patch embeddings; [`AxesRotaryEmbedding`], multi-axis
//! rotary embeddings (FLUX); and [`AlibiBias`], ALiBi added to attention scores.
//!
//! ```
//! use candle_core::{DType, Device, Module, Tensor};
//! use candle_nn::{VarBuilder, VarMap};
//! use candle_pe_nn::{sinusoidal_embedding, Preset, SinusoidalEmbeddingConfig};
//!
//! let dev = Device::Cpu;
//! let varmap = VarMap::new();
//! let vb = VarBuilder::from_varmap(&varmap, DType::F32, &dev);
//! // M2M100 / NLLB: fairseq frequencies, padding-aware positions (pad = 1), sqrt(d) scale.
//! let cfg = SinusoidalEmbeddingConfig::for_preset(Preset::Fairseq);
//! let embed = sinusoidal_embedding(1000, 64, cfg, vb.pp("model.encoder.embed_tokens"))?;
//! let ids = Tensor::new(&[[1u32, 1, 5, 6], [5, 6, 7, 8]], &dev)?; // left-padded
//! assert_eq!(embed.forward(&ids)?.dims(), &[2, 4, 64]);
//! # Ok::<(), candle_core::Error>(())
//! ```
//!
//! Where each block lives (modules are private; every item is at the crate's root):
//!
//! - `embedding.rs`, `config.rs`: [`SinusoidalEmbedding`] and its config;
//! - `rotary/`: [`RotaryEmbedding`], one concept per file (`rotary/mod.rs` gives the map): the
//!   type and its checks, `apply`, M-RoPE, `shift`, the rotation, the CPU's one pass over the
//!   cached rows and the CUDA kernel;
//! - `layer_rotary.rs`: [`LayerRotary`], one layer's rotary or NoPE, and [`layer_rotaries`];
//! - `axes.rs`: [`AxesRotaryEmbedding`];
//! - `grid.rs`: [`GridEmbedding`];
//! - `alibi.rs`: [`AlibiBias`].
//!
//! The rotary blocks ([`RotaryEmbedding`], [`LayerRotary`]) take where the tokens sit as one
//! argument, [`At`]: an offset (a `usize`), per-token positions (a `&Tensor` or `&Positions`),
//! or M-RoPE's (`At::mrope`).

#![warn(missing_docs)]

mod alibi;
mod axes;
mod config;
mod embedding;
mod grid;
mod layer_rotary;
mod rotary;

pub use alibi::AlibiBias;
pub use axes::AxesRotaryEmbedding;
pub use config::{EmbeddingScale, PositionMode, SinusoidalEmbeddingConfig, StoredTable};
pub use embedding::{sinusoidal_embedding, SinusoidalEmbedding};
pub use grid::GridEmbedding;
pub use layer_rotary::{layer_rotaries, LayerRotary};
pub use rotary::RotaryEmbedding;

// The pe-core items this crate's public API takes or returns, so that a user of
// the blocks needs no second dependency to name them.
pub use candle_pe_core::{
    cogvideox_coordinates, patch_positions, video_patch_positions, Alibi, At, AxesRope,
    ColumnLayout, Frequencies, MropeSlots, OddWidth, PairLayout, PeCache, PeSpec, Place, Positions,
    Preset, QueryScale, Rope, RopeCache, RopeConfig, RopeConfigs, RopeType, SincosGrid,
    TableBackend, ToPositions,
};
