//! The GGUF reader, one job per file, each importing only the ones above it in this list:
//!
//! - `arch.rs`: one row per `general.architecture` (pair layout, head, the quirks, written once
//!   in the rows' field docs);
//! - `meta.rs`: [`GgufMeta`](crate::GgufMeta), the one reader of GGUF metadata values;
//! - `converter.rs`: llama.cpp's converter's f32 arithmetic, rebuilt to read its values back
//!   exactly;
//! - `rope.rs`: [`GgufRope`](crate::GgufRope) and [`FromGguf`](crate::FromGguf), a file's
//!   ropes assembled from its keys and tensors;
//! - `overrides.rs`: a [`RopeOverride`](crate::RopeOverride) on a file, as llama.cpp applies its
//!   context parameters.

mod arch;
mod converter;
mod meta;
mod overrides;
mod rope;

pub use meta::GgufMeta;
pub use rope::{FreqFactors, FromGguf, GgufRope};
