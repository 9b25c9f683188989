//! The fields of an HF `config.json` the models read: [`LlamaConfig`] for a
//! [`LlamaFamily`](crate::LlamaFamily) decoder (`model_type` `llama`, `qwen2`, `phi3`,
//! `mistral`), [`M2M100Config`] for an [`M2M100Encoder`](crate::M2M100Encoder) (`m2m_100`:
//! M2M100 and NLLB). Errors name the file and the field.
//!
//! ```
//! use pe_models::M2M100Config;
//!
//! let json = serde_json::json!({
//!     "model_type": "m2m_100", "vocab_size": 128, "d_model": 64, "encoder_layers": 2,
//!     "encoder_attention_heads": 4, "encoder_ffn_dim": 128
//! });
//! let cfg = M2M100Config::from_json(&json, "config.json")?;
//! assert_eq!((cfg.pad_token_id, cfg.scale_embedding), (1, true)); // transformers' defaults
//!
//! let err = M2M100Config::from_json(&serde_json::json!({"model_type": "llama"}), "config.json");
//! assert!(err.unwrap_err().to_string().contains("model_type"));
//! # Ok::<(), anyhow::Error>(())
//! ```

use std::path::Path;

use anyhow::{anyhow, bail, Context, Result};
use candle_nn::Activation;
use candle_pe_core::RopeConfig;
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
        read_config(path.as_ref(), Self::from_json)
    }

    /// Reads a parsed `config.json`; `source` (a file name) starts every error message.
    pub fn from_json(json: &Value, source: &str) -> Result<Self> {
        let (root, model_type) = object_and_type(json, source)?;
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
        read_config(path.as_ref(), Self::from_json)
    }

    /// Reads a parsed `config.json`; `source` (a file name) starts every error message.
    pub fn from_json(json: &Value, source: &str) -> Result<Self> {
        let (root, model_type) = object_and_type(json, source)?;
        if model_type != "m2m_100" {
            bail!("{source}: field model_type: unsupported model type {model_type:?} (supported: m2m_100, as M2M100 and NLLB use)")
        }
        let d_model: usize = required(root, source, "d_model")?;
        let heads: usize = required(root, source, "encoder_attention_heads")?;
        if heads == 0 || !d_model.is_multiple_of(heads) {
            bail!("{source}: field encoder_attention_heads: {heads} must divide d_model {d_model}")
        }
        let act = optional::<String>(root, source, "activation_function")?;
        let activation_function = match act.as_deref().unwrap_or("relu") {
            "relu" => Activation::Relu,
            "gelu" => Activation::Gelu,
            "gelu_new" | "gelu_pytorch_tanh" => Activation::GeluPytorchTanh,
            "silu" | "swish" => Activation::Silu,
            other => bail!("{source}: field activation_function: unsupported activation {other:?} (supported: relu, gelu, gelu_new, gelu_pytorch_tanh, silu, swish)"),
        };
        Ok(Self {
            vocab_size: required(root, source, "vocab_size")?,
            d_model,
            encoder_layers: required(root, source, "encoder_layers")?,
            encoder_attention_heads: heads,
            encoder_ffn_dim: required(root, source, "encoder_ffn_dim")?,
            activation_function,
            scale_embedding: optional(root, source, "scale_embedding")?.unwrap_or(true),
            pad_token_id: optional(root, source, "pad_token_id")?.unwrap_or(1),
            max_position_embeddings: optional(root, source, "max_position_embeddings")?
                .unwrap_or(1024),
        })
    }
}

/// The end-of-sequence ids generation stops at, as transformers' `generate` takes them: the
/// `eos_token_id` of the folder's `generation_config.json` when that file exists and sets
/// it, else that of its `config.json`. The field holds one id or a list; absent or null, there
/// are none. Errors name the file and the field.
///
/// ```
/// let dir = pe_testkit::fixture("models/llama31");
/// assert_eq!(pe_models::eos_token_ids(dir)?, [2]);
/// # Ok::<(), anyhow::Error>(())
/// ```
pub fn eos_token_ids(dir: impl AsRef<Path>) -> Result<Vec<u32>> {
    let dir = dir.as_ref();
    let generation = dir.join("generation_config.json");
    if generation.is_file() {
        if let Some(ids) = read_config(&generation, eos_field)? {
            return Ok(ids);
        }
    }
    Ok(read_config(&dir.join("config.json"), eos_field)?.unwrap_or_default())
}

/// The `eos_token_id` field of a parsed config: one id or a list, `None` when absent or null.
fn eos_field(json: &Value, source: &str) -> Result<Option<Vec<u32>>> {
    let root = object(json, source)?;
    #[derive(serde::Deserialize)]
    #[serde(untagged)]
    enum OneOrMany {
        One(u32),
        Many(Vec<u32>),
    }
    Ok(match optional::<OneOrMany>(root, source, "eos_token_id")? {
        None => None,
        Some(OneOrMany::One(id)) => Some(vec![id]),
        Some(OneOrMany::Many(ids)) => Some(ids),
    })
}

/// The config in the file `path`, parsed by `from_json`; errors name the file.
fn read_config<T>(path: &Path, from_json: impl Fn(&Value, &str) -> Result<T>) -> Result<T> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let json: Value = serde_json::from_str(&text)
        .with_context(|| format!("{}: not valid JSON", path.display()))?;
    from_json(&json, &path.display().to_string())
}

/// The config's fields and its `model_type`.
fn object_and_type<'a>(json: &'a Value, source: &str) -> Result<(&'a Map<String, Value>, String)> {
    let root = object(json, source)?;
    Ok((root, required(root, source, "model_type")?))
}

/// The config's fields.
fn object<'a>(json: &'a Value, source: &str) -> Result<&'a Map<String, Value>> {
    json.as_object()
        .ok_or_else(|| anyhow!("{source}: the config must be a JSON object"))
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
