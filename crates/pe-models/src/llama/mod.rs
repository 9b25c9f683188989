//! [`LlamaFamily`]: a Llama / Qwen2 / Qwen3 / Phi-3 / Mistral / Gemma 3 / SmolLM3 / Ministral 3
//! / dense Llama 4 decoder from candle-nn layers and [`candle_pe_nn::LayerRotary`] (rotary, query scale, NoPE
//! layers).

use std::path::Path;

use anyhow::{bail, Context, Result};
use candle_core::{DType, Device, Module, Tensor};
use candle_nn::{Embedding, RmsNorm, VarBuilder};
use candle_pe_formats::RopeOverride;
use candle_pe_nn::At;
use candle_pe_nn::{LayerRotary, Positions, RotaryEmbedding};

use crate::checkpoint::checkpoint;
use crate::layers::{masked_softmax, rms_norm, tensor, Mask};
use crate::quant::{proj, Proj, QWeights, SideBySide};
use cache_policy::Stream;
use kv_buffer::{Keys, KvBuffer};
use unrotated::UnrotatedKeys;

pub use cache_policy::{CachePolicy, SinkPositions};
pub use config::{LayerType, LlamaConfig};
pub use family::{Bias, Family, ModelType, Window, FAMILIES};

mod cache_policy;
mod config;
mod family;
mod gguf;
mod kv_buffer;
mod streaming;
mod unrotated;

#[derive(Clone, Debug)]
struct Attention {
    /// The q, k and v projections: Phi-3's stacked `qkv_proj`, the others' three.
    qkv: SideBySide<3>,
    /// Qwen3's RMSNorms over each head of q and of k.
    qk_norm: Option<(RmsNorm, RmsNorm)>,
    o: Proj,
    heads: usize,
    kv_heads: usize,
    head_dim: usize,
    /// The rotation of q and k (and the scale of q) by position, or none on a NoPE layer.
    rotary: LayerRotary,
    /// Keys (rotated) of the tokens seen, laid out as the device's matmul reads them in place;
    /// the last `window` tokens with a sliding window.
    keys: Keys,
    /// Values of the tokens seen, `(batch, kv_heads, len, head_dim)`, as `keys`.
    values: KvBuffer,
    window: Option<usize>,
    /// Chunked attention's chunk (Llama 4): a query sees the earlier keys of its chunk only.
    chunk: Option<usize>,
    /// Llama 4's weightless RMSNorm over each head of q and of k, after the rotation.
    l2_norm: Option<RmsNorm>,
    /// What the scores are multiplied by: `1 / sqrt(head_dim)`, or Gemma's
    /// `1 / sqrt(query_pre_attn_scalar)`.
    scale: f64,
    /// With a [`CachePolicy`](crate::CachePolicy) (`llama/streaming.rs`): the keys before
    /// rotation, which the policy rotates again when it moves them.
    unrotated: Option<UnrotatedKeys>,
}

impl Attention {
    fn new(
        cfg: &LlamaConfig,
        rotary: LayerRotary,
        (window, chunk): (Option<usize>, Option<usize>),
        vb: &VarBuilder,
        q: &mut QWeights,
    ) -> Result<Self> {
        let (h, kvh, d) = (
            cfg.num_attention_heads,
            cfg.num_key_value_heads,
            cfg.head_dim,
        );
        let hidden = cfg.hidden_size;
        let qkv = match cfg.family().fused {
            true => SideBySide::stacked(
                proj(hidden, (h + 2 * kvh) * d, false, vb, q, "qkv_proj")?,
                [h * d, kvh * d, kvh * d],
            ),
            false => SideBySide::new([
                proj(hidden, h * d, cfg.qkv_bias, vb, q, "q_proj")?,
                proj(hidden, kvh * d, cfg.qkv_bias, vb, q, "k_proj")?,
                proj(hidden, kvh * d, cfg.qkv_bias, vb, q, "v_proj")?,
            ])?,
        };
        let qk_norm = match cfg.qk_norm {
            true => Some((norm(cfg, d, vb, "q_norm")?, norm(cfg, d, vb, "k_norm")?)),
            false => None,
        };
        let l2_norm = match cfg.qk_l2_norm && rotary.rotary().is_some() {
            true => {
                let ones = Tensor::ones(d, vb.dtype(), vb.device())?;
                Some(RmsNorm::new(ones, cfg.rms_norm_eps))
            }
            false => None,
        };
        Ok(Self {
            qkv,
            qk_norm,
            o: proj(h * d, hidden, cfg.o_bias, vb, q, "o_proj")?,
            heads: h,
            kv_heads: kvh,
            head_dim: d,
            rotary,
            keys: Keys::new(vb.device()),
            values: KvBuffer::new(2),
            window,
            chunk,
            l2_norm,
            scale: 1.0 / cfg.query_pre_attn_scalar.sqrt(),
            unrotated: None,
        })
    }

