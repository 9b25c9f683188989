//! [`SinusoidalEmbeddingConfig`] (candle-pe-nn's embedding block) read from the fields of an HF
//! `config.json` ([`FromHfConfig`]).
//!
//! ```
//! use candle_pe_formats::FromHfConfig;
//! use candle_pe_nn::{EmbeddingScale, PositionMode, Preset, SinusoidalEmbeddingConfig};
//!
//! // The relevant fields of an HF M2M100 config.json; the rest is ignored.
//! let json = serde_json::json!({"d_model": 1024, "vocab_size": 128112,
//!     "max_position_embeddings": 1024, "scale_embedding": true, "pad_token_id": 1,
//!     "dropout": 0.1});
//! let cfg = SinusoidalEmbeddingConfig {
//!     preset: Preset::Fairseq,
//!     positions: PositionMode::PaddingAware,
//!     ..SinusoidalEmbeddingConfig::from_hf_config(&json)?
//! };
//! assert_eq!(cfg.embedding_scale, EmbeddingScale::SqrtD);
//! assert_eq!(cfg.padding_idx, Some(1));
//! assert_eq!(cfg.max_positions, Some(1024));
//! assert_eq!(cfg.spec(1024).width, 1024);
//! # Ok::<(), candle_pe_formats::Error>(())
//! ```

use candle_pe_nn::SinusoidalEmbeddingConfig;
use serde_json::Value;

use crate::{ConfigFields, FromHfConfig, Result};

impl FromHfConfig for SinusoidalEmbeddingConfig {
    /// The config an HF `config.json` gives: its fields named as the struct names them, or by
    /// their HF names (`scale_embedding`, `pad_token_id`, `max_position_embeddings`,
    /// `d_model`, `vocab_size`; the two names must agree when both are given), absent ones (or
    /// `null`) at their defaults; other fields are ignored. A field of the wrong type is an
    /// error naming it.
    fn from_hf_config(config: &Value) -> Result<Self> {
        let json = ConfigFields::new(config)?;
        let default = Self::default();
        Ok(Self {
            preset: json.get("preset")?.unwrap_or(default.preset),
            base: json.get("base")?,
            frequencies: json.get("frequencies")?,
            layout: json.get("layout")?,
            odd_width: json.get("odd_width")?,
            angle_scale: json.get("angle_scale")?,
            embedding_scale: json
                .either("embedding_scale", &json, "scale_embedding")?
                .unwrap_or(default.embedding_scale),
            padding_idx: json.either("padding_idx", &json, "pad_token_id")?,
            positions: json.get("positions")?.unwrap_or(default.positions),
            max_positions: json.either("max_positions", &json, "max_position_embeddings")?,
            width: json.either("width", &json, "d_model")?,
            vocab: json.either("vocab", &json, "vocab_size")?,
            stored_table: json.get("stored_table")?.unwrap_or(default.stored_table),
        })
    }
}
