//! [`RopeConfig`]: one model's rotary embedding, described with the names HF `config.json`
//! gives its fields: the head width, `rope_theta`, `partial_rotary_factor`,
//! `max_position_embeddings`, the [`RopeType`] with its parameters, and the M-RoPE sections.
//!
//! The engine reads no file: `candle-pe-formats` builds a `RopeConfig` from a `config.json`
//! or a GGUF file, and anything else may build one by hand.
//!
//! ```
//! use candle_pe_core::{Llama3, Rope, RopeConfig, RopeType};
//!
//! let config = RopeConfig::new(128, 500000.0).with_rope_type(RopeType::Llama3(Llama3 {
//!     factor: 8.0,
//!     low_freq_factor: 1.0,
//!     high_freq_factor: 4.0,
//!     original_max_position_embeddings: 8192,
//! }));
//! assert_eq!(config.rotary_dim(), 128);
//! let rope = Rope::new(config)?;
//! # Ok::<(), candle_pe_core::Error>(())
//! ```

use serde::Serialize;

use super::layouts::{MropeSlots, PairLayout};
use super::query_scale::QueryScale;
use super::types::RopeType;

/// `rope_theta` when a config does not give one.
pub const DEFAULT_ROPE_THETA: f64 = 10_000.0;

/// One model's rotary embedding, in the words of HF `config.json`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RopeConfig {
    /// The width of each attention head.
    pub head_dim: usize,
    /// The base of the frequencies. Default 10000.
    pub rope_theta: f64,
    /// The fraction of each head that is rotated (phi, GPT-NeoX). Default 1.
    pub partial_rotary_factor: f64,
    /// The model's context length; some rope types read it (dynamic, yarn, longrope).
    pub max_position_embeddings: Option<usize>,
    /// The rope type and its parameters (written as transformers 5's `rope_parameters`).
    #[serde(rename = "rope_parameters")]
    pub rope_type: RopeType,
    /// M-RoPE (Qwen2-VL, Qwen2.5-VL, Qwen3-VL): how many frequency slots take their angle from
    /// the temporal, height and width position ids; `None` for 1-D rope.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mrope_section: Option<Vec<usize>>,
    /// How the M-RoPE slots take their axes: the sections following each other (Qwen2-VL,
    /// Qwen2.5-VL, the default) or alternating slot by slot (Qwen3-VL; written as HF's
    /// `mrope_interleaved`).
    #[serde(
        rename = "mrope_interleaved",
        serialize_with = "MropeSlots::serialize_flag",
        skip_serializing_if = "MropeSlots::is_sections"
    )]
    pub mrope_slots: MropeSlots,
    /// Which channels the model turns together: the two halves of each head (the default) or
    /// adjacent pairs `(2i, 2i + 1)` (HF's `rope_interleave`: DeepSeek-V3, GLM-4-MoE-Lite,
    /// Mistral 4, whose config classes default it to true; written so). The tables are the same
    /// either way.
    #[serde(
        rename = "rope_interleave",
        serialize_with = "PairLayout::serialize_flag",
        skip_serializing_if = "PairLayout::is_halves"
    )]
    pub pair_layout: PairLayout,
    /// A factor on the queries at each position, after the rotation (Ministral 3, Mistral 4:
    /// `llama_4_scaling_beta`); `None` for most models.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub query_scale: Option<QueryScale>,
}

impl RopeConfig {
    /// The default rope type for heads of `head_dim` with base `rope_theta`.
    pub fn new(head_dim: usize, rope_theta: f64) -> Self {
        Self {
            head_dim,
            rope_theta,
            partial_rotary_factor: 1.0,
            max_position_embeddings: None,
            rope_type: RopeType::Default,
            mrope_section: None,
            mrope_slots: MropeSlots::Sections,
            pair_layout: PairLayout::Halves,
            query_scale: None,
        }
    }

    /// The same config with another rope type.
    pub fn with_rope_type(mut self, rope_type: RopeType) -> Self {
        self.rope_type = rope_type;
        self
    }

    /// The same config rotating `rotary_dim` channels of each head: `partial_rotary_factor`
    /// becomes the smallest f64 whose product with `head_dim` is at least `rotary_dim`, so that
    /// the product rounded down (as here and in transformers) gives `rotary_dim` back. The plain
    /// ratio does not always: 120 / 176 times 176 is 119.99..., which rounds down to 119.
    ///
    /// ```
    /// use candle_pe_core::RopeConfig;
    ///
    /// let config = RopeConfig::new(176, 10000.0).with_rotary_dim(120);
    /// assert_eq!(config.rotary_dim(), 120);
    /// assert_eq!((176.0 * (120.0 / 176.0)) as usize, 119);
    /// ```
    ///
    /// A width of 0 or above `head_dim` gives a factor outside (0, 1], which
    /// [`Rope::new`](crate::Rope::new) refuses as `partial_rotary_factor`.
    pub fn with_rotary_dim(mut self, rotary_dim: usize) -> Self {
        let head = self.head_dim as f64;
        let mut factor = rotary_dim as f64 / head;
        while factor.is_finite() && head * factor < rotary_dim as f64 {
            factor = f64::from_bits(factor.to_bits() + 1);
        }
        self.partial_rotary_factor = factor;
        self
    }

    /// The width the tables cover, twice their column count: `head_dim * partial_rotary_factor`
    /// rounded down, or the width the rope type gives (the whole head for
    /// [`RopeType::Proportional`], whose unrotated pairs have frequency 0).
    pub fn rotary_dim(&self) -> usize {
        self.rope_type
            .formula()
            .rotary_dim(self.head_dim, self.partial_rotary_factor)
    }
}