    /// `x` `(batch, seq, hidden)`, `positions` `(batch, seq)` (M-RoPE ids: `(3, batch, seq)`),
    /// `mask` `(batch, 1, seq, total)`
    /// (true where a query may see a key; `None` when every query sees every key).
    fn forward(
        &mut self,
        x: &Tensor,
        positions: &Positions,
        mask: Option<&Mask>,
    ) -> Result<Tensor> {
        let (b, s, _) = x.dims3()?;
        let (h, kvh, d) = (self.heads, self.kv_heads, self.head_dim);
        let [q, k, v] = self.qkv.forward(x)?;
        let split = |t: Tensor, heads: usize| -> Result<Tensor> {
            Ok(t.reshape((b, s, heads, d))?.transpose(1, 2)?.contiguous()?)
        };
        let (q, k, v) = (split(q, h)?, split(k, kvh)?, split(v, kvh)?);
        let (q, k) = match &self.qk_norm {
            Some((q_norm, k_norm)) => (q_norm.forward(&q)?, k_norm.forward(&k)?),
            None => (q, k),
        };
        let unrotated = k.clone();
        let (q, k) = match (self.rotary.rotary(), positions.dims().len()) {
            (Some(rotary), 3) => rotary.apply(&q, &k, At::mrope(positions))?,
            _ => self.rotary.apply(&q, &k, positions)?,
        };
        let (q, k) = match &self.l2_norm {
            Some(n) => (n.forward(&q.contiguous()?)?, n.forward(&k.contiguous()?)?),
            None => (q, k),
        };
        // Partial rotary returns a concatenated view: matmul wants contiguous rows.
        let q = q.contiguous()?;
        if let Some(kept) = &mut self.unrotated {
            kept.record(&unrotated, &v)?;
        }
        self.keys.append(&k)?;
        self.values.append(&v)?;
        let (Some(kt), Some(v)) = (self.keys.transposed()?, self.values.get()?) else {
            bail!("the KV cache holds no tokens")
        };
        // The cache's views skip its room after the tokens held: the CPU's gemm and CUDA's
        // cuBLAS read them in place (`Keys`); Metal's matmul is given packed tensors.
        let (kt, v) = match kt.device() {
            Device::Metal(_) => (kt.contiguous()?, v.contiguous()?),
            _ => (kt, v),
        };
        if let Some(w) = self.window {
            // No later query sees further back.
            self.keys.keep_last(w);
            self.values.keep_last(w);
        }
        self.attend(&q, &kt, &v, mask)
    }

    /// The attention of queries `q` `(batch, heads, seq, head_dim)` over the keys held `kt`
    /// (transposed) and values `v`, masked by `mask`, through the output projection.
    fn attend(&self, q: &Tensor, kt: &Tensor, v: &Tensor, mask: Option<&Mask>) -> Result<Tensor> {
        let (b, _, s, _) = q.dims4()?;
        let (h, kvh, d) = (self.heads, self.kv_heads, self.head_dim);
        // Each kv head's group of query heads as one matrix of rows: the cache is read once,
        // not repeated per query head.
        let (n, rep) = (v.dim(2)?, h / kvh);
        let q = q.reshape((b, kvh, rep * s, d))?;
        let scores = (q.matmul(kt)? * self.scale)?.reshape((b, h, s, n))?;
        let probs = masked_softmax(&scores, mask, v.dtype())?.reshape((b, kvh, rep * s, n))?;
        let out = probs
            .matmul(v)?
            .reshape((b, h, s, d))?
            .transpose(1, 2)?
            .reshape((b, s, h * d))?;
        self.o.forward(&out)
    }

    /// Keys and values held per head.
    fn held(&self) -> usize {
        self.values.len()
    }
}

