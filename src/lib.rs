//! candle-pe: exact sinusoidal positional encodings for candle, in every framework's convention.
//!
//! This crate re-exports the workspace's crates under one name and holds the baseline the
//! benchmarks and examples compare against:
//! - [`core`] (`pe-core`): specs, presets, table generation on any device, and the cache;
//! - [`nn`] (`pe-nn`): the token embedding + scale + positional encoding block for candle-nn;
//! - [`baseline`]: the inexact f32 construction that candle-transformers uses today.
//!
//! ```
//! use candle_pe::core::{PeSpec, SinusoidalEncoding};
//!
//! let pe = SinusoidalEncoding::new(PeSpec::whisper(384))?;
//! let table = pe.range(0, 1500, candle_core::DType::F32, &candle_core::Device::Cpu)?;
//! assert_eq!(table.dims(), &[1500, 384]);
//! # Ok::<(), pe_core::Error>(())
//! ```

#![warn(missing_docs)]

pub mod baseline;

pub use pe_core as core;
pub use pe_nn as nn;

#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
