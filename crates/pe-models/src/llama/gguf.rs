//! [`LlamaFamily::from_gguf`]: the reference decoder from a GGUF file, for the architectures
//! of the [`Family`] rows (llama, which Mistral converts as, qwen2, qwen3, phi3, gemma3), its
//! rotary embedding from pe-formats' [`GgufRope`], its quantized projections on candle's
//! `QMatMul`; and [`LlamaFamily::from_gguf_dequantized`], its dense twin.
//!
//! The configuration comes from llama.cpp's keys (`embedding_length`, `feed_forward_length`,
//! `block_count`, `attention.head_count`, `attention.head_count_kv`,
//! `attention.layer_norm_rms_epsilon`, `attention.sliding_window`: 0, which llama.cpp's
//! converter writes for a Phi-3 or Phi-4 without a window, is none, as llama.cpp reads it),
//! the layer types and their ropes from [`GgufRope`] (Gemma 3's sliding layers), the
//! vocabulary from `token_embd.weight`, the biases and the tied output from which tensors
//! exist, and the rest from the family's row: qk-norm, the norms around the attention and the
//! MLP, the activation, the embedding scale. Norm weights are used as stored (llama.cpp's
//! converter writes Gemma's as the scale itself). Tensors are renamed to transformers' names;
//! one the decoder does not read is an error naming it. llama.cpp's converter permutes the Q and
//! K rows of files whose pairs are adjacent ([`PairLayout::Interleaved`]) so that rotating
//! adjacent pairs is transformers' `rotate_half`: `from_gguf` rotates them so (attention scores
//! do not change when queries and keys share a permutation of head dimensions), the twin puts
//! the rows back in transformers' order and rotates halves as for a safetensors checkpoint.

use std::collections::HashMap;
use std::path::Path;

use anyhow::{bail, Context as _, Result};
use std::sync::Arc;

use candle_core::quantized::gguf_file::Content;
use candle_core::quantized::GgmlDType;
use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_pe_core::PairLayout;
use candle_pe_formats::{GgufMeta, GgufRope, RopeOverride};

use super::config::{activation, LlamaConfig, RotaryLayers};
use super::family::Family;
use super::LlamaFamily;
use crate::quant::QWeights;

impl LlamaFamily {
    /// The decoder stored in the GGUF file at `path`, on `device`, as the file lays it out: its
    /// quantized projections (attention, MLP, output) multiply through candle's `QMatMul`, its
    /// other tensors are dense in `dtype`, and the Q and K of files whose pairs are adjacent
    /// ([`PairLayout::Interleaved`]) are rotated as adjacent pairs. Errors name the file and
    /// the key or tensor.
    pub fn from_gguf(path: impl AsRef<Path>, dtype: DType, device: &Device) -> Result<Self> {
        load(path.as_ref(), dtype, device, true, &RopeOverride::default())
    }

    /// [`Self::from_gguf`] with the rope override `laid`, applied as llama.cpp applies its
    /// context parameters ([`RopeOverride::apply_to_gguf`]); errors name the override's field.
    pub fn from_gguf_with_rope(
        path: impl AsRef<Path>,
        dtype: DType,
        device: &Device,
        laid: &RopeOverride,
    ) -> Result<Self> {
        load(path.as_ref(), dtype, device, true, laid)
    }

    /// The same decoder with every weight dequantized (to f32, then `dtype`) and the Q and K
    /// rows of adjacent-pair files put back in transformers' order, so it rotates halves as for
    /// a safetensors checkpoint: the plain twin [`Self::from_gguf`] is held to.
    pub fn from_gguf_dequantized(
        path: impl AsRef<Path>,
        dtype: DType,
        device: &Device,
    ) -> Result<Self> {
        load(
            path.as_ref(),
            dtype,
            device,
            false,
            &RopeOverride::default(),
        )
    }

    /// [`Self::from_gguf_dequantized`] with the rope override `laid`, as
    /// [`Self::from_gguf_with_rope`] applies it.
    pub fn from_gguf_dequantized_with_rope(
        path: impl AsRef<Path>,
        dtype: DType,
        device: &Device,
        laid: &RopeOverride,
    ) -> Result<Self> {
        load(path.as_ref(), dtype, device, false, laid)
    }
}