/// The gated MLP: `down(act(gate(x)) * up(x))`, `act` SiLU or Gemma's GELU; Phi-3 stacks gate
/// and up (gate rows first).
#[derive(Clone, Debug)]
struct Mlp {
    gate_up: SideBySide<2>,
    down: Proj,
    act: candle_nn::Activation,
}

impl Mlp {
    fn new(cfg: &LlamaConfig, vb: &VarBuilder, q: &mut QWeights) -> Result<Self> {
        let (hidden, inter, bias) = (cfg.hidden_size, cfg.intermediate_size, cfg.mlp_bias);
        Ok(match cfg.family().fused {
            true => Mlp {
                gate_up: SideBySide::stacked(
                    proj(hidden, 2 * inter, false, vb, q, "gate_up_proj")?,
                    [inter, inter],
                ),
                down: proj(inter, hidden, false, vb, q, "down_proj")?,
                act: cfg.hidden_act,
            },
            false => Mlp {
                gate_up: SideBySide::new([
                    proj(hidden, inter, bias, vb, q, "gate_proj")?,
                    proj(hidden, inter, bias, vb, q, "up_proj")?,
                ])?,
                down: proj(inter, hidden, bias, vb, q, "down_proj")?,
                act: cfg.hidden_act,
            },
        })
    }

    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let [gate, up] = self.gate_up.forward(x)?;
        self.down.forward(&(self.act.forward(&gate)? * up)?)
    }
}

/// A decoder layer: `x + attn(norm(x))`, then `h + mlp(norm(h))`; Gemma also normalises the
/// attention's and the MLP's outputs before adding them.
#[derive(Clone, Debug)]
struct Layer {
    input_norm: RmsNorm,
    attn: Attention,
    /// Gemma's `post_attention_layernorm`, on the attention's output.
    attn_out_norm: Option<RmsNorm>,
    /// The norm on the MLP's input: `post_attention_layernorm`, Gemma's
    /// `pre_feedforward_layernorm`.
    mlp_norm: RmsNorm,
    mlp: Mlp,
    /// Gemma's `post_feedforward_layernorm`, on the MLP's output.
    mlp_out_norm: Option<RmsNorm>,
}

impl Layer {
    fn new(cfg: &LlamaConfig, index: usize, vb: &VarBuilder, q: &mut QWeights) -> Result<Self> {
        let h = cfg.hidden_size;
        let sliding = match cfg.layer_types.get(index) {
            Some(t) => *t == LayerType::Sliding,
            None => cfg.sliding_window.is_some(),
        };
        let chunk = cfg
            .attention_chunk_size
            .filter(|_| cfg.layer_types.get(index) == Some(&LayerType::Chunked));
        let rope = match (sliding, &cfg.sliding_rope) {
            (true, Some(rope)) => rope,
            _ => &cfg.rope,
        };
        let window = cfg.sliding_window.filter(|_| sliding);
        let rotary = match cfg.nope_layers.get(index) {
            Some(true) => LayerRotary::Nope(cfg.nope_query_scale),
            _ => LayerRotary::Rotary(Box::new(RotaryEmbedding::new(rope.clone())?)),
        };
        let mlp_name = cfg.family().mlp_name;
        let (attn_out_norm, mlp_norm, mlp_out_norm) = match cfg.sandwich_norms {
            true => (
                Some(norm(cfg, h, vb, "post_attention_layernorm")?),
                norm(cfg, h, vb, "pre_feedforward_layernorm")?,
                Some(norm(cfg, h, vb, "post_feedforward_layernorm")?),
            ),
            false => (None, norm(cfg, h, vb, "post_attention_layernorm")?, None),
        };
        Ok(Self {
            input_norm: norm(cfg, h, vb, "input_layernorm")?,
            attn: Attention::new(cfg, rotary, (window, chunk), &vb.pp("self_attn"), q)?,
            attn_out_norm,
            mlp_norm,
            mlp: Mlp::new(cfg, &vb.pp(mlp_name), q)?,
            mlp_out_norm,
        })
    }

    /// The layer at `positions`, its attention masked by `mask` (see [`Attention::forward`]).
    fn forward(
        &mut self,
        x: &Tensor,
        positions: &Positions,
        mask: Option<&Mask>,
    ) -> Result<Tensor> {
        let h = self
            .attn
            .forward(&self.input_norm.forward(x)?, positions, mask)?;
        let h = match &self.attn_out_norm {
            Some(n) => n.forward(&h)?,
            None => h,
        };
        let x = (x + h)?;
        let m = self.mlp.forward(&self.mlp_norm.forward(&x)?)?;
        let m = match &self.mlp_out_norm {
            Some(n) => n.forward(&m)?,
            None => m,
        };
        Ok((x + m)?)
    }
}

