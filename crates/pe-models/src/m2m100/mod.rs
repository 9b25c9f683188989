//! [`M2M100Encoder`]: the encoder of M2M100 and NLLB from candle-nn layers and
//! [`candle_pe_nn::SinusoidalEmbedding`]'s exact fairseq positions.
//!
//! ```
//! use candle_core::{DType, Device, Tensor};
//! use pe_models::M2M100Encoder;
//!
//! let dev = Device::Cpu;
//! let dir = pe_testkit::fixture("models/m2m100");
//! let encoder = M2M100Encoder::from_dir(dir, DType::F32, &dev)?;
//!
//! // Two sources, the second left-padded with the pad id 1: its tokens keep their positions.
//! let ids = Tensor::new(&[[4u32, 9, 33, 2], [1, 1, 33, 2]], &dev)?;
//! let mask = Tensor::new(&[[1u32, 1, 1, 1], [0, 0, 1, 1]], &dev)?;
//! let hidden = encoder.forward(&ids, Some(&mask))?;
//! assert_eq!(hidden.dims(), &[2, 4, encoder.config().d_model]);
//! # Ok::<(), anyhow::Error>(())
//! ```

use std::path::Path;

use anyhow::{bail, Context, Result};
use candle_core::{DType, Device, Module, Tensor};
use candle_nn::{Activation, Embedding, LayerNorm, Linear, VarBuilder};
use candle_pe_nn::{
    EmbeddingScale, PositionMode, Preset, SinusoidalEmbedding, SinusoidalEmbeddingConfig,
};

use crate::checkpoint::checkpoint;
use crate::layers::{layer_norm, linear, masked_softmax, tensor, Mask};
pub use config::M2M100Config;

mod config;

/// LayerNorm epsilon of every M2M100 norm (`nn.LayerNorm`'s default; not in the config).
const LAYER_NORM_EPS: f64 = 1e-5;

/// Multi-head self-attention with biases on q, k, v and `out_proj`.
#[derive(Clone, Debug)]
struct SelfAttention {
    q: Linear,
    k: Linear,
    v: Linear,
    out: Linear,
    heads: usize,
}

impl SelfAttention {
    fn new(cfg: &M2M100Config, vb: &VarBuilder) -> Result<Self> {
        let d = cfg.d_model;
        Ok(Self {
            q: linear(d, d, true, vb, "q_proj")?,
            k: linear(d, d, true, vb, "k_proj")?,
            v: linear(d, d, true, vb, "v_proj")?,
            out: linear(d, d, true, vb, "out_proj")?,
            heads: cfg.encoder_attention_heads,
        })
    }

    /// `x` `(batch, seq, d)`, `mask` `(batch, 1, 1, seq)` (u8, 1 where a key may be seen).
    fn forward(&self, x: &Tensor, mask: &Mask) -> Result<Tensor> {
        let (b, s, d) = x.dims3()?;
        let head_dim = d / self.heads;
        let split = |t: Tensor| -> Result<Tensor> {
            Ok(t.reshape((b, s, self.heads, head_dim))?
                .transpose(1, 2)?
                .contiguous()?)
        };
        let q = split(self.q.forward(x)?)?;
        let k = split(self.k.forward(x)?)?;
        let v = split(self.v.forward(x)?)?;
        let scale = 1.0 / (head_dim as f64).sqrt();
        let scores = (q.matmul(&k.t()?.contiguous()?)? * scale)?;
        let probs = masked_softmax(&scores, Some(mask), v.dtype())?;
        let out = probs.matmul(&v)?.transpose(1, 2)?.reshape((b, s, d))?;
        Ok(self.out.forward(&out)?)
    }
}

/// A pre-norm encoder layer: `x + attn(norm(x))`, then `x + fc2(act(fc1(norm(x))))`.
#[derive(Clone, Debug)]
struct EncoderLayer {
    attn_norm: LayerNorm,
    attn: SelfAttention,
    ffn_norm: LayerNorm,
    fc1: Linear,
    fc2: Linear,
    activation: Activation,
}

impl EncoderLayer {
    fn new(cfg: &M2M100Config, vb: &VarBuilder) -> Result<Self> {
        let (d, ffn) = (cfg.d_model, cfg.encoder_ffn_dim);
        Ok(Self {
            attn_norm: layer_norm(d, LAYER_NORM_EPS, vb, "self_attn_layer_norm")?,
            attn: SelfAttention::new(cfg, &vb.pp("self_attn"))?,
            ffn_norm: layer_norm(d, LAYER_NORM_EPS, vb, "final_layer_norm")?,
            fc1: linear(d, ffn, true, vb, "fc1")?,
            fc2: linear(ffn, d, true, vb, "fc2")?,
            activation: cfg.activation_function,
        })
    }

