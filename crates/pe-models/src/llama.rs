//! [`LlamaFamily`]: a Llama / Qwen2 / Qwen3 / Phi-3 / Mistral / Gemma 3 / SmolLM3 / Ministral 3
//! / dense Llama 4 decoder from candle-nn layers and [`candle_pe_nn::LayerRotary`] (rotary, query scale, NoPE
//! layers).

use std::path::Path;

use anyhow::{bail, Context, Result};
use candle_core::{DType, Device, Module, Tensor};
use candle_nn::{Embedding, RmsNorm, VarBuilder};
use candle_pe_nn::{LayerRotary, Positions, RotaryEmbedding};

use crate::config::{LayerType, LlamaConfig};
use crate::kv_buffer::KvBuffer;
use crate::layers::{checkpoint, masked_softmax, rms_norm, tensor, SideBySide};
use crate::proj::{proj, Proj, QWeights};
use crate::stream::{CachePolicy, Stream, Surgery};

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
    /// Keys (rotated) of the tokens seen, transposed, `(batch, kv_heads, head_dim, len)`, as the
    /// scores' matmul reads them; the last `window` tokens with a sliding window.
    keys: KvBuffer,
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
    /// With a [`CachePolicy`]: the cached keys before rotation, `(batch, kv_heads, len,
    /// head_dim)`, from which kept keys are rotated again at their new positions.
    unrotated: KvBuffer,
    /// With a [`CachePolicy`]: the keys before rotation and the values of the last step's new
    /// tokens, as first computed.
    fresh: Option<(Tensor, Tensor)>,
}

/// What a step of a [`CachePolicy`] cache does to the keys held before the new ones join: the
/// surgery and the new positions of the tokens it moves, `(batch, moved)`.
struct StreamStep<'a> {
    surgery: Option<(&'a Surgery, &'a Positions)>,
}