/// The RMSNorm `name` of width `size`, its weight the scale minus `cfg.norm_offset`.
fn norm(cfg: &LlamaConfig, size: usize, vb: &VarBuilder, name: &str) -> Result<RmsNorm> {
    rms_norm(size, cfg.rms_norm_eps, cfg.norm_offset, vb, name)
}

/// Which positions a forward computes logits for.
#[derive(Clone, Copy, Debug)]
enum Logits {
    /// Every position's, as transformers' `forward`.
    Every,
    /// The last position's alone (transformers' `logits_to_keep=1`, as its `generate` runs a
    /// prompt).
    Last,
}

/// The attention masks of one forward, one per (window, chunk) the layers use.
struct Masks(Vec<(Reach, Option<Mask>)>);

/// What a layer's queries reach: a sliding window, a chunk.
type Reach = (Option<usize>, Option<usize>);

impl Masks {
    fn get(&self, reach: Reach) -> Option<&Mask> {
        self.0
            .iter()
            .find(|(r, _)| *r == reach)
            .and_then(|(_, m)| m.as_ref())
    }
}

/// A Llama-family decoder (`model_type` `llama`, `qwen2`, `qwen3`, `phi3`, `mistral`,
/// `gemma3_text`, `smollm3`, `ministral3`, dense `llama4_text`) with a KV cache
/// (bounded by the sliding window when there is one):
/// RMSNorm, grouped-query attention with exact rotary embeddings at per-token positions
/// ([`LayerRotary::apply`]: none on SmolLM3's NoPE layers, the queries scaled by position
/// in the same pass for Ministral 3), a causal + padding mask (and Mistral's or Phi-3's sliding
/// window), a SwiGLU MLP, and the output projection (`lm_head.weight`, or the token embedding
/// when `tie_word_embeddings`).
///
/// With an M-RoPE rope (`mrope_section`: the language model of Qwen2-VL, Qwen2.5-VL and
/// Qwen3-VL, `qwen2_vl`, `qwen2_5_vl`, `qwen3_vl`) the position ids are `(3, batch, seq)` (temporal, height, width,
/// as `get_rope_index` gives them: [`candle_pe_formats::QwenVlConfig::positions`]); `(batch,
/// seq)` ids are text positions, the same on the three rows.
#[derive(Clone, Debug)]
pub struct LlamaFamily {
    config: LlamaConfig,
    embed: Embedding,
    layers: Vec<Layer>,
    norm: RmsNorm,
    lm_head: Proj,
    rotary: RotaryEmbedding,
    /// Tokens seen since the cache was last cleared.
    cached: usize,
    /// The bounded cache's policy and positions, when there is one.
    stream: Option<Stream>,
}

impl LlamaFamily {
    /// The decoder of `config`, its weights read from `vb` under HF's names (`model.embed_tokens`,
    /// `model.layers.N...`, `model.norm`, `lm_head`). A missing tensor is an error naming it.
    pub fn new(config: &LlamaConfig, vb: VarBuilder) -> Result<Self> {
        Self::with_quantized(config, vb, QWeights::new())
    }

