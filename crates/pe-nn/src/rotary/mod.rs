//! [`RotaryEmbedding`], the rotary block, one concept per file; no file here imports another
//! that imports it back:
//!
//! - `embedding.rs`: the type, its state (the shared table cache, the pairing, dynamic NTK's
//!   tracked length) and the checks of q, k and positions;
//! - `apply.rs`: [`RotaryEmbedding::apply`] and `apply_k`, at an offset or per-token positions;
//! - `mrope.rs`: the same at M-RoPE's `(3, batch, seq)` positions;
//! - `shift.rs`: [`RotaryEmbedding::shift`], keys moved from positions to others;
//! - `rotate.rs`: the rotation by `(cos, sin)` tables (the CPU's one pass, candle-nn's
//!   kernels elsewhere, or the plain twin);
//! - `rows.rs`: the CPU's one-pass rotation, each token reading its row of the tables in place;
//! - `cuda.rs`: the one-pass rotation of f16 and bf16 heads on CUDA.

mod apply;
#[cfg(feature = "cuda")]
mod cuda;
mod embedding;
mod mrope;
mod rotate;
mod rows;
mod shift;

pub use embedding::RotaryEmbedding;
