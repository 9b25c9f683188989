//! candle-pe: exact positional encodings for candle, in every framework's convention.
//!
//! This crate re-exports the workspace's library crates under one name:
//! - [`core`] (`candle-pe-core`): specs, presets, rotary configs, exact table generation on any
//!   device, and the caches;
//! - [`nn`] (`candle-pe-nn`): the embedding block and the rotary embedding for candle-nn
//!   pipelines.
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

pub use pe_core as core;
pub use pe_nn as nn;

#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
