//! [`LlamaConfig`]: the fields of an HF `config.json` a [`LlamaFamily`](crate::LlamaFamily)
//! decoder reads (`model_type` `llama`, `qwen2`, `qwen3`, `phi3`, `mistral`, `gemma3_text`,
//! `smollm3`, `ministral3`, dense `llama4_text`; the language model of `qwen2_vl`,
//! `qwen2_5_vl`, `qwen3_vl`), with `from_hf_config` (a parsed `config.json`, read through
//! pe-formats' [`ConfigFields`]: `null` is absent, errors name the field) and `from_file`
//! (errors name the file too). The family's row ([`Family`]) says which fields it has and
//! their defaults; [`RotaryLayers`] gives each layer's attention and rope, from `config.json`
//! or a GGUF file.
//!
//! ```
//! use pe_models::{LayerType, LlamaConfig, ModelType};
//!
//! let cfg = LlamaConfig::from_file(pe_testkit::fixture("models/gemma3").join("config.json"))?;
//! assert_eq!(cfg.model_type, ModelType::Gemma3);
//! assert_eq!(cfg.sliding_window, Some(8));
//! assert_eq!(cfg.layer_types, [LayerType::Sliding, LayerType::Full]);
//!
//! let err = LlamaConfig::from_hf_config(&serde_json::json!({"model_type": "m2m_100"}));
//! assert!(err.unwrap_err().to_string().contains("model_type"));
//! # Ok::<(), anyhow::Error>(())
//! ```

use std::path::Path;

use anyhow::Result;
use candle_nn::Activation;
use candle_pe_core::{QueryScale, RopeConfig, RopeConfigs};
use candle_pe_formats::{ConfigFields, HfTextConfig};
use serde_json::Value;

use super::family::{Bias, Family, ModelType, Window};
use crate::checkpoint::{read_config, require_positive};
use candle_pe_formats::FromHfConfig;

/// What a layer's attention sees.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LayerType {
    /// Every earlier token (`full_attention`).
    Full,
    /// The last `sliding_window` tokens (`sliding_attention`).
    Sliding,
    /// The earlier tokens of its chunk of `attention_chunk_size` (`chunked_attention`, Llama 4),
    /// chunks counted from the first token after the left padding.
    Chunked,
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
    /// Width of the gated MLP (Llama 4: `intermediate_size_mlp`, its dense layers' width).
    pub intermediate_size: usize,
    /// The gated MLP's activation: `silu` (`hidden_act`), or Gemma's `gelu_pytorch_tanh`
    /// (`hidden_activation`).
    pub hidden_act: Activation,
    /// Decoder layers.
    pub num_hidden_layers: usize,
    /// Query heads.
    pub num_attention_heads: usize,
    /// Key / value heads (grouped-query attention); `num_attention_heads` when absent.
    pub num_key_value_heads: usize,
    /// Width of each head: `head_dim`, the model type's default
    /// ([`HfModelType`](candle_pe_formats::HfModelType): Gemma 3's 256), or
    /// `hidden_size / num_attention_heads`.
    pub head_dim: usize,
    /// RMSNorm epsilon.
    pub rms_norm_eps: f64,
    /// Biases on q, k, v (Qwen2 always; Llama's and Qwen3's `attention_bias`).
    pub qkv_bias: bool,
    /// Bias on o_proj (Llama's and Qwen3's `attention_bias`).
    pub o_bias: bool,
    /// An RMSNorm over each head of q and of k, after the projections and before the rope
    /// (Qwen3's and Gemma 3's `q_norm` and `k_norm`).
    pub qk_norm: bool,
    /// An RMSNorm without weight over each head of q and of k after the rotation, on the rotary
    /// layers (Llama 4's `use_qk_norm`).
    pub qk_l2_norm: bool,
    /// Gemma's norms: a norm on the attention's and on the MLP's output
    /// (`post_attention_layernorm`, `post_feedforward_layernorm`) besides those on their
    /// inputs (`input_layernorm`, `pre_feedforward_layernorm`).
    pub sandwich_norms: bool,
    /// What the norm weights store: the scale minus this (Gemma's `config.json` checkpoints: 1;
    /// GGUF files store the scale, 0).
    pub norm_offset: f64,
    /// What the attention scores are divided by the square root of: `head_dim`, or Gemma's
    /// `query_pre_attn_scalar`.
    pub query_pre_attn_scalar: f64,
    /// A factor on the token embeddings (Gemma: `sqrt(hidden_size)`, rounded to f32).
    pub embedding_scale: Option<f64>,
    /// Biases on the MLP projections (Llama's `mlp_bias`).
    pub mlp_bias: bool,
    /// Whether the output projection is the token embedding (`tie_word_embeddings`, default
    /// false).
    pub tie_word_embeddings: bool,
    /// Sliding-window attention (Mistral, Phi-3, Gemma 3's sliding layers): query `i` sees keys
    /// `j` with `i - window < j <= i`.
    pub sliding_window: Option<usize>,
    /// Chunked attention's chunk (Llama 4's `attention_chunk_size`), on the `Chunked` layers.
    pub attention_chunk_size: Option<usize>,
    /// Each layer's attention (`layer_types`); empty when the config has none, and then every
    /// layer is sliding when there is a `sliding_window` and full otherwise.
    pub layer_types: Vec<LayerType>,
    /// The rotary embedding (of the full-attention layers, where layer types differ).
    pub rope: RopeConfig,
    /// The rotary embedding of the sliding layers, where it differs (Gemma 3: theta 1e4, no
    /// scaling).
    pub sliding_rope: Option<RopeConfig>,
    /// Per layer, whether it has no rotary embedding (a NoPE layer: SmolLM3's and
    /// Llama 4's `no_rope_layers`); empty when every layer has one.
    pub nope_layers: Vec<bool>,
    /// The factor on the queries of the NoPE layers at each position, if any.
    pub nope_query_scale: Option<QueryScale>,
}

