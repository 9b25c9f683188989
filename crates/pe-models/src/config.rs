//! [`LlamaConfig`]: the fields of an HF `config.json` a [`LlamaFamily`](crate::LlamaFamily)
//! decoder reads, for `model_type` `llama`, `qwen2`, `phi3` and `mistral`.

use std::path::Path;

use anyhow::{anyhow, bail, Context, Result};
use pe_core::RopeConfig;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

/// The architecture a config describes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ModelType {
    /// Llama 2 / 3 / 3.1 (`LlamaForCausalLM`).
    Llama,
    /// Qwen2 / Qwen2.5 (`Qwen2ForCausalLM`): biases on q, k and v.
    Qwen2,
    /// Phi-3, Phi-3.5, Phi-4-mini (`Phi3ForCausalLM`): fused `qkv_proj` and `gate_up_proj`.
    Phi3,
    /// Mistral (`MistralForCausalLM`): optional sliding window.
    Mistral,
}

impl ModelType {
    /// The `model_type` string of `config.json`.
    pub fn name(self) -> &'static str {
        match self {
            ModelType::Llama => "llama",
            ModelType::Qwen2 => "qwen2",
            ModelType::Phi3 => "phi3",
            ModelType::Mistral => "mistral",
        }
    }
}

/// A Llama-family decoder's configuration, read from an HF `config.json`.
#[derive(Clone, Debug, PartialEq)]
pub struct LlamaConfig {
    /// The architecture.
    pub model_type: ModelType,
    /// Vocabulary size (rows of `embed_tokens`, columns of the logits).
    pub vocab_size: usize,
    /// Model width.
    pub hidden_size: usize,
    /// Width of the SwiGLU MLP.
    pub intermediate_size: usize,
    /// Decoder layers.
    pub num_hidden_layers: usize,
    /// Query heads.
    pub num_attention_heads: usize,
    /// Key / value heads (grouped-query attention); `num_attention_heads` when absent.
    pub num_key_value_heads: usize,
    /// Width of each head: `head_dim`, or `hidden_size / num_attention_heads`.
    pub head_dim: usize,
    /// RMSNorm epsilon.
    pub rms_norm_eps: f64,
    /// Biases on q, k, v (Qwen2 always; Llama's `attention_bias`).
    pub qkv_bias: bool,
    /// Bias on o_proj (Llama's `attention_bias`).
    pub o_bias: bool,
    /// Biases on the MLP projections (Llama's `mlp_bias`).
    pub mlp_bias: bool,
    /// Whether the output projection is the token embedding (`tie_word_embeddings`, default
    /// false).
    pub tie_word_embeddings: bool,
    /// Sliding-window attention (Mistral, Phi-3): query `i` sees keys `j` with
    /// `i - window < j <= i`.
    pub sliding_window: Option<usize>,
    /// The rotary embedding, from [`RopeConfig::from_hf_config`].
    pub rope: RopeConfig,
}

impl LlamaConfig {
    /// Reads `path` (an HF `config.json`); errors name the file and the field.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        let json: Value = serde_json::from_str(&text)
            .with_context(|| format!("{}: not valid JSON", path.display()))?;
        Self::from_json(&json, &path.display().to_string())
    }

    /// Reads a parsed `config.json`; `source` (a file name) starts every error message.
    pub fn from_json(json: &Value, source: &str) -> Result<Self> {
        let root = json
            .as_object()
            .ok_or_else(|| anyhow!("{source}: the config must be a JSON object"))?;
        let model_type: String = required(root, source, "model_type")?;
        let model_type = match model_type.as_str() {
            "llama" => ModelType::Llama,
            "qwen2" => ModelType::Qwen2,
            "phi3" => ModelType::Phi3,
            "mistral" => ModelType::Mistral,
            other => bail!(
                "{source}: field model_type: unsupported model type {other:?} (supported: llama, qwen2, phi3, mistral)"
            ),
        };
        let hidden_size: usize = required(root, source, "hidden_size")?;
        let num_attention_heads: usize = required(root, source, "num_attention_heads")?;
        if num_attention_heads == 0 {
            bail!("{source}: field num_attention_heads: must be positive")
        }
        let num_key_value_heads =
            optional(root, source, "num_key_value_heads")?.unwrap_or(num_attention_heads);
        if num_key_value_heads == 0 || !num_attention_heads.is_multiple_of(num_key_value_heads) {
            bail!(
                "{source}: field num_key_value_heads: {num_key_value_heads} must divide num_attention_heads {num_attention_heads}"
            )
        }
        let head_dim =
            optional(root, source, "head_dim")?.unwrap_or(hidden_size / num_attention_heads);
        if let Some(act) = optional::<String>(root, source, "hidden_act")? {
            if act != "silu" {
                bail!("{source}: field hidden_act: unsupported activation {act:?} (only silu)")
            }
        }
        let attention_bias: bool = optional(root, source, "attention_bias")?.unwrap_or(false);
        let sliding_window = match model_type {
            ModelType::Mistral | ModelType::Phi3 => optional(root, source, "sliding_window")?,
            ModelType::Qwen2 => {
                if optional(root, source, "use_sliding_window")?.unwrap_or(false) {
                    bail!("{source}: field use_sliding_window: Qwen2's per-layer sliding window is not supported")
                }
                None
            }
            ModelType::Llama => None,
        };
        if sliding_window == Some(0) {
            bail!("{source}: field sliding_window: must be positive")
        }
        let rope = RopeConfig::from_hf_config(json).map_err(|e| anyhow!("{source}: {e}"))?;
        if rope.head_dim != head_dim {
            bail!(
                "{source}: field head_dim: the rope's head_dim {} differs from the attention's {head_dim}",
                rope.head_dim
            )
        }
        Ok(Self {
            model_type,
            vocab_size: required(root, source, "vocab_size")?,
            hidden_size,
            intermediate_size: required(root, source, "intermediate_size")?,
            num_hidden_layers: required(root, source, "num_hidden_layers")?,
            num_attention_heads,
            num_key_value_heads,
            head_dim,
            rms_norm_eps: required(root, source, "rms_norm_eps")?,
            qkv_bias: model_type == ModelType::Qwen2 || attention_bias,
            o_bias: model_type == ModelType::Llama && attention_bias,
            mlp_bias: model_type == ModelType::Llama
                && optional(root, source, "mlp_bias")?.unwrap_or(false),
            tie_word_embeddings: optional(root, source, "tie_word_embeddings")?.unwrap_or(false),
            sliding_window,
            rope,
        })
    }
}

/// A field that must be present (and not null).
fn required<T: DeserializeOwned>(root: &Map<String, Value>, source: &str, key: &str) -> Result<T> {
    optional(root, source, key)?.ok_or_else(|| anyhow!("{source}: missing field {key}"))
}

/// A field that may be absent or null.
fn optional<T: DeserializeOwned>(
    root: &Map<String, Value>,
    source: &str,
    key: &str,
) -> Result<Option<T>> {
    match root.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(value) => serde_json::from_value(value.clone())
            .map(Some)
            .map_err(|e| anyhow!("{source}: field {key}: {e} (got {value})")),
    }
}
