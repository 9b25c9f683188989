//! [`QueryScale`]: a factor on the queries that depends on the position alone (query
//! temperature), read from the rope config with the rotary embedding it goes with.
//!
//! Ministral 3 and Mistral 4 (`llama_4_scaling_beta`) scale the queries of every layer; Llama 4
//! (`attn_temperature_tuning`) scales the queries of its NoPE layers, which have no rotation.
//! Both factors are pure functions of an integer position, computed here in double-double and
//! rounded once, where transformers computes them per model in f32.
//!
//! ```
//! use candle_pe_core::QueryScale;
//!
//! let ministral = QueryScale::Llama4Scaling { beta: 0.1, original_max_position_embeddings: 16384 };
//! assert_eq!(ministral.value(16383), 1.0);
//! assert!((ministral.value(16384) - (1.0 + 0.1 * 2f64.ln())).abs() < 1e-15);
//! let llama4 = QueryScale::AttnTemperature { floor_scale: 8192, attn_scale: 0.1 };
//! assert_eq!(llama4.value(8190), 1.0);
//! assert!((llama4.value(8191) - (1.0 + 0.1 * 2f64.ln())).abs() < 1e-15);
//! ```

use serde::Serialize;

use super::types::invalid;
use crate::exact::dd::Dd;
use crate::Result;

/// A factor on the queries at each position, applied after the rotation (or alone, on a layer
/// without rotary).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum QueryScale {
    /// Ministral 3 and Mistral 4 (transformers' `get_llama_4_attn_scale`, every layer):
    /// `1 + beta ln(1 + floor(p / original_max_position_embeddings))`.
    Llama4Scaling {
        /// `llama_4_scaling_beta`.
        beta: f64,
        /// The length past which the scale grows, one step per multiple.
        original_max_position_embeddings: usize,
    },
    /// Llama 4's NoPE layers (`attn_temperature_tuning`):
    /// `ln(floor((p + 1) / floor_scale) + 1) attn_scale + 1`.
    AttnTemperature {
        /// `floor_scale` (transformers' default 8192).
        floor_scale: usize,
        /// `attn_scale` (transformers' default 0.1).
        attn_scale: f64,
    },
}

impl QueryScale {
    /// Checks the parameters: a finite factor, a length and a floor of at least 1.
    pub fn check(&self) -> Result<()> {
        let (length, factor) = match *self {
            QueryScale::Llama4Scaling {
                beta,
                original_max_position_embeddings,
            } => (
                (
                    "original_max_position_embeddings",
                    original_max_position_embeddings,
                ),
                ("llama_4_scaling_beta", beta),
            ),
            QueryScale::AttnTemperature {
                floor_scale,
                attn_scale,
            } => (("floor_scale", floor_scale), ("attn_scale", attn_scale)),
        };
        if length.1 == 0 {
            return Err(invalid(length.0, ">= 1", 0.0));
        }
        if !factor.1.is_finite() {
            return Err(invalid(factor.0, "finite", factor.1));
        }
        Ok(())
    }

    /// The factor at `position`, the exact value rounded to f64.
    pub fn value(&self, position: usize) -> f64 {
        // Both are `1 + c ln(1 + k)` for a whole number of steps `k`.
        let (c, k) = match *self {
            QueryScale::Llama4Scaling {
                beta,
                original_max_position_embeddings,
            } => (beta, position / original_max_position_embeddings.max(1)),
            QueryScale::AttnTemperature {
                floor_scale,
                attn_scale,
            } => (attn_scale, (position + 1) / floor_scale.max(1)),
        };
        if k == 0 {
            return 1.0;
        }
        (Dd::new((k + 1) as f64).ln() * c + 1.0).to_f64()
    }
}
