//! candle-pe: exact positional encodings for candle, in every framework's convention.
//!
//! The one dependency most pipelines need: every public item of
//! [`candle-pe-core`](candle_pe_core) (specs, presets, rotary configs, exact tables on any
//! device, the caches), of [`candle-pe-formats`](candle_pe_formats) (the readers of HF
//! `config.json` and GGUF metadata) and of [`candle-pe-nn`](candle_pe_nn) (the blocks a model
//! builds from a `VarBuilder`) is re-exported here, at the root.
//!
//! ```
//! use candle_pe::{PeSpec, SinusoidalEncoding};
//!
//! let pe = SinusoidalEncoding::new(PeSpec::whisper(384))?;
//! let table = pe.range(0, 1500, candle_core::DType::F32, &candle_core::Device::Cpu)?;
//! assert_eq!(table.dims(), &[1500, 384]);
//! # Ok::<(), candle_pe::Error>(())
//! ```

#![warn(missing_docs)]

pub use candle_pe_core::*;
pub use candle_pe_formats::*;
pub use candle_pe_nn::*;
// Both crates name their error `Error`: the engine's is `candle_pe::Error`, the readers' (which
// carries the engine's) `candle_pe::FormatsError`.
pub use candle_pe_core::{Error, Result};
pub use candle_pe_formats::{Error as FormatsError, Result as FormatsResult};

// The Rust snippets of the README and of the docs pages compile and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

#[cfg(doctest)]
#[doc = include_str!("../docs/sinusoidal.md")]
struct SinusoidalDoctests;

#[cfg(doctest)]
#[doc = include_str!("../docs/rotary.md")]
struct RotaryDoctests;

#[cfg(doctest)]
#[doc = include_str!("../docs/gguf.md")]
struct GgufDoctests;

#[cfg(doctest)]
#[doc = include_str!("../docs/families.md")]
struct FamiliesDoctests;