    /// The decoder of `config`, its projections quantized where `quantized` holds their
    /// weights (by HF name), its other weights read from `vb`. Each projection takes its
    /// weight out of `quantized`, so that a weight stacked with others (`SideBySide`) is freed
    /// as its layer is built, not held twice until the last layer.
    pub(crate) fn with_quantized(
        config: &LlamaConfig,
        vb: VarBuilder,
        mut quantized: QWeights,
    ) -> Result<Self> {
        let cfg = config;
        let rotary = RotaryEmbedding::new(cfg.rope.clone())?;
        // Qwen-VL checkpoints may nest the decoder under model.language_model.
        let model = match vb.contains_tensor("model.language_model.embed_tokens.weight") {
            true => vb.pp("model.language_model"),
            false => vb.pp("model"),
        };
        let embed_weight = tensor(
            &model,
            (cfg.vocab_size, cfg.hidden_size),
            "embed_tokens.weight",
        )?;
        let embed = Embedding::new(embed_weight.clone(), cfg.hidden_size);
        let layers = (0..cfg.num_hidden_layers)
            .map(|i| Layer::new(cfg, i, &model.pp(format!("layers.{i}")), &mut quantized))
            .collect::<Result<Vec<_>>>()?;
        let norm = norm(cfg, cfg.hidden_size, &model, "norm")?;
        let (h, v) = (cfg.hidden_size, cfg.vocab_size);
        let lm_head = match cfg.tie_word_embeddings {
            true if quantized.contains_key("model.embed_tokens.weight") => {
                proj(h, v, false, &model, &mut quantized, "embed_tokens")?
            }
            true => Proj::Dense(candle_nn::Linear::new(embed_weight, None)),
            false => proj(h, v, false, &vb, &mut quantized, "lm_head")?,
        };
        Ok(Self {
            config: cfg.clone(),
            embed,
            layers,
            norm,
            lm_head,
            rotary,
            cached: 0,
            stream: None,
        })
    }

    /// The model in `dir`: `config.json`, and `model.safetensors` or the shards listed by
    /// `model.safetensors.index.json`, with weights in `dtype`. Errors name the folder or
    /// file.
    pub fn from_dir(dir: impl AsRef<Path>, dtype: DType, device: &Device) -> Result<Self> {
        Self::from_dir_with_rope(dir, dtype, device, &RopeOverride::default())
    }

    /// [`Self::from_dir`] with the rope override `laid` written into `config.json` as a
    /// transformers user would ([`RopeOverride::apply_to_config`]); errors name its field.
    pub fn from_dir_with_rope(
        dir: impl AsRef<Path>,
        dtype: DType,
        device: &Device,
        laid: &RopeOverride,
    ) -> Result<Self> {
        let dir = dir.as_ref();
        if !dir.is_dir() {
            bail!("{}: not a folder", dir.display())
        }
        let config = crate::checkpoint::read_config(&dir.join("config.json"), |json| {
            LlamaConfig::from_hf_config(&laid.apply_to_config(json)?)
        })?;
        Self::new(&config, checkpoint(dir, dtype, device)?)
    }

    /// The configuration.
    pub fn config(&self) -> &LlamaConfig {
        &self.config
    }

    /// The device the weights live on.
    pub fn device(&self) -> &Device {
        self.embed.embeddings().device()
    }

    /// The rotary embedding of the layers (of the full-attention ones, where layer types
    /// differ).
    pub fn rotary(&self) -> &RotaryEmbedding {
        &self.rotary
    }

    /// The logits `(b, s, vocab)` of a call without tokens (`b` or `s` zero): empty, and the
    /// cache as it was.
    fn no_logits(&self, b: usize, s: usize, device: &Device) -> Result<Tensor> {
        let dtype = self.embed.embeddings().dtype();
        Ok(Tensor::zeros(
            (b, s, self.config.vocab_size),
            dtype,
            device,
        )?)
    }

    /// Tokens seen since the cache was last cleared: the next `attention_mask` covers them.
    pub fn cached_len(&self) -> usize {
        self.cached
    }

    /// Keys and values the KV cache holds per head in the layer that holds most:
    /// [`Self::cached_len`], or when every layer has a sliding window `w` at most `w` (the older
    /// ones are dropped, as no query sees them).
    pub fn kv_len(&self) -> usize {
        self.layers
            .iter()
            .map(|layer| layer.attn.held())
            .max()
            .unwrap_or(0)
    }

    /// Empties the KV cache (the next forward starts a new sequence).
    pub fn clear_cache(&mut self) {
        for layer in &mut self.layers {
            layer.attn.keys.clear();
            layer.attn.values.clear();
            if let Some(kept) = &mut layer.attn.unrotated {
                kept.clear();
            }
        }
        self.cached = 0;
        if let Some(stream) = &mut self.stream {
            stream.clear();
        }
    }