/// The decoder of the GGUF file at `path`, its quantized weights kept when `quantized`, its
/// rope overridden by `laid`.
fn load(
    path: &Path,
    dtype: DType,
    device: &Device,
    quantized: bool,
    laid: &RopeOverride,
) -> Result<LlamaFamily> {
    let in_file = || format!("{}", path.display());
    let mut file = std::fs::File::open(path).with_context(in_file)?;
    let content = Content::read(&mut file).with_context(in_file)?;
    let rope = read_rope(path, &content, &mut file, laid)?;
    let mut config = config(&content, &rope).with_context(in_file)?;
    // In the file's layout, adjacent pairs rotate together; un-permuted, halves do.
    let layout = match quantized {
        true => rope.layout,
        false => PairLayout::Halves,
    };
    config.rope.pair_layout = layout;
    if let Some(sliding) = &mut config.sliding_rope {
        sliding.pair_layout = layout;
    }
    let mut dense = HashMap::new();
    let mut kept = QWeights::new();
    for name in content.tensor_infos.keys() {
        let Some(hf) =
            hf_name(name, config.family()).with_context(|| format!("{}", path.display()))?
        else {
            continue;
        };
        let q = content
            .tensor(&mut file, name, device)
            .with_context(|| format!("{}: tensor {name}", path.display()))?;
        let is_quantized = !matches!(q.dtype(), GgmlDType::F32 | GgmlDType::F16 | GgmlDType::BF16);
        // The embedding is looked up densely; a tied output multiplies by its quantized rows.
        let embedding = hf == "model.embed_tokens.weight";
        let t = match (quantized && is_quantized, embedding) {
            (true, false) => None,
            _ => Some(
                q.dequantize(device)
                    .with_context(|| format!("{}: tensor {name}", path.display()))?,
            ),
        };
        let t = match (t, quantized, rope.layout, hf.rsplit('.').nth(1)) {
            (Some(t), false, PairLayout::Interleaved, Some("q_proj")) => {
                Some(unpermute(&t, config.num_attention_heads)?)
            }
            (Some(t), false, PairLayout::Interleaved, Some("k_proj")) => {
                Some(unpermute(&t, config.num_key_value_heads)?)
            }
            (t, ..) => t,
        };
        if quantized && is_quantized {
            kept.insert(hf.clone(), Arc::new(q));
        }
        if let Some(t) = t {
            dense.insert(hf, t);
        }
    }
    let vb = VarBuilder::from_tensors(dense, dtype, device);
    LlamaFamily::with_quantized(&config, vb, kept).with_context(in_file)
}

/// The file's rope as llama.cpp runs it with the override `laid`. An error names the file, but
/// the override's own stays typed, for the caller to name its flag.
fn read_rope(
    path: &Path,
    content: &Content,
    file: &mut std::fs::File,
    laid: &RopeOverride,
) -> Result<GgufRope> {
    laid.apply_to_gguf(content, file).map_err(|e| match e {
        e @ candle_pe_formats::Error::Override { .. } => anyhow::Error::from(e),
        e => anyhow::anyhow!("{}: {e}", path.display()),
    })
}

