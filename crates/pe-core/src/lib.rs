//! Exact positional encodings for candle, on any device: sinusoidal tables (Vaswani et al. 2017)
//! in every convention real checkpoints use, and rotary (RoPE) tables for the rope types of HF
//! `config.json`.
//!
//! The crate reads in four layers, data flowing one way (`docs/layers.md` draws them):
//! - **Exact arithmetic** (`exact/`, internal): double-double numbers and the sine and cosine
//!   of an exact angle, which the frequencies and the CPU generator's anchors are computed with.
//! - **Description** (`describe/`, `rope/config.rs`, `rope/configs.rs`, `rope/layouts.rs`,
//!   `rope/types.rs`): [`PeSpec`] and its [`Preset`]s (the sinusoidal conventions, see
//!   `docs/conventions.md`), frequencies, positions, [`Error`]; for rotary tables,
//!   [`RopeConfig`] (with its [`PairLayout`] and [`MropeSlots`]), a model's [`RopeConfigs`] per
//!   layer, and each [`RopeType`]'s formula.
//! - **Generators** (`generate/`, internal): an exact CPU generator (anchor rows at fixed
//!   positions plus an offset table, in parallel) and its plain twin in candle ops for every
//!   other device; chosen with [`TableBackend`].
//! - **Front doors**: [`SinusoidalEncoding`] (tables for ranges, positions, padding-aware
//!   positions, timesteps), [`PeCache`] (a shared growing table served as views, and
//!   [`embed`](PeCache::embed), the fused `embedding_scale * embedding + encoding`), [`Rope`] and
//!   [`RopeCache`] (cos and sin tables), [`AxesRope`] (multi-axis rotary tables, FLUX,
//!   Pixtral's vision tower), [`SincosGrid`] (2-D sin-cos patch grids, DiT / PixArt / MAE) and
//!   [`Alibi`] (ALiBi slopes and biases).
//!
//! Every value is within 1e-6 of the exact real-number value in f32 (1e-9 in f64, within one
//! unit in the last place in f16 and bf16) at any position below 2^31, and depends only on what
//! it is (spec, position, column, dtype): never on the request's shape, the cache's history or
//! the thread that computed it.
//!
//! ```
//! use candle_core::{DType, Device};
//! use candle_pe_core::{PeSpec, Rope, RopeConfig, SinusoidalEncoding};
//!
//! let pe = SinusoidalEncoding::new(PeSpec::vaswani(6))?;
//! let row = pe.range(11, 1, DType::F64, &Device::Cpu)?.squeeze(0)?.to_vec1::<f64>()?;
//! // burn's and keras-hub's reference row for position 11.
//! let expected = [-0.99999, 0.00443, 0.48868, 0.87246, 0.02370, 0.99972];
//! for (got, want) in row.iter().zip(expected) {
//!     assert!((got - want).abs() < 1e-5);
//! }
//!
//! // Rotary tables for heads of 128 with rope_theta 500000, at positions 2^31 - 8 ..= 2^31 - 1.
//! let rope = Rope::new(RopeConfig::new(128, 500_000.0))?;
//! let (cos, sin) = rope.range((1 << 31) - 8, 8, DType::F32, &Device::Cpu)?;
//! assert_eq!(cos.dims(), &[8, 64]);
//! # Ok::<(), candle_pe_core::Error>(())
//! ```

#![warn(missing_docs)]

/// The kernels' folder (`src/cuda/`): candle-pe-nn's rotation kernel loads through it.
#[doc(hidden)]
pub mod cuda;
mod describe;
mod exact;
mod generate;

mod alibi;
mod cache;
mod embed;
mod encoding;
mod grid;
mod rope;
mod row_cache;

pub use alibi::{Alibi, DEFAULT_ALIBI_BIAS_MAX};
pub use cache::{PeCache, DEFAULT_CACHE_ROWS};
pub use describe::error::{error_in, Error, Result};
pub use describe::freq::{Column, MAX_ANGLE, MAX_POSITION, MAX_WIDTH};
pub use describe::positions::{check_tokens, padding_aware_positions, Positions, ToPositions};
pub use describe::spec::{ColumnLayout, Frequencies, OddWidth, PeSpec, Preset, DEFAULT_BASE};
pub use embed::TokenPositions;
pub use encoding::SinusoidalEncoding;
pub use generate::TableBackend;
pub use grid::{SincosGrid, SincosGrid3d, DEFAULT_BASE_SIZE};
pub use rope::{
    cogvideox_coordinates, patch_positions, video_patch_positions, At, AxesRope, Dynamic,
    LinearScaling, Llama3, Longrope, LongropePolicy, MropeSlots, NtkAlpha, PairLayout, Place,
    Proportional, QueryScale, Rope, RopeCache, RopeConfig, RopeConfigs, RopeType, Yarn,
    DEFAULT_ROPE_THETA, MAX_LAYERS,
};