    /// The logits `(batch, seq, vocab)` of `input_ids` `(batch, seq)` at `position_ids`
    /// `(batch, seq)`, or with M-RoPE `(3, batch, seq)` (any integer dtype pe-nn takes: u32, i64,
    /// ...), appended to the KV cache. The position ids may live on the CPU whatever the model's
    /// device, and on a GPU that is cheapest: they are checked on the host, where ids on the GPU
    /// are read back once per call, and ids that run from one offset in every sequence rotate
    /// as that offset, with nothing sent.
    ///
    /// `attention_mask` `(batch, cached_len + seq)`, 1 for real tokens and 0 for padding, covers
    /// the cached tokens and the new ones (as transformers' `attention_mask` in `generate`);
    /// `None` is all ones. A query at cache index `i` sees keys `j <= i` whose mask is 1, and
    /// with a sliding window `w` only those with `j > i - w` (the cache then keeps the last `w`
    /// keys and values: [`Self::kv_len`]).
    pub fn forward(
        &mut self,
        input_ids: &Tensor,
        position_ids: &Tensor,
        attention_mask: Option<&Tensor>,
    ) -> Result<Tensor> {
        self.run(input_ids, position_ids, attention_mask, Logits::Every)
    }

    /// [`Self::forward`] with the logits of the last position alone, `(batch, 1, vocab)`:
    /// [`crate::greedy`]'s next token after a prompt, without multiplying the prompt's other
    /// positions by the vocabulary.
    pub(crate) fn forward_last(
        &mut self,
        input_ids: &Tensor,
        position_ids: &Tensor,
    ) -> Result<Tensor> {
        self.run(input_ids, position_ids, None, Logits::Last)
    }

    /// [`Self::forward`], with the logits `keep` asks for.
    fn run(
        &mut self,
        input_ids: &Tensor,
        position_ids: &Tensor,
        attention_mask: Option<&Tensor>,
        keep: Logits,
    ) -> Result<Tensor> {
        let (b, s) = input_ids
            .dims2()
            .context("input_ids must be (batch, seq)")?;
        let mrope = self.is_mrope() && position_ids.dims() == [3, b, s];
        if position_ids.dims() != [b, s] && !mrope {
            let also = match self.is_mrope() {
                true => format!(" or (3, {b}, {s}) (M-RoPE)"),
                false => String::new(),
            };
            bail!(
                "position_ids must have the shape of input_ids {:?}{also}, got {:?}",
                input_ids.dims(),
                position_ids.dims()
            )
        }
        if b == 0 || s == 0 {
            return self.no_logits(b, s, input_ids.device());
        }
        if self.stream.is_some() {
            bail!("this model has a cache policy: call forward_stream, which chooses the positions")
        }
        // Checked (and read) once for every layer.
        let positions = Positions::new(position_ids)?;
        let total = self.cached + s;
        let masks = self.masks(b, s, attention_mask, input_ids.device())?;
        let mut x = self.embed_tokens(input_ids)?;
        for layer in &mut self.layers {
            let mask = masks.get((layer.attn.window, layer.attn.chunk));
            x = layer.forward(&x, &positions, mask)?;
        }
        self.cached = total;
        self.logits(&x, keep)
    }

    /// The logits of the last layer's output `x` `(batch, seq, hidden)` at the positions `keep`
    /// asks for.
    fn logits(&self, x: &Tensor, keep: Logits) -> Result<Tensor> {
        let x = match keep {
            Logits::Every => x.clone(),
            Logits::Last => x.narrow(1, x.dim(1)? - 1, 1)?,
        };
        self.lm_head.forward(&self.norm.forward(&x)?)
    }

    /// The token embeddings of `input_ids`, times the embedding scale where there is one.
    fn embed_tokens(&self, input_ids: &Tensor) -> Result<Tensor> {
        let x = self.embed.forward(input_ids)?;
        Ok(match self.config.embedding_scale {
            Some(scale) => (x * scale)?,
            None => x,
        })
    }

    /// Whether the rope is M-RoPE (position ids `(3, batch, seq)`).
    pub fn is_mrope(&self) -> bool {
        self.config.rope.mrope_section.is_some()
    }

    /// Layer `layer`'s cache: the keys held, rotated, `(batch, kv_heads, len, head_dim)`, and the
    /// values `(batch, kv_heads, len, head_dim)`; `None` when empty or past the last layer. (From
    /// [`Self::from_gguf`] on a file whose pairs are adjacent, the keys' head dimensions are in
    /// the file's order.)
    pub fn kv_cache(&self, layer: usize) -> Result<Option<(Tensor, Tensor)>> {
        let Some(attn) = self.layers.get(layer).map(|l| &l.attn) else {
            return Ok(None);
        };
        let (Some(kt), Some(v)) = (attn.keys.transposed()?, attn.values.get()?) else {
            return Ok(None);
        };
        // Copies: the cache writes over its tensors in place.
        Ok(Some((kt.t()?.force_contiguous()?, v.force_contiguous()?)))
    }

