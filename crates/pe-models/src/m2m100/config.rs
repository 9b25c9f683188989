//! [`M2M100Config`]: the fields of an HF `config.json` an [`M2M100Encoder`](crate::M2M100Encoder)
//! reads (`model_type` `m2m_100`: M2M100 and NLLB), with `from_hf_config` (a parsed
//! `config.json`, read through pe-formats' [`ConfigFields`]: `null` is absent, errors name the
//! field) and `from_file` (errors name the file too).
//!
//! ```
//! use pe_models::M2M100Config;
//!
//! let json = serde_json::json!({
//!     "model_type": "m2m_100", "vocab_size": 128, "d_model": 64, "encoder_layers": 2,
//!     "encoder_attention_heads": 4, "encoder_ffn_dim": 128
//! });
//! let cfg = M2M100Config::from_hf_config(&json)?;
//! assert_eq!((cfg.pad_token_id, cfg.scale_embedding), (1, true)); // transformers' defaults
//!
//! let err = M2M100Config::from_hf_config(&serde_json::json!({"model_type": "llama"}));
//! assert!(err.unwrap_err().to_string().contains("model_type"));
//! # Ok::<(), candle_pe_formats::Error>(())
//! ```

use std::path::Path;

use anyhow::Result;
use candle_nn::Activation;
use candle_pe_formats::ConfigFields;
use serde_json::Value;

use crate::checkpoint::{read_config, require_positive};

/// An M2M100 / NLLB encoder's configuration (`model_type` `m2m_100`), read from an HF
/// `config.json`; absent optional fields take transformers' defaults.
#[derive(Clone, Debug, PartialEq)]
pub struct M2M100Config {
    /// Vocabulary size (rows of `model.shared`).
    pub vocab_size: usize,
    /// Model width.
    pub d_model: usize,
    /// Encoder layers.
    pub encoder_layers: usize,
    /// Attention heads of each encoder layer; divides `d_model`.
    pub encoder_attention_heads: usize,
    /// Width of the encoder's feed-forward layers.
    pub encoder_ffn_dim: usize,
    /// The feed-forward activation (`activation_function`: `relu`, `gelu`, `gelu_new`,
    /// `gelu_pytorch_tanh`, `silu` or `swish`; default `relu`).
    pub activation_function: Activation,
    /// Whether token embeddings are multiplied by `sqrt(d_model)` (default true).
    pub scale_embedding: bool,
    /// The padding token (default 1): it gets no position, and real tokens count from
    /// `pad_token_id + 1`.
    pub pad_token_id: u32,
    /// The context the model was trained for (default 1024); transformers' table has
    /// `max_position_embeddings + 2` rows and grows past them, as the exact table here does.
    pub max_position_embeddings: usize,
}

impl M2M100Config {
    /// Reads `path` (an HF `config.json`); errors name the file and the field.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Self> {
        read_config(path.as_ref(), Self::from_hf_config)
    }

    /// Reads a parsed `config.json`; errors name the field.
    pub fn from_hf_config(json: &Value) -> candle_pe_formats::Result<Self> {
        let root = ConfigFields::new(json)?;
        let model_type: String = root.require("model_type")?;
        if model_type != "m2m_100" {
            return Err(root.invalid(
                "model_type",
                format!(
                    "unsupported model type {model_type:?} (supported: m2m_100, as M2M100 and \
                     NLLB use)"
                ),
            ));
        }
        require_positive(&root, &["vocab_size", "d_model", "encoder_ffn_dim"])?;
        let d_model: usize = root.require("d_model")?;
        let heads: usize = root.require("encoder_attention_heads")?;
        if heads == 0 || !d_model.is_multiple_of(heads) {
            return Err(root.invalid(
                "encoder_attention_heads",
                format!("{heads} must divide d_model {d_model}"),
            ));
        }
        let act = root.get::<String>("activation_function")?;
        let activation_function = match act.as_deref().unwrap_or("relu") {
            "relu" => Activation::Relu,
            "gelu" => Activation::Gelu,
            "gelu_new" | "gelu_pytorch_tanh" => Activation::GeluPytorchTanh,
            "silu" | "swish" => Activation::Silu,
            other => {
                return Err(root.invalid(
                    "activation_function",
                    format!(
                        "unsupported activation {other:?} (supported: relu, gelu, gelu_new, \
                         gelu_pytorch_tanh, silu, swish)"
                    ),
                ))
            }
        };
        Ok(Self {
            vocab_size: root.require("vocab_size")?,
            d_model,
            encoder_layers: root.require("encoder_layers")?,
            encoder_attention_heads: heads,
            encoder_ffn_dim: root.require("encoder_ffn_dim")?,
            activation_function,
            scale_embedding: root.get("scale_embedding")?.unwrap_or(true),
            pad_token_id: root.get("pad_token_id")?.unwrap_or(1),
            max_position_embeddings: root.get("max_position_embeddings")?.unwrap_or(1024),
        })
    }
}
