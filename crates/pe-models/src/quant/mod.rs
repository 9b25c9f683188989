//! The decoders' projections: [`Proj`] (`proj.rs`), dense (candle-nn's `Linear`) or quantized
//! (candle's `QMatMul` on a GGUF tensor); [`SideBySide`] (`side_by_side.rs`), projections of
//! one input run as one matmul where the bits allow; and [`quantized_matmul`]
//! (`avx2_matmul.rs`), candle's quantized product with AVX2 integer sums for the block types
//! candle multiplies in scalar code, bit for bit. Runtime for the reference decoders, not part
//! of what they prove.

mod avx2_matmul;
mod proj;
mod side_by_side;

pub use avx2_matmul::quantized_matmul;
pub(crate) use proj::{proj, Proj, QWeights};
pub(crate) use side_by_side::SideBySide;