    fn forward(&self, x: &Tensor, mask: &Mask) -> Result<Tensor> {
        let x = (x + self.attn.forward(&self.attn_norm.forward(x)?, mask)?)?;
        let h = self.fc1.forward(&self.ffn_norm.forward(&x)?)?;
        let h = self.fc2.forward(&self.activation.forward(&h)?)?;
        Ok((x + h)?)
    }
}

/// The encoder of M2M100 and NLLB (`model_type` `m2m_100`): token embeddings (times
/// `sqrt(d_model)` with `scale_embedding`) plus fairseq's sinusoidal positions, padding-aware
/// (pad tokens get none, real tokens count from `pad_token_id + 1`, so left padding moves no
/// token), then pre-norm layers of self-attention (padding keys masked) and a feed-forward
/// network, and a final LayerNorm. Returns `last_hidden_state`.
#[derive(Clone, Debug)]
pub struct M2M100Encoder {
    config: M2M100Config,
    embed: SinusoidalEmbedding,
    layers: Vec<EncoderLayer>,
    norm: LayerNorm,
}

impl M2M100Encoder {
    /// The encoder of `config`, its weights read from `vb` under HF's names
    /// (`model.encoder.embed_tokens`, or the shared `model.shared`; `model.encoder.layers.N...`;
    /// `model.encoder.layer_norm`). A missing tensor is an error naming it.
    pub fn new(config: &M2M100Config, vb: VarBuilder) -> Result<Self> {
        let cfg = config;
        let d = cfg.d_model;
        let model = vb.pp("model");
        let encoder = model.pp("encoder");
        // transformers ties encoder.embed_tokens to shared and saves only the latter.
        let embed_name = match encoder.contains_tensor("embed_tokens.weight") {
            true => "model.encoder.embed_tokens.weight",
            false => "model.shared.weight",
        };
        let embed_weight = tensor(&vb, (cfg.vocab_size, d), embed_name)?;
        let positions = SinusoidalEmbeddingConfig {
            embedding_scale: match cfg.scale_embedding {
                true => EmbeddingScale::SqrtD,
                false => EmbeddingScale::None,
            },
            padding_idx: Some(cfg.pad_token_id),
            positions: PositionMode::PaddingAware,
            ..SinusoidalEmbeddingConfig::for_preset(Preset::Fairseq)
        };
        let embed = SinusoidalEmbedding::new(Embedding::new(embed_weight, d), &positions)?;
        let layers = (0..cfg.encoder_layers)
            .map(|i| EncoderLayer::new(cfg, &encoder.pp(format!("layers.{i}"))))
            .collect::<Result<Vec<_>>>()?;
        Ok(Self {
            config: cfg.clone(),
            embed,
            layers,
            norm: layer_norm(d, LAYER_NORM_EPS, &encoder, "layer_norm")?,
        })
    }

    /// The encoder in `dir` (`config.json` and `model.safetensors`), with weights in `dtype`.
    pub fn from_dir(dir: impl AsRef<Path>, dtype: DType, device: &Device) -> Result<Self> {
        let dir = dir.as_ref();
        let config = M2M100Config::from_file(dir.join("config.json"))?;
        Self::new(&config, checkpoint(dir, dtype, device)?)
    }

    /// The configuration.
    pub fn config(&self) -> &M2M100Config {
        &self.config
    }

    /// The token and position embedding block.
    pub fn embedding(&self) -> &SinusoidalEmbedding {
        &self.embed
    }

    /// `last_hidden_state` `(batch, seq, d_model)` of `input_ids` `(batch, seq)` (any integer
    /// dtype).
    ///
    /// `attention_mask` `(batch, seq)`, 1 for real tokens and 0 for padding, hides the padding
    /// keys from every query; `None` hides nothing, as in transformers. Positions come from the
    /// ids (tokens equal to `pad_token_id` are padding), not from the mask.
    pub fn forward(&self, input_ids: &Tensor, attention_mask: Option<&Tensor>) -> Result<Tensor> {
        let (b, s) = input_ids.dims2().with_context(|| {
            format!("input_ids must be (batch, seq), got {:?}", input_ids.dims())
        })?;
        let mask = match attention_mask {
            Some(m) => {
                if m.dims() != [b, s] {
                    bail!(
                        "attention_mask must have the shape of input_ids [{b}, {s}], got {:?}",
                        m.dims()
                    )
                }
                m.ne(0u32)?.reshape((b, 1, 1, s))?
            }
            None => Tensor::ones((b, 1, 1, s), DType::U8, input_ids.device())?,
        };
        let mask = Mask::new(mask)?;
        let mut x = self.embed.forward(input_ids)?;
        if x.elem_count() == 0 {
            // candle-nn's Linear cannot reshape an empty batch; there is nothing to attend to.
            return Ok(x);
        }
        for layer in &self.layers {
            x = layer.forward(&x, &mask)?;
        }
        Ok(self.norm.forward(&x)?)
    }
}
