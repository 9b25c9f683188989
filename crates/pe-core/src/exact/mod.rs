//! Exact arithmetic, the leaf every other layer builds on: double-double numbers (`dd`, about
//! 106 bits, in which every frequency is computed), libm-free sin and cos of an angle given
//! as an exact sum (`trig`, the CPU generator's anchors) and f64 rounded once to f16 and bf16
//! (`round`). The CUDA kernels carry the same arithmetic (`cuda/exact.cuh`). Nothing here knows
//! about tables, specs or tensors.
//!
//! ```
//! // The exact arithmetic is internal; it shows in every value, here sin(2^31 - 1) in f64,
//! // within an ulp of the real number -0.72491655514455639054...
//! use candle_core::{DType, Device};
//! use candle_pe_core::{PeSpec, SinusoidalEncoding};
//!
//! let pe = SinusoidalEncoding::new(PeSpec::vaswani(2))?; // one pair, w_0 = 1: angle = position
//! let row = pe.range((1 << 31) - 1, 1, DType::F64, &Device::Cpu)?.flatten_all()?;
//! let sin = row.to_vec1::<f64>()?[0];
//! assert!((sin - -0.724_916_555_144_556_4).abs() <= 1.2e-16);
//! # Ok::<(), candle_pe_core::Error>(())
//! ```

pub(crate) mod dd;
pub(crate) mod round;
pub(crate) mod trig;