/// transformers' name of a GGUF tensor of `family`'s decoder; `None` for the rope tensors
/// (read by [`GgufRope`]); an error names any other tensor the decoder does not read.
fn hf_name(name: &str, family: &Family) -> Result<Option<String>> {
    const ROPE: &[&str] = &["rope_freqs", "rope_factors_long", "rope_factors_short"];
    if ROPE.contains(&name.trim_end_matches(".weight")) {
        return Ok(None);
    }
    let fixed = match name {
        "token_embd.weight" => Some("model.embed_tokens.weight"),
        "output_norm.weight" => Some("model.norm.weight"),
        "output.weight" => Some("lm_head.weight"),
        _ => None,
    };
    if let Some(n) = fixed {
        return Ok(Some(n.to_string()));
    }
    // llama.cpp's names of a block's tensors, and transformers' (which the family decides for
    // the MLP's input norm and its fused projection).
    let hf_part = |part: &str| -> Option<&'static str> {
        Some(match part {
            "attn_norm" => "input_layernorm",
            "ffn_norm" if family.sandwich_norms => "pre_feedforward_layernorm",
            "ffn_norm" => "post_attention_layernorm",
            "post_attention_norm" if family.sandwich_norms => "post_attention_layernorm",
            "post_ffw_norm" if family.sandwich_norms => "post_feedforward_layernorm",
            "attn_q_norm" if family.qk_norm => "self_attn.q_norm",
            "attn_k_norm" if family.qk_norm => "self_attn.k_norm",
            "attn_q" => "self_attn.q_proj",
            "attn_k" => "self_attn.k_proj",
            "attn_v" => "self_attn.v_proj",
            "attn_qkv" if family.fused => "self_attn.qkv_proj",
            "attn_output" => "self_attn.o_proj",
            "ffn_gate" => "mlp.gate_proj",
            "ffn_up" if family.fused => "mlp.gate_up_proj",
            "ffn_up" => "mlp.up_proj",
            "ffn_down" => "mlp.down_proj",
            _ => return None,
        })
    };
    let hf = name.strip_prefix("blk.").and_then(|rest| {
        let (layer, rest) = rest.split_once('.')?;
        let (part, suffix) = rest.rsplit_once('.')?;
        Some(format!("model.layers.{layer}.{}.{suffix}", hf_part(part)?))
    });
    match hf {
        Some(hf) => Ok(Some(hf)),
        None => bail!(
            "tensor {name}: not one the {} decoder reads",
            family.model_type.name()
        ),
    }
}

/// The inverse of the converter's per-head permutation of Q or K rows (`heads` heads): the two
/// interleaved halves of each head back in order.
fn unpermute(t: &Tensor, heads: usize) -> Result<Tensor> {
    let dims = t.dims().to_vec();
    let rows = dims[0];
    let cols: usize = dims[1..].iter().product();
    if heads == 0 || !rows.is_multiple_of(2 * heads) {
        bail!("{rows} rows of Q or K do not split into {heads} heads of pairs");
    }
    Ok(t.reshape((heads, rows / heads / 2, 2, cols))?
        .transpose(1, 2)?
        .contiguous()?
        .reshape(dims)?)
}

/// `attention.head_count` (at least 1) and `attention.head_count_kv` (default: the heads),
/// which must divide it.
fn read_heads(meta: &GgufMeta, arch: &str) -> Result<(usize, usize)> {
    let key = |k: &str| format!("{arch}.{k}");
    let heads = meta
        .count(&key("attention.head_count"))?
        .with_context(|| format!("key {} is missing", key("attention.head_count")))?;
    if heads == 0 {
        bail!(
            "key {}: must be at least 1, got 0",
            key("attention.head_count")
        );
    }
    let kv_heads = meta
        .count(&key("attention.head_count_kv"))?
        .unwrap_or(heads);
    // llama.cpp reads a layer with 0 KV heads as one without attention (hybrid models), which
    // this decoder does not have.
    if kv_heads == 0 || !heads.is_multiple_of(kv_heads) {
        bail!(
            "key {}: must divide {} = {heads} (and be at least 1), got {kv_heads}",
            key("attention.head_count_kv"),
            key("attention.head_count")
        );
    }
    Ok((heads, kv_heads))
}

/// The family row of the file's architecture.
fn family_of(arch: &str) -> Result<&'static Family> {
    Family::by_gguf_architecture(arch).with_context(|| {
        format!(
            "key general.architecture: the reference decoder reads {} files (Mistral converts \
             as llama), got {arch:?}",
            Family::gguf_list()
        )
    })
}

/// The attention window: llama.cpp's converter writes 0 for a model without one (Phi-3's
/// `"sliding_window": null`), and llama.cpp reads 0 as none, not a window of 0 tokens.
fn sliding_window(meta: &GgufMeta, arch: &str) -> Result<Option<usize>> {
    let key = format!("{arch}.attention.sliding_window");
    Ok(meta.count(&key)?.filter(|&w| w > 0))
}