impl LlamaConfig {
    /// Reads `path` (an HF `config.json`); errors name the file and the field.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Self> {
        read_config(path.as_ref(), Self::from_hf_config)
    }
    /// Reads a parsed `config.json`; errors name the field. The family's row ([`Family`])
    /// says which fields it has and their defaults.
    pub fn from_hf_config(json: &Value) -> candle_pe_formats::Result<Self> {
        let outer = ConfigFields::new(json)?;
        let (name, family) = family_of(&outer)?;
        // Vision-language configs nest the decoder's fields under text_config (older Qwen-VL
        // ones do not): pe-formats finds them, as its rope reader does.
        let text = HfTextConfig::from_hf_config(json)?;
        let root = text.fields().clone();
        refuse_fields(&root, family)?;
        let sizes = Sizes::read(&root)?;
        // head_dim, the model type's default (pe-formats' row), or hidden / heads.
        let head_dim = text.head_dim()?;
        let hidden_act = hidden_act(&root, family)?;
        let sliding_window = sliding_window(&root, family, &name)?;
        let attention_chunk_size = attention_chunk_size(&root, family, sizes.layers)?;
        let intermediate_size = intermediate_size(&root, family)?;
        let ropes = RopeConfigs::from_hf_config(json)?;
        let reach = (sliding_window, attention_chunk_size);
        let rotary = rotary_layers(&root, &ropes, sizes.layers, reach, head_dim)?;
        let (nope_layers, nope_query_scale) = nope_layers(&ropes, family, sizes.layers)?;
        Ok(Self {
            model_type: family.model_type,
            vocab_size: root.require("vocab_size")?,
            hidden_size: sizes.hidden,
            intermediate_size,
            hidden_act,
            num_hidden_layers: sizes.layers,
            num_attention_heads: sizes.heads,
            num_key_value_heads: sizes.kv_heads,
            head_dim,
            query_pre_attn_scalar: query_pre_attn_scalar(&root, family, head_dim)?,
            rms_norm_eps: root.require("rms_norm_eps")?,
            qkv_bias: bias(&root, family.qkv_bias)?,
            o_bias: bias(&root, family.o_bias)?,
            qk_norm: family.qk_norm,
            qk_l2_norm: match family.qk_l2_norm {
                Some(field) => root.get(field)?.unwrap_or(true),
                None => false,
            },
            sandwich_norms: family.sandwich_norms,
            norm_offset: family.norm_offset,
            embedding_scale: family
                .embedding_scale
                .then(|| f64::from((sizes.hidden as f32).sqrt())),
            mlp_bias: bias(&root, family.mlp_bias)?,
            // Qwen-VL configs hold it at the top level.
            tie_word_embeddings: root
                .either("tie_word_embeddings", &outer, "tie_word_embeddings")?
                .unwrap_or(family.tied_default),
            sliding_window,
            attention_chunk_size,
            layer_types: rotary.layer_types,
            rope: rotary.rope,
            sliding_rope: rotary.sliding_rope,
            nope_layers,
            nope_query_scale,
        })
    }

    /// The family's row.
    pub fn family(&self) -> &'static Family {
        Family::of(self.model_type)
    }
}

