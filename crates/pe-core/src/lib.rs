//! Exact sinusoidal positional encodings (Vaswani et al. 2017) for candle, in every convention
//! real checkpoints use, on any device.
//!
//! - [`PeSpec`] and [`Preset`] describe an encoding: frequencies, base, scale, layout, odd widths.
//! - [`SinusoidalEncoding`] builds tables for a range of positions, explicit ids, fairseq's
//!   padding-aware ids, or fractional timesteps, in f32, f16, bf16 or f64.
//! - [`PeCache`] keeps a growing table per device and dtype and serves zero-copy views.
//!
//! Every value is within 1e-6 of the exact one in f32 (1e-9 in f64, within one unit in the last
//! place in f16 and bf16) at any position below 2^31: the error does not grow with the position.
//!
//! ```
//! use candle_core::{DType, Device};
//! use pe_core::{PeSpec, SinusoidalEncoding};
//!
//! let pe = SinusoidalEncoding::new(PeSpec::vaswani(6))?;
//! let row = pe.range(11, 1, DType::F64, &Device::Cpu)?.squeeze(0)?.to_vec1::<f64>()?;
//! // burn's and keras-hub's reference row for position 11.
//! let expected = [-0.99999, 0.00443, 0.48868, 0.87246, 0.02370, 0.99972];
//! for (got, want) in row.iter().zip(expected) {
//!     assert!((got - want).abs() < 1e-5);
//! }
//! # Ok::<(), pe_core::Error>(())
//! ```

#![warn(missing_docs)]

pub mod cache;
pub mod cpu;
pub mod encoding;
pub mod error;
pub mod freq;
pub mod generic;
pub mod positions;
pub mod rope;
pub mod spec;
pub mod trig;

pub use cache::PeCache;
pub use encoding::{Backend, SinusoidalEncoding};
pub use error::{Error, Result};
pub use freq::{Columns, Frequency, Plan, MAX_POSITION, MAX_WIDTH};
pub use positions::padding_aware_positions;
pub use rope::{Rope, RopeCache, RopeConfig, RopeScaling};
pub use spec::{Frequencies, Layout, OddWidth, PeSpec, Preset, DEFAULT_BASE};