/// What the scores are divided by the square root of: `head_dim`, or for the families with
/// Gemma's `query_pre_attn_scalar` llama.cpp's attention scale, `embedding_length /
/// head_count` for Gemma 3 27B (62 layers) and `head_dim` else.
fn query_pre_attn_scalar(
    family: &Family,
    layers: usize,
    hidden: usize,
    heads: usize,
    head_dim: usize,
) -> f64 {
    match family.query_pre_attn_scalar {
        Some(_) if layers == 62 => (hidden / heads) as f64,
        _ => head_dim as f64,
    }
}

/// The count `{arch}.{k}`, which must be there.
fn required(meta: &GgufMeta, arch: &str, k: &str) -> Result<usize> {
    let key = format!("{arch}.{k}");
    meta.count(&key)?
        .with_context(|| format!("key {key} is missing"))
}

/// The vocabulary size: the rows of `token_embd.weight`.
fn vocab_size(content: &Content) -> Result<usize> {
    match content.tensor_infos.get("token_embd.weight") {
        Some(info) => Ok(info.shape.dims()[0]),
        None => bail!("tensor token_embd.weight is missing"),
    }
}

/// The configuration of a GGUF file: sizes from llama.cpp's keys and tensors, layer types and
/// ropes from `rope`, the rest from the family's row.
fn config(content: &Content, rope: &GgufRope) -> Result<LlamaConfig> {
    let arch = rope.architecture.as_str();
    let family = family_of(arch)?;
    let meta = GgufMeta::new(content);
    let key = |k: &str| format!("{arch}.{k}");
    let vocab_size = vocab_size(content)?;
    let hidden_size = required(&meta, arch, "embedding_length")?;
    let layers = required(&meta, arch, "block_count")?;
    let (heads, kv_heads) = read_heads(&meta, arch)?;
    // The f32 as stored, widened: the epsilon llama.cpp adds.
    let eps = meta
        .f64(&key("attention.layer_norm_rms_epsilon"))?
        .unwrap_or(1e-5);
    let sliding_window = sliding_window(&meta, arch)?;
    let rotary = RotaryLayers::read(&rope.configs, layers, sliding_window, None)
        .map_err(|(_, message)| anyhow::anyhow!("key {}: {message}", key("rope.freq_base_swa")))?;
    let head_dim = rotary.rope.head_dim;
    let query_pre_attn_scalar = query_pre_attn_scalar(family, layers, hidden_size, heads, head_dim);
    let has = |t: &str| content.tensor_infos.contains_key(t);
    let (_, act) = family.activation;
    Ok(LlamaConfig {
        model_type: family.model_type,
        vocab_size,
        hidden_size,
        intermediate_size: required(&meta, arch, "feed_forward_length")?,
        hidden_act: activation(act).map_err(anyhow::Error::msg)?,
        num_hidden_layers: layers,
        num_attention_heads: heads,
        num_key_value_heads: kv_heads,
        head_dim,
        rms_norm_eps: eps,
        qkv_bias: has("blk.0.attn_q.bias") || has("blk.0.attn_qkv.bias"),
        o_bias: has("blk.0.attn_output.bias"),
        qk_norm: family.qk_norm,
        qk_l2_norm: false,
        sandwich_norms: family.sandwich_norms,
        // llama.cpp's converter stores Gemma's norm weights as the scale itself (1 + w).
        norm_offset: 0.0,
        query_pre_attn_scalar,
        embedding_scale: family
            .embedding_scale
            .then(|| f64::from((hidden_size as f32).sqrt())),
        mlp_bias: has("blk.0.ffn_down.bias"),
        tie_word_embeddings: !has("output.weight"),
        sliding_window,
        attention_chunk_size: None,
        layer_types: rotary.layer_types,
        rope: rotary.rope,
        sliding_rope: rotary.sliding_rope,
        nope_layers: Vec::new(),
        nope_query_scale: None,
    })
}