    /// One mask per window size and chunk (full, sliding, chunked layers), each over the keys
    /// its layers hold (see [`Self::mask`]).
    fn masks(
        &self,
        b: usize,
        s: usize,
        attention_mask: Option<&Tensor>,
        device: &Device,
    ) -> Result<Masks> {
        let mut masks = Masks(vec![]);
        for layer in &self.layers {
            let reach = (layer.attn.window, layer.attn.chunk);
            if masks.0.iter().all(|(r, _)| *r != reach) {
                let held = layer.attn.held();
                let mask = self.mask(b, s, attention_mask, reach, held, device)?;
                masks.0.push((reach, mask));
            }
        }
        Ok(masks)
    }

    /// The boolean mask `(batch, 1, seq, held + seq)` as u8 of layers with `window` and
    /// `chunk` that hold `held` keys: the keys held and the new ones; `None` when it holds no 0
    /// (a decode step without padding, as long as the sliding window reaches the oldest key
    /// held and no chunk boundary lies between them).
    fn mask(
        &self,
        b: usize,
        s: usize,
        attention_mask: Option<&Tensor>,
        (window, chunk): Reach,
        held: usize,
        device: &Device,
    ) -> Result<Option<Mask>> {
        let (past, total) = (self.cached, self.cached + s);
        // The keys held start at token `first`.
        let first = past - held;
        // Without padding, a single new token sees every key held unless the window has left
        // the oldest behind: a decode step needs no mask.
        let one_chunk = chunk.is_none_or(|c| first / c == past / c);
        if attention_mask.is_none()
            && s == 1
            && one_chunk
            && window.is_none_or(|w| first + w > past)
        {
            return Ok(None);
        }
        let padding: Vec<Vec<u32>> = match attention_mask {
            Some(m) => {
                if m.dims() != [b, total] {
                    bail!(
                        "attention_mask must be (batch, cached + seq) = [{b}, {total}] ({past} cached tokens), got {:?}",
                        m.dims()
                    )
                }
                m.to_dtype(DType::U32)?.to_vec2()?
            }
            None => vec![vec![1; total]; b],
        };
        let mut data = Vec::with_capacity(b * s * (total - first));
        for row in &padding {
            // Chunks count from the row's first token after its left padding.
            let left = row.iter().take_while(|&&keep| keep == 0).count() as i64;
            let chunk_of = |i: usize, c: usize| (i as i64 - left).div_euclid(c as i64);
            for t in 0..s {
                let i = past + t;
                for (j, &keep) in row.iter().enumerate().skip(first) {
                    let in_window = window.is_none_or(|w| j + w > i);
                    let in_chunk = chunk.is_none_or(|c| chunk_of(j, c) == chunk_of(i, c));
                    data.push(u8::from(keep != 0 && j <= i && in_window && in_chunk));
                }
            }
        }
        if data.iter().all(|&keep| keep == 1) {
            return Ok(None);
        }
        let keep = Tensor::from_vec(data, (b, 1, s, total - first), device)?;
        Ok(Some(Mask::new(keep)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The largest difference between two logit tensors of one shape.
    fn distance(a: &Tensor, b: &Tensor) -> Result<f32> {
        assert_eq!(a.dims(), b.dims());
        Ok((a - b)?.abs()?.flatten_all()?.max(0)?.to_scalar::<f32>()?)
    }

    /// Keys held as computed (a GPU's layout, which cuBLAS reads in place) give the logits of
    /// the transposed layout the CPU holds (to gemm's order of sums), through a prefill and
    /// decode steps, past a sliding window (Mistral's, 8) and with a cache policy that moves
    /// keys and writes them again.
    #[test]
    fn either_key_layout_gives_the_same_logits() -> Result<()> {
        let policy = CachePolicy::Sink {
            sink: 2,
            window: 6,
            positions: SinkPositions::Contiguous,
        };
        for (fixture, policy) in [
            ("llama31", None),
            ("mistral", None),
            ("llama31", Some(policy)),
        ] {
            let dir = pe_testkit::fixture(&format!("models/{fixture}"));
            let mut held_t = LlamaFamily::from_dir(dir, DType::F32, &Device::Cpu)?;
            if let Some(policy) = policy {
                held_t = held_t.with_cache_policy(policy)?;
            }
            let mut held_rows = held_t.clone();
            for layer in &mut held_rows.layers {
                layer.attn.keys = Keys::laid_out(false);
            }
            let mut ids = Tensor::new(&[[5u32, 9, 2, 7, 11]], &Device::Cpu)?;
            let mut at = 0;
            let mut worst = 0f32;
            for _ in 0..20 {
                let s = ids.dim(1)?;
                let positions = Tensor::arange(at, at + s as u32, &Device::Cpu)?.unsqueeze(0)?;
                let [a, b] = [&mut held_t, &mut held_rows].map(|model| match policy {
                    Some(_) => model.forward_stream(&ids),
                    None => model.forward(&ids, &positions, None),
                });
                let (a, b) = (a?, b?);
                let d = distance(&a, &b)?;
                assert!(d <= 1e-5, "{fixture} {policy:?} at {at}: logits {d} apart");
                worst = worst.max(d);
                let next = a.squeeze(0)?.get(s - 1)?.argmax(0)?.to_scalar::<u32>()?;
                ids = Tensor::new(&[[next]], &Device::Cpu)?;
                at += s as u32;
            }
            assert_eq!(held_t.kv_len(), held_rows.kv_len());
            for layer in 0..held_t.config().num_hidden_layers {
                let (Some((ka, va)), Some((kb, vb))) =
                    (held_t.kv_cache(layer)?, held_rows.kv_cache(layer)?)
                else {
                    panic!("{fixture}: layer {layer} holds no keys")
                };
                // The first layer's keys and values come from the embeddings alone: the same
                // bits; deeper ones from attention that summed in another order.
                let tolerance = if layer == 0 { 0.0 } else { 1e-5 };
                for (what, a, b) in [("keys", ka, kb), ("values", va, vb)] {
                    let d = distance(&a, &b)?;
                    assert!(d <= tolerance, "{fixture} layer {layer} {what}: {d} apart");
                }
            }
            eprintln!("{fixture} {policy:?}: logits at most {worst:e} apart");
        }
        Ok(())
    }

    /// The last position's logits alone (greedy's prompt) are the last row of every
    /// position's, and leave the cache as `forward` leaves it: on a safetensors fixture, a
    /// Q8_0 GGUF one (per-row products: the same bits) and with a cache policy.
    #[test]
    fn last_logits_are_the_last_row_of_all() -> Result<()> {
        let dev = Device::Cpu;
        let policy = CachePolicy::Sink {
            sink: 2,
            window: 6,
            positions: SinkPositions::Contiguous,
        };
        let dir = pe_testkit::fixture("models/llama31");
        let gguf = pe_testkit::fixture("gguf/llama31_q8_0.gguf");
        let models = [
            (LlamaFamily::from_dir(&dir, DType::F32, &dev)?, 1e-5),
            (LlamaFamily::from_gguf(gguf, DType::F32, &dev)?, 0.0),
            (
                LlamaFamily::from_dir(&dir, DType::F32, &dev)?.with_cache_policy(policy)?,
                1e-5,
            ),
        ];
        for (model, tolerance) in models {
            let stream = model.cache_policy().is_some();
            let (mut every, mut last) = (model.clone(), model);
            for (at, ids) in [(0u32, &[5u32, 9, 2, 7, 11][..]), (5, &[3]), (6, &[8, 4])] {
                let s = ids.len();
                let ids = Tensor::new(ids, &dev)?.unsqueeze(0)?;
                let positions = Tensor::arange(at, at + s as u32, &dev)?.unsqueeze(0)?;
                let (all, one) = match stream {
                    true => (every.forward_stream(&ids)?, last.forward_stream_last(&ids)?),
                    false => (
                        every.forward(&ids, &positions, None)?,
                        last.forward_last(&ids, &positions)?,
                    ),
                };
                assert_eq!(one.dims(), [1, 1, every.config().vocab_size]);
                let d = distance(&all.narrow(1, s - 1, 1)?, &one)?;
                assert!(d <= tolerance, "stream {stream} at {at}: {d} apart");
                assert_eq!(every.cached_len(), last.cached_len());
                assert_eq!(every.kv_len(), last.kv_len());
            }
        }
        Ok(())
    }
}