impl Attention {
    fn new(
        cfg: &LlamaConfig,
        rotary: LayerRotary,
        (window, chunk): (Option<usize>, Option<usize>),
        vb: &VarBuilder,
        q: &QWeights,
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
            keys: KvBuffer::new(3),
            values: KvBuffer::new(2),
            window,
            chunk,
            l2_norm,
            scale: 1.0 / cfg.query_pre_attn_scalar.sqrt(),
            unrotated: KvBuffer::new(2),
            fresh: None,
        })
    }

    /// `x` `(batch, seq, hidden)`, `positions` `(batch, seq)` (M-RoPE ids: `(3, batch, seq)`),
    /// `mask` `(batch, 1, seq, total)`
    /// (true where a query may see a key; `None` when every query sees every key).
    fn forward(
        &mut self,
        x: &Tensor,
        positions: &Positions,
        mask: Option<&Tensor>,
        stream: Option<StreamStep>,
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
            (Some(rotary), 3) => rotary.apply_mrope(&q, &k, positions)?,
            _ => self.rotary.apply_at(&q, &k, positions)?,
        };
        let (q, k) = match &self.l2_norm {
            Some(n) => (n.forward(&q.contiguous()?)?, n.forward(&k.contiguous()?)?),
            None => (q, k),
        };
        // Partial rotary returns a concatenated view: matmul wants contiguous rows. The new keys
        // are transposed once here, so a decode step does not transpose the whole cache.
        let (q, kt) = (q.contiguous()?, k.t()?.contiguous()?);
        if let Some(step) = &stream {
            if let Some((surgery, moved)) = step.surgery {
                self.operate(surgery, moved)?;
            }
            self.fresh = Some((unrotated.clone(), v.clone()));
            self.unrotated.append(&unrotated)?;
        }
        self.keys.append(&kt)?;
        self.values.append(&v)?;
        let (Some(kt), Some(v)) = (self.keys.get()?, self.values.get()?) else {
            bail!("the KV cache holds no tokens")
        };
        // The cache's views skip its room between rows: CPU matmuls read them as they are, CUDA's
        // and Metal's take packed rows only.
        let (kt, v) = match kt.device().is_cpu() {
            true => (kt, v),
            false => (kt.contiguous()?, v.contiguous()?),
        };
        if let (None, Some(w)) = (&stream, self.window) {
            // No later query sees further back.
            self.keys.keep_last(w);
            self.values.keep_last(w);
        }
        // Each kv head's group of query heads as one matrix of rows: the cache is read once,
        // not repeated per query head.
        let (n, rep) = (v.dim(2)?, h / kvh);
        let q = q.reshape((b, kvh, rep * s, d))?;
        let scores = (q.matmul(&kt)? * self.scale)?.reshape((b, h, s, n))?;
        let probs = masked_softmax(&scores, mask, v.dtype())?.reshape((b, kvh, rep * s, n))?;
        let out = probs
            .matmul(&v)?
            .reshape((b, h, s, d))?
            .transpose(1, 2)?
            .reshape((b, s, h * d))?;
        self.o.forward(&out)
    }

    /// Drops the tokens `surgery.drop` from the cache and rotates the keys of `surgery.moved`
    /// again, from their keys before rotation, at `moved` `(batch, moved)` (M-RoPE: `(3, batch,
    /// moved)`), as the new keys are rotated: one rounding from the exact rotation at the new
    /// position, however often a token moves.
    fn operate(&mut self, surgery: &Surgery, moved: &Positions) -> Result<()> {
        let len = self.unrotated.len();
        if len == 0 {
            return Ok(());
        }
        let drop = &surgery.drop;
        if !drop.is_empty() && drop.end <= len {
            self.keys.remove(drop.clone())?;
            self.values.remove(drop.clone())?;
            self.unrotated.remove(drop.clone())?;
        }
        let m = surgery.moved.len();
        if let (true, Some(unrotated)) = (m > 0, self.unrotated.get()?) {
            let keys = unrotated.narrow(2, surgery.moved.start, m)?.contiguous()?;
            let turned = match (self.rotary.rotary(), moved.dims().len()) {
                (Some(rotary), 3) => rotary.apply_k_mrope(&keys, moved)?,
                (Some(rotary), _) => rotary.apply_k_at(&keys, moved)?,
                // A NoPE layer's keys stay as they are wherever they move.
                (None, _) => keys,
            };
            self.keys
                .write(surgery.moved.start, &turned.t()?.contiguous()?)?;
        }
        Ok(())
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
    fn new(cfg: &LlamaConfig, vb: &VarBuilder, q: &QWeights) -> Result<Self> {
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
    fn new(cfg: &LlamaConfig, index: usize, vb: &VarBuilder, q: &QWeights) -> Result<Self> {
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

    fn forward(&mut self, x: &Tensor, positions: &Positions, masks: &Masks) -> Result<Tensor> {
        let mask = masks.get((self.attn.window, self.attn.chunk));
        self.forward_with(x, positions, mask, None)
    }

    /// The layer with the attention's mask given, and a bounded cache's step.
    fn forward_with(
        &mut self,
        x: &Tensor,
        positions: &Positions,
        mask: Option<&Tensor>,
        stream: Option<StreamStep>,
    ) -> Result<Tensor> {
        let h = self
            .attn
            .forward(&self.input_norm.forward(x)?, positions, mask, stream)?;
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

/// The attention masks of one forward, one per (window, chunk) the layers use.
struct Masks(Vec<(Reach, Option<Tensor>)>);

/// What a layer's queries reach: a sliding window, a chunk.
type Reach = (Option<usize>, Option<usize>);

impl Masks {
    fn get(&self, reach: Reach) -> Option<&Tensor> {
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
/// ([`LayerRotary::apply_at`]: none on SmolLM3's NoPE layers, the queries scaled by position
/// in the same pass for Ministral 3), a causal + padding mask (and Mistral's or Phi-3's sliding
/// window), a SwiGLU MLP, and the output projection (`lm_head.weight`, or the token embedding
/// when `tie_word_embeddings`).
///
/// With an M-RoPE rope (`mrope_section`: the language model of Qwen2-VL, Qwen2.5-VL and
/// Qwen3-VL, `qwen2_vl`, `qwen2_5_vl`, `qwen3_vl`) the position ids are `(3, batch, seq)` (temporal, height, width,
/// as `get_rope_index` gives them: [`candle_pe_core::QwenVlConfig::positions`]); `(batch,
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
        Self::with_quantized(config, vb, &QWeights::new())
    }

    /// The decoder of `config`, its projections quantized where `quantized` holds their
    /// weights (by HF name), its other weights read from `vb`.
    pub(crate) fn with_quantized(
        config: &LlamaConfig,
        vb: VarBuilder,
        quantized: &QWeights,
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
            .map(|i| Layer::new(cfg, i, &model.pp(format!("layers.{i}")), quantized))
            .collect::<Result<Vec<_>>>()?;
        let norm = norm(cfg, cfg.hidden_size, &model, "norm")?;
        let (h, v) = (cfg.hidden_size, cfg.vocab_size);
        let lm_head = match cfg.tie_word_embeddings {
            true if quantized.contains_key("model.embed_tokens.weight") => {
                proj(h, v, false, &model, quantized, "embed_tokens")?
            }
            true => Proj::Dense(candle_nn::Linear::new(embed_weight, None)),
            false => proj(h, v, false, &vb, quantized, "lm_head")?,
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
        let dir = dir.as_ref();
        if !dir.is_dir() {
            bail!("{}: not a folder", dir.display())
        }
        let config = LlamaConfig::from_file(dir.join("config.json"))?;
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
            layer.attn.unrotated.clear();
            layer.attn.fresh = None;
        }
        self.cached = 0;
        if let Some(stream) = &mut self.stream {
            stream.clear();
        }
    }

    /// The logits `(batch, seq, vocab)` of `input_ids` `(batch, seq)` at `position_ids`
    /// `(batch, seq)`, or with M-RoPE `(3, batch, seq)` (any integer dtype pe-nn takes: u32, i64,
    /// ...), appended to the KV cache.
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
        // One mask per window size and chunk (full, sliding, chunked layers), each over the
        // keys its layers hold.
        let mut masks = Masks(vec![]);
        for layer in &self.layers {
            let reach = (layer.attn.window, layer.attn.chunk);
            if masks.0.iter().all(|(r, _)| *r != reach) {
                let held = layer.attn.held();
                let mask = self.mask(b, s, attention_mask, reach, held, input_ids.device())?;
                masks.0.push((reach, mask));
            }
        }
        let mut x = self.embed.forward(input_ids)?;
        if let Some(scale) = self.config.embedding_scale {
            x = (x * scale)?;
        }
        for layer in &mut self.layers {
            x = layer.forward(&x, &positions, &masks)?;
        }
        self.cached = total;
        self.lm_head.forward(&self.norm.forward(&x)?)
    }

    /// The same model bounding its KV cache by `policy` (see [`CachePolicy`]): generation then
    /// goes through [`forward_stream`](Self::forward_stream), which chooses the positions, and
    /// can go on past the model's context. The policy replaces the config's sliding window.
    /// The cache is cleared.
    pub fn with_cache_policy(mut self, policy: CachePolicy) -> Result<Self> {
        policy.check()?;
        if self.is_mrope() && !matches!(policy, CachePolicy::Keep { .. }) {
            bail!(
                "an M-RoPE model bounds its cache by a context shift (--keep) only, got {policy:?}"
            )
        }
        if let Some(c) = self.config.attention_chunk_size {
            bail!(
                "a cache policy is not supported with chunked attention (attention_chunk_size {c})"
            )
        }
        self.stream = Some(Stream::new(policy));
        self.clear_cache();
        Ok(self)
    }

    /// The cache policy, if the cache is bounded by one.
    pub fn cache_policy(&self) -> Option<CachePolicy> {
        self.stream.as_ref().map(|s| s.policy)
    }

    /// Whether the rope is M-RoPE (position ids `(3, batch, seq)`).
    pub fn is_mrope(&self) -> bool {
        self.config.rope.mrope_section.is_some()
    }

    /// With a cache policy and M-RoPE, the ids (temporal, height, width) of each token held, in
    /// cache order (the keys held are rotated at them); empty otherwise.
    pub fn cache_mrope_positions(&self) -> Vec<[i64; 3]> {
        self.stream
            .as_ref()
            .map_or_else(Vec::new, |s| s.mrope.clone())
    }

    /// With a cache policy, the position of each token held, in cache order (the keys held are
    /// rotated at them; with M-RoPE, its index in the cache); empty otherwise.
    pub fn cache_positions(&self) -> Vec<i64> {
        self.stream
            .as_ref()
            .map_or_else(Vec::new, |s| s.positions.clone())
    }

    /// Layer `layer`'s cache: the keys held, rotated, `(batch, kv_heads, len, head_dim)`, and the
    /// values `(batch, kv_heads, len, head_dim)`; `None` when empty or past the last layer. (From
    /// [`Self::from_gguf`] on a file whose pairs are adjacent, the keys' head dimensions are in
    /// the file's order.)
    pub fn kv_cache(&self, layer: usize) -> Result<Option<(Tensor, Tensor)>> {
        let Some(attn) = self.layers.get(layer).map(|l| &l.attn) else {
            return Ok(None);
        };
        let (Some(kt), Some(v)) = (attn.keys.get()?, attn.values.get()?) else {
            return Ok(None);
        };
        // Copies: the cache writes over its tensors in place.
        Ok(Some((kt.t()?.force_contiguous()?, v.force_contiguous()?)))
    }

    /// With a cache policy, layer `layer`'s keys before rotation and values of the tokens of the
    /// last [`forward_stream`](Self::forward_stream), as they were computed, `(batch, kv_heads,
    /// seq, head_dim)` each.
    pub fn fresh_kv(&self, layer: usize) -> Option<(Tensor, Tensor)> {
        self.layers.get(layer)?.attn.fresh.clone()
    }

    /// The logits `(batch, seq, vocab)` of `input_ids` `(batch, seq)` appended to a cache bounded
    /// by the [`CachePolicy`] (every row at the same positions, no padding): the policy
    /// chooses the new tokens' positions, drops the tokens it evicts and rotates the keys it
    /// moves again at their new positions, in every layer, before the new tokens attend to the
    /// cache (all of it, and the new tokens causally). On an error the cache should be
    /// cleared. With M-RoPE the tokens are text, after the largest id held.
    pub fn forward_stream(&mut self, input_ids: &Tensor) -> Result<Tensor> {
        self.stream_step(input_ids, None)
    }

    /// [`forward_stream`](Self::forward_stream) for an M-RoPE model, with the tokens' ids
    /// `position_ids` `(3, batch, seq)` counted from 0 at the first of them (as
    /// [`candle_pe_core::QwenVlConfig::positions`] gives a prompt's, image runs included; every
    /// row of the batch the same): they are moved past the largest id held.
    pub fn forward_stream_mrope(
        &mut self,
        input_ids: &Tensor,
        position_ids: &Tensor,
    ) -> Result<Tensor> {
        let (b, s) = input_ids
            .dims2()
            .context("input_ids must be (batch, seq)")?;
        if !self.is_mrope() {
            bail!("forward_stream_mrope needs an M-RoPE model (a rope with mrope_section)")
        }
        if position_ids.dims() != [3, b, s] {
            bail!(
                "position_ids must be (3, batch, seq) = [3, {b}, {s}], got {:?}",
                position_ids.dims()
            )
        }
        Positions::new(position_ids)?;
        let values = position_ids
            .to_dtype(DType::I64)?
            .flatten_all()?
            .to_vec1::<i64>()?;
        let at = |axis: usize, row: usize, t: usize| values[(axis * b + row) * s + t];
        if (0..b).any(|row| (0..3).any(|a| (0..s).any(|t| at(a, row, t) != at(a, 0, t)))) {
            bail!("position_ids must be the same for every row of the batch (a bounded cache holds one stream)")
        }
        let chunk: Vec<[i64; 3]> = (0..s)
            .map(|t| [at(0, 0, t), at(1, 0, t), at(2, 0, t)])
            .collect();
        self.stream_step(input_ids, Some(chunk))
    }

    /// A step of a bounded cache: `chunk` the new tokens' M-RoPE ids from 0 (text when `None`).
    fn stream_step(&mut self, input_ids: &Tensor, chunk: Option<Vec<[i64; 3]>>) -> Result<Tensor> {
        let (b, s) = input_ids
            .dims2()
            .context("input_ids must be (batch, seq)")?;
        let mrope = self.is_mrope();
        let Some(stream) = self.stream.as_mut() else {
            bail!("forward_stream needs a cache policy (with_cache_policy)")
        };
        if b == 0 || s == 0 {
            return self.no_logits(b, s, input_ids.device());
        }
        candle_pe_core::check_tokens(input_ids, self.config.vocab_size)?;
        let device = input_ids.device().clone();
        let rows = |values: &[i64]| -> Result<Positions> {
            let n = values.len();
            let t = Tensor::from_slice(values, (1, n), &device)?.repeat((b, 1))?;
            Ok(Positions::new(&t)?)
        };
        // M-RoPE ids (3, b, n), each token's three on its rows.
        let ids3 = |values: &[[i64; 3]]| -> Result<Positions> {
            let n = values.len();
            let data: Vec<i64> = (0..3)
                .flat_map(|a| values.iter().map(move |id| id[a]))
                .collect();
            let t = Tensor::from_vec(data, (3, 1, n), &device)?.repeat((1, b, 1))?;
            Ok(Positions::new(&t)?)
        };
        let (surgery, moved, positions) = match mrope {
            true => {
                let chunk = chunk.unwrap_or_else(|| (0..s as i64).map(|p| [p; 3]).collect());
                let (surgery, new) = stream.before_mrope(&chunk)?;
                let moved = match &surgery {
                    Some(sg) => Some(ids3(&stream.mrope[sg.moved.clone()])?),
                    None => None,
                };
                (surgery, moved, ids3(&new)?)
            }
            false => {
                let (surgery, new) = stream.before(s)?;
                let moved = match &surgery {
                    Some(sg) => Some(rows(&stream.positions[sg.moved.clone()])?),
                    None => None,
                };
                (surgery, moved, rows(&new)?)
            }
        };
        let held = stream.positions.len() - s;
        let mask = match s {
            1 => None,
            _ => {
                let data: Vec<u8> = (0..s)
                    .flat_map(|t| (0..held + s).map(move |j| u8::from(j <= held + t)))
                    .collect();
                let one = Tensor::from_vec(data, (1, 1, s, held + s), &device)?;
                Some(one.repeat((b, 1, 1, 1))?)
            }
        };
        let mut x = self.embed.forward(input_ids)?;
        if let Some(scale) = self.config.embedding_scale {
            x = (x * scale)?;
        }
        for layer in &mut self.layers {
            let step = StreamStep {
                surgery: surgery.as_ref().zip(moved.as_ref()),
            };
            x = layer.forward_with(&x, &positions, mask.as_ref(), Some(step))?;
        }
        self.cached += s;
        if let Some(stream) = self.stream.as_mut() {
            if let Some(sg) = stream.after() {
                let moved = rows(&stream.positions[sg.moved.clone()])?;
                for layer in &mut self.layers {
                    layer.attn.operate(&sg, &moved)?;
                }
            }
        }
        self.lm_head.forward(&self.norm.forward(&x)?)
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
    ) -> Result<Option<Tensor>> {
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
        Ok(Some(Tensor::from_vec(
            data,
            (b, 1, s, total - first),
            device,
        )?))
    }
}