/// The `model_type` of the outer config and its family's row.
fn family_of(outer: &ConfigFields) -> candle_pe_formats::Result<(String, &'static Family)> {
    let name: String = outer.require("model_type")?;
    let family = Family::by_model_type(&name).ok_or_else(|| {
        outer.invalid(
            "model_type",
            format!(
                "unsupported model type {name:?} (supported: {})",
                Family::hf_list()
            ),
        )
    })?;
    Ok((name, family))
}

/// Fails on the first of the family's refused fields that is present (non-null, not false).
fn refuse_fields(root: &ConfigFields, family: &Family) -> candle_pe_formats::Result<()> {
    for &field in family.refused {
        if !matches!(root.value(field), None | Some(Value::Bool(false))) {
            return Err(root.invalid(field, "not computed by this decoder"));
        }
    }
    Ok(())
}

/// The decoder's sizes, each checked where it is read.
struct Sizes {
    hidden: usize,
    layers: usize,
    heads: usize,
    kv_heads: usize,
}

impl Sizes {
    /// `hidden_size`, `num_hidden_layers`, `num_attention_heads` and `num_key_value_heads`
    /// (`num_attention_heads` when absent, and dividing it); `vocab_size` checked positive.
    fn read(root: &ConfigFields) -> candle_pe_formats::Result<Self> {
        require_positive(root, &["vocab_size", "hidden_size"])?;
        let hidden: usize = root.require("hidden_size")?;
        let layers: usize = root.require("num_hidden_layers")?;
        let heads: usize = root.require("num_attention_heads")?;
        if heads == 0 {
            return Err(root.invalid("num_attention_heads", "must be positive"));
        }
        let kv_heads = root.get("num_key_value_heads")?.unwrap_or(heads);
        if kv_heads == 0 || !heads.is_multiple_of(kv_heads) {
            return Err(root.invalid(
                "num_key_value_heads",
                format!("{kv_heads} must divide num_attention_heads {heads}"),
            ));
        }
        Ok(Self {
            hidden,
            layers,
            heads,
            kv_heads,
        })
    }
}

/// The MLP's activation: the family's field, or its default.
fn hidden_act(root: &ConfigFields, family: &Family) -> candle_pe_formats::Result<Activation> {
    let (field, default) = family.activation;
    let act: Option<String> = root.get(field)?;
    activation(act.as_deref().unwrap_or(default)).map_err(|message| root.invalid(field, message))
}

