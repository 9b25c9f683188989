//! A tiny transformer encoder layer assembled from candle-nn pieces around pe-nn's
//! `SinusoidalEmbedding`: weights are created through a `VarMap`, saved to safetensors,
//! reloaded as a checkpoint would be, and run on a left-padded batch of token ids.
//!
//! ```text
//! cargo run --release --example encoder                  # CPU
//! cargo run --release --example encoder --features cuda  # a GPU, when one is present
//! ```

use std::time::Instant;

use anyhow::Result;
use candle_core::{DType, Device, Module, Tensor, D};
use candle_nn::{layer_norm, linear, ops::softmax_last_dim, LayerNorm, Linear, VarBuilder, VarMap};
use candle_pe::{sinusoidal_embedding, Preset, SinusoidalEmbedding, SinusoidalEmbeddingConfig};

const VOCAB: usize = 8000;
const D_MODEL: usize = 256;
const HEADS: usize = 4;
const FF: usize = 1024;
const PAD: u32 = 1;

/// Pre-norm self-attention and feed-forward, M2M100-style.
struct EncoderLayer {
    q: Linear,
    k: Linear,
    v: Linear,
    out: Linear,
    ln_attn: LayerNorm,
    fc1: Linear,
    fc2: Linear,
    ln_ff: LayerNorm,
}

fn encoder_layer(vb: VarBuilder) -> Result<EncoderLayer> {
    let attn = vb.pp("self_attn");
    Ok(EncoderLayer {
        q: linear(D_MODEL, D_MODEL, attn.pp("q_proj"))?,
        k: linear(D_MODEL, D_MODEL, attn.pp("k_proj"))?,
        v: linear(D_MODEL, D_MODEL, attn.pp("v_proj"))?,
        out: linear(D_MODEL, D_MODEL, attn.pp("out_proj"))?,
        ln_attn: layer_norm(D_MODEL, 1e-5, vb.pp("self_attn_layer_norm"))?,
        fc1: linear(D_MODEL, FF, vb.pp("fc1"))?,
        fc2: linear(FF, D_MODEL, vb.pp("fc2"))?,
        ln_ff: layer_norm(D_MODEL, 1e-5, vb.pp("final_layer_norm"))?,
    })
}

impl EncoderLayer {
    /// `x`: (batch, seq, d); `keep`: (batch, seq), 1 for tokens and 0 for padding.
    fn forward(&self, x: &Tensor, keep: &Tensor) -> Result<Tensor> {
        let (b, s, _) = x.dims3()?;
        let head_dim = D_MODEL / HEADS;
        let h = self.ln_attn.forward(x)?;
        let split = |t: Tensor| -> Result<Tensor> {
            Ok(t.reshape((b, s, HEADS, head_dim))?
                .transpose(1, 2)?
                .contiguous()?)
        };
        let q = split(self.q.forward(&h)?)?;
        let k = split(self.k.forward(&h)?)?;
        let v = split(self.v.forward(&h)?)?;
        let scores = (q.matmul(&k.t()?)? / (head_dim as f64).sqrt())?;
        // Padding keys get -inf before the softmax.
        let mask = keep.unsqueeze(1)?.unsqueeze(1)?.to_dtype(scores.dtype())?;
        let scores = scores.broadcast_add(&((mask - 1.0)? * 1e9)?)?;
        let attn = softmax_last_dim(&scores)?.matmul(&v)?;
        let attn = attn.transpose(1, 2)?.reshape((b, s, D_MODEL))?;
        let x = (x + self.out.forward(&attn)?)?;
        let h = self.ln_ff.forward(&x)?;
        let ff = self.fc2.forward(&self.fc1.forward(&h)?.relu()?)?;
        Ok((x + ff)?)
    }
}

fn build(vb: &VarBuilder) -> Result<(SinusoidalEmbedding, EncoderLayer)> {
    // M2M100 / NLLB conventions: fairseq frequencies, padding-aware positions, sqrt(d) scale.
    let cfg = SinusoidalEmbeddingConfig::for_preset(Preset::Fairseq);
    let embed = sinusoidal_embedding(VOCAB, D_MODEL, cfg, vb.pp("model.encoder.embed_tokens"))?;
    let layer = encoder_layer(vb.pp("model.encoder.layers.0"))?;
    Ok((embed, layer))
}

fn run(embed: &SinusoidalEmbedding, layer: &EncoderLayer, ids: &Tensor) -> Result<Tensor> {
    let keep = ids.ne(PAD)?;
    let x = embed.forward(ids)?;
    layer.forward(&x, &keep)
}

fn main() -> Result<()> {
    let device = Device::cuda_if_available(0)?;
    println!("device: {device:?}");

    // 1. Fresh weights through a VarMap, saved as a checkpoint.
    let varmap = VarMap::new();
    let (embed, layer) = build(&VarBuilder::from_varmap(&varmap, DType::F32, &device))?;
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("encoder.safetensors");
    varmap.save(&path)?;
    println!(
        "saved {} tensors to {}",
        varmap.all_vars().len(),
        path.display()
    );

    // 2. Reloaded as any checkpoint would be.
    // SAFETY: the file was written above and is not modified while mapped.
    let vb = unsafe { VarBuilder::from_mmaped_safetensors(&[&path], DType::F32, &device)? };
    let (embed_loaded, layer_loaded) = build(&vb)?;

    // 3. A left-padded batch of 8 sequences of 512 tokens.
    let ids = padded_batch(&device)?;

    let fresh = run(&embed, &layer, &ids)?;
    let start = Instant::now();
    let x = embed_loaded.forward(&ids)?;
    device.synchronize()?;
    let embed_ms = start.elapsed().as_secs_f64() * 1e3;
    let start = Instant::now();
    let out = run(&embed_loaded, &layer_loaded, &ids)?;
    device.synchronize()?;
    let layer_ms = start.elapsed().as_secs_f64() * 1e3;

    println!("token ids:        {:?} {:?}", ids.dims(), ids.dtype());
    println!(
        "embedding + PE:   {:?} {:?} in {embed_ms:.2} ms",
        x.dims(),
        x.dtype()
    );
    println!(
        "encoder layer:    {:?} {:?} in {layer_ms:.2} ms (embedding included)",
        out.dims(),
        out.dtype()
    );
    same_output(&fresh, &out)
}

/// 8 sequences of 512 token ids, sequence `b` left-padded with `16 b` pads.
fn padded_batch(device: &Device) -> Result<Tensor> {
    let (batch, seq) = (8, 512);
    let ids: Vec<u32> = (0..batch * seq)
        .map(|i| {
            let (b, s) = (i / seq, i % seq);
            if s < b * 16 {
                PAD
            } else {
                2 + ((i * 7919) % (VOCAB - 2)) as u32
            }
        })
        .collect();
    Ok(Tensor::from_vec(ids, (batch, seq), device)?)
}

/// Fails unless the reloaded checkpoint's output is the fresh weights' to the bit.
fn same_output(fresh: &Tensor, out: &Tensor) -> Result<()> {
    let diff = (fresh - out)?
        .abs()?
        .flatten_all()?
        .max(D::Minus1)?
        .to_scalar::<f32>()?;
    println!("reloaded vs fresh weights, max abs difference: {diff:e}");
    anyhow::ensure!(
        diff == 0.0,
        "the reloaded checkpoint does not reproduce the fresh layer"
    );
    Ok(())
}