/// The sliding window as the family's row says (`name`, the config's `model_type`, for the
/// error of a refused one); a window of 0 is an error.
fn sliding_window(
    root: &ConfigFields,
    family: &Family,
    name: &str,
) -> candle_pe_formats::Result<Option<usize>> {
    let window = match family.window {
        Window::None => None,
        Window::Field => root.get("sliding_window")?,
        Window::FieldOr(default) => Some(root.get("sliding_window")?.unwrap_or(default)),
        Window::Refused => {
            if root.get("use_sliding_window")?.unwrap_or(false) {
                return Err(root.invalid(
                    "use_sliding_window",
                    format!("{name}'s per-layer sliding window is not supported"),
                ));
            }
            None
        }
    };
    if window == Some(0) {
        return Err(root.invalid("sliding_window", "must be positive"));
    }
    Ok(window)
}

/// Chunked attention's chunk, for a family that has it (a chunk of 0 is an error); a family of
/// dense layers only refuses mixture-of-experts layers.
fn attention_chunk_size(
    root: &ConfigFields,
    family: &Family,
    layers: usize,
) -> candle_pe_formats::Result<Option<usize>> {
    let chunk = match family.chunked {
        Some(default) => Some(root.get("attention_chunk_size")?.unwrap_or(default)),
        None => None,
    };
    if chunk == Some(0) {
        return Err(root.invalid("attention_chunk_size", "must be positive"));
    }
    if family.dense_only {
        dense_layers_only(root, layers)?;
    }
    Ok(chunk)
}

/// The MLP's width: the family's field, or its default; positive.
fn intermediate_size(root: &ConfigFields, family: &Family) -> candle_pe_formats::Result<usize> {
    let (field, default) = family.intermediate;
    let size = match default {
        Some(default) => root.get(field)?.unwrap_or(default),
        None => root.require(field)?,
    };
    if size == 0 {
        return Err(root.invalid(field, "must be positive"));
    }
    Ok(size)
}

/// Each layer's attention and rope ([`RotaryLayers`]), the rope's head_dim that of the
/// attention.
fn rotary_layers(
    root: &ConfigFields,
    ropes: &RopeConfigs,
    layers: usize,
    (window, chunk): (Option<usize>, Option<usize>),
    head_dim: usize,
) -> candle_pe_formats::Result<RotaryLayers> {
    let rotary = RotaryLayers::read(ropes, layers, window, chunk)
        .map_err(|(field, message)| root.invalid(field, message))?;
    // The rope reads a field in place of head_dim where the config gives one
    // (qk_rope_head_dim, global_head_dim, a per-layer override): not this decoder's.
    if rotary.rope.head_dim != head_dim {
        return Err(root.invalid(
            "head_dim",
            format!(
                "the rope's head_dim {} differs from the attention's {head_dim}",
                rotary.rope.head_dim
            ),
        ));
    }
    Ok(rotary)
}

/// Per layer, whether it has no rotary (for a family with NoPE layers: SmolLM3's and Llama 4's;
/// transformers' other classes never read `no_rope_layers`), and the query scale of the first
/// NoPE layer.
fn nope_layers(
    ropes: &RopeConfigs,
    family: &Family,
    layers: usize,
) -> candle_pe_formats::Result<(Vec<bool>, Option<QueryScale>)> {
    let nope: Vec<bool> = match family.nope_layers {
        true => (0..layers)
            .map(|i| Ok(ropes.for_layer(i)?.is_none()))
            .collect::<candle_pe_formats::Result<_>>()?,
        false => vec![],
    };
    let scale = match nope.iter().position(|&n| n) {
        Some(i) => ropes.query_scale(i)?,
        None => None,
    };
    Ok((nope, scale))
}

/// What the scores are divided by the square root of: the family's `query_pre_attn_scalar`
/// (or its default), else `head_dim`; finite and positive.
fn query_pre_attn_scalar(
    root: &ConfigFields,
    family: &Family,
    head_dim: usize,
) -> candle_pe_formats::Result<f64> {
    let scalar = match family.query_pre_attn_scalar {
        Some(default) => root.get("query_pre_attn_scalar")?.unwrap_or(default),
        None => head_dim as f64,
    };
    if !(scalar > 0.0 && scalar.is_finite()) {
        return Err(root.invalid("query_pre_attn_scalar", "must be finite and positive"));
    }
    Ok(scalar)
}

/// Whether a bias is there: never, always, or as its boolean field says (default false).
fn bias(root: &ConfigFields, bias: Bias) -> candle_pe_formats::Result<bool> {
    Ok(match bias {
        Bias::Never => false,
        Bias::Always => true,
        Bias::Field(field) => root.get(field)?.unwrap_or(false),
    })
}

/// The MLP activation named `name` (`hidden_act`, Gemma's `hidden_activation`; GGUF files: the
/// family's default).
pub(crate) fn activation(name: &str) -> std::result::Result<Activation, String> {
    match name {
        "silu" => Ok(Activation::Silu),
        "gelu_pytorch_tanh" => Ok(Activation::GeluPytorchTanh),
        act => Err(format!(
            "unsupported activation {act:?} (silu, gelu_pytorch_tanh)"
        )),
    }
}

/// A family of dense layers only (Llama 4 here): `moe_layers` (or the layers
/// `interleave_moe_layer_step` marks) must be empty.
fn dense_layers_only(root: &ConfigFields, layers: usize) -> candle_pe_formats::Result<()> {
    let step: usize = root.get("interleave_moe_layer_step")?.unwrap_or(1);
    let moe: Vec<usize> = match root.get("moe_layers")? {
        Some(list) => list,
        None => (step.max(1) - 1..layers).step_by(step.max(1)).collect(),
    };
    if !moe.is_empty() {
        return Err(root.invalid(
            "moe_layers",
            format!(
                "mixture-of-experts layers {moe:?} are not supported (a dense model has \
                 moe_layers [])"
            ),
        ));
    }
    Ok(())
}

/// Each layer's attention and rope, from the ropes a checkpoint describes (`config.json` or
/// GGUF: [`RopeConfigs`]).
pub(crate) struct RotaryLayers {
    pub layer_types: Vec<LayerType>,
    pub rope: RopeConfig,
    pub sliding_rope: Option<RopeConfig>,
}

impl RotaryLayers {
    /// The layer types of `ropes` for `layers` layers (a sliding layer needs a `window`, a
    /// chunked one a `chunk`), the full layers' rope and the sliding layers' where it differs.
    /// Errors give the field and the message.
    pub fn read(
        ropes: &RopeConfigs,
        layers: usize,
        window: Option<usize>,
        chunk: Option<usize>,
    ) -> std::result::Result<Self, (&'static str, String)> {
        let layer_types = match ropes.layer_types() {
            Some(types) if types.len() != layers => {
                return Err((
                    "layer_types",
                    format!("has {} entries for {layers} layers", types.len()),
                ))
            }
            Some(types) => types
                .iter()
                .map(|t| match t.as_str() {
                    "full_attention" => Ok(LayerType::Full),
                    "sliding_attention" if window.is_some() => Ok(LayerType::Sliding),
                    "chunked_attention" if chunk.is_some() => Ok(LayerType::Chunked),
                    other => Err((
                        "layer_types",
                        format!("layer type {other:?} is not supported here"),
                    )),
                })
                .collect::<std::result::Result<_, _>>()?,
            None => vec![],
        };
        // A layer type without rotary (NoPE) is not one these models have.
        let rotary = |t: &str| match ropes.for_layer_type(t) {
            Ok(Some(rope)) => Ok(rope.clone()),
            Ok(None) => Err((
                "rope_parameters",
                format!("layers of type {t:?} have no rotary embedding (NoPE): not supported here"),
            )),
            Err(e) => Err(("rope_parameters", e.to_string())),
        };
        let (rope, sliding_rope) = match ropes.single() {
            Some(rope) => (rope.clone(), None),
            None => (
                rotary("full_attention")?,
                match layer_types.contains(&LayerType::Sliding) {
                    true => Some(rotary("sliding_attention")?),
                    false => None,
                },
            ),
        };
        Ok(Self {
            layer_types,
            rope,
            sliding_rope,
        })
    }
}
