//! Every rotation entry point on the target against the same call on the CPU, within the
//! dtype's bound: `apply` (two-halves and adjacent pairs), `apply_at` and `apply_k_at` (the
//! `(batch, heads, seq, d)` and `(tokens, heads, d)` layouts), `apply_mrope` and
//! `apply_k_mrope`, `shift` and `shift_at`, query scales, multi-axis rotation, and the fused
//! embedding block. Each fast path on the target is also held to its plain twin (`*_slow`,
//! candle ops from the same tables) within the bound, and the report says whether their bits
//! are equal (promised on the CPU only).

use anyhow::Result;
use candle_core::{DType, Device, Tensor};
use candle_nn::{Embedding, Module};
use candle_pe_core::At;
use candle_pe_core::{video_patch_positions, Preset, RopeConfig};
use candle_pe_core::{PairLayout, RopeConfigs};
use candle_pe_nn::{
    AxesRotaryEmbedding, EmbeddingScale, PositionMode, RotaryEmbedding, SinusoidalEmbedding,
    SinusoidalEmbeddingConfig,
};
use serde_json::Value;

use crate::compare::{diff, host};
use crate::report::Report;
use crate::Target;
use candle_pe_formats::FromHfConfig;

const SECTION: &str = "rotation";

/// The rotation dtypes (f64 where the path takes it).
const DTYPES: [DType; 4] = [DType::F32, DType::F16, DType::BF16, DType::F64];

/// The unit roundoff of `dtype`.
fn eps(dtype: DType) -> f64 {
    match dtype {
        DType::F64 => f64::EPSILON,
        DType::F16 => 2f64.powi(-10),
        DType::BF16 => 2f64.powi(-7),
        _ => f32::EPSILON as f64,
    }
}

/// Compares two rotated tensors (same call, two devices or two paths): within 8 units of
/// the dtype's roundoff at the largest input magnitude `scale` (x cos - y sin rounds a few
/// times in the working precision, then once to the dtype).
fn close(report: &mut Report, name: &str, a: &Tensor, b: &Tensor, scale: f64) -> Result<bool> {
    let dtype = a.dtype();
    let d = diff(name, a, b)?;
    let check = format!("{name} {dtype:?}");
    report.check(SECTION, &check, d.max, 8.0 * eps(dtype) * scale);
    if d.same_bits {
        report.annotate("same bits");
    }
    Ok(d.same_bits)
}

/// [`close`] for the q and the k of one call: `got` on the target against `want`.
fn close_qk(
    report: &mut Report,
    what: &str,
    got: (&Tensor, &Tensor),
    want: (&Tensor, &Tensor),
    scale: f64,
) -> Result<()> {
    close(report, &format!("{what} q"), got.0, want.0, scale)?;
    close(report, &format!("{what} k"), got.1, want.1, scale)?;
    Ok(())
}

/// Holds a fast path's outputs to its plain twin's (`what` and `what_slow`) on the target
/// within the bound, and notes where their bits differ (equal bits are promised on the CPU
/// only).
fn twin(
    report: &mut Report,
    name: &str,
    what: &str,
    dtype: DType,
    pairs: &[(&str, &Tensor, &Tensor)],
    scale: f64,
) -> Result<()> {
    let mut bits = true;
    for (part, fast, slow) in pairs {
        let check = format!("{name}: {what} = its slow twin (target){part}");
        bits &= close(report, &check, fast, slow, scale)?;
    }
    if !bits {
        report.note(format!(
            "{name} {dtype:?}: {what} and {what}_slow differ in bits on the target (within the bound)"
        ));
    }
    Ok(())
}

/// Random normal values of `shape` in `dtype`, on the CPU and the target (same values).
fn pair(shape: &[usize], dtype: DType, target: &Target) -> Result<(Tensor, Tensor)> {
    let cpu = Tensor::randn(0f64, 1.0, shape, &Device::Cpu)?.to_dtype(dtype)?;
    let dev = cpu.to_device(&target.device)?;
    Ok((cpu, dev))
}

fn max_abs(t: &Tensor) -> Result<f64> {
    Ok(host(t)?.iter().fold(0f64, |m, v| m.max(v.abs())))
}

pub fn run(target: &Target, report: &mut Report) -> Result<()> {
    let llama = RopeConfig::new(128, 500_000.0);
    report.attempt(SECTION, "llama 128", |r| {
        plain(target, r, "llama 128", llama.clone(), false)
    });
    report.attempt(SECTION, "llama 128 pairs", |r| {
        plain(target, r, "llama 128 pairs", llama, true)
    });
    for (fixture, layer) in [
        ("phi3_longrope", None),
        ("qwen25_yarn", None),
        ("query_scale_ministral3", None),
        ("query_scale_llama4_nope", None),
        ("gemma3_v5", Some("full_attention")),
    ] {
        report.attempt(SECTION, fixture, |r| {
            plain(target, r, fixture, fixture_config(fixture, layer)?, false)
        });
    }
    report.attempt(SECTION, "mrope", |r| mrope(target, r));
    report.attempt(SECTION, "axes", |r| axes(target, r));
    report.attempt(SECTION, "embedding block", |r| embedding(target, r));
    Ok(())
}

/// A rope fixture's config (`rope/NAME.json`), for one layer type where it has several.
fn fixture_config(name: &str, layer: Option<&str>) -> Result<RopeConfig> {
    let path = pe_testkit::fixture(&format!("rope/{name}.json"));
    let json: Value = serde_json::from_str(&std::fs::read_to_string(path)?)?;
    let configs = RopeConfigs::from_hf_config(&json["config_input"])?;
    let config = match layer {
        Some(t) => configs.for_layer_type(t)?.cloned(),
        None => configs.single().cloned(),
    };
    config.ok_or_else(|| anyhow::anyhow!("rope/{name}: no rope for {layer:?}"))
}

/// Per-token positions `(b, seq)` of a ragged batch, up to 2^31 - 1, and the positions 7
/// further (capped) that a shift moves them to: `[from on the CPU, from on the target, to on
/// the CPU, to on the target]`.
fn ragged_positions(b: usize, seq: usize, target: &Target) -> Result<[Tensor; 4]> {
    let positions: Vec<u32> = (0..b * seq)
        .map(|i| match i % 3 {
            0 => (i * 977) as u32,
            1 => (1u32 << 31) - 1 - i as u32,
            _ => 1_000_000 + i as u32,
        })
        .collect();
    let moved: Vec<u32> = positions
        .iter()
        .map(|&p| (p + 7).min((1 << 31) - 1))
        .collect();
    Ok([
        Tensor::from_vec(positions.clone(), (b, seq), &Device::Cpu)?,
        Tensor::from_vec(positions, (b, seq), &target.device)?,
        Tensor::from_vec(moved.clone(), (b, seq), &Device::Cpu)?,
        Tensor::from_vec(moved, (b, seq), &target.device)?,
    ])
}

/// apply, apply_at (both layouts), apply_k_at, shift and shift_at for one rope.
fn plain(
    target: &Target,
    report: &mut Report,
    name: &str,
    config: RopeConfig,
    pairs: bool,
) -> Result<()> {
    let layout = match pairs {
        true => PairLayout::Interleaved,
        false => PairLayout::Halves,
    };
    let cpu = RotaryEmbedding::new(config.clone())?.with_pair_layout(layout);
    let dev = RotaryEmbedding::new(config)?
        .with_pair_layout(layout)
        .with_backend(target.backend);
    let d = cpu.rope().config().head_dim;
    let (seq, b) = if target.full { (64, 2) } else { (8, 2) };
    for dtype in DTYPES {
        let (q_c, q_d) = pair(&[b, 8, seq, d], dtype, target)?;
        let (k_c, k_d) = pair(&[b, 2, seq, d], dtype, target)?;
        let scale = 1.5 * max_abs(&q_c)?.max(max_abs(&k_c)?);
        // apply at an offset, a prefill then a decode step.
        for offset in [0, 100_000] {
            let (qc, kc) = cpu.apply(&q_c, &k_c, offset)?;
            let (qd, kd) = dev.apply(&q_d, &k_d, offset)?;
            let what = format!("{name}: apply @{offset}");
            close_qk(report, &what, (&qd, &kd), (&qc, &kc), scale)?;
        }
        let ropes = Ropes {
            name,
            cpu: &cpu,
            dev: &dev,
            dtype,
            scale,
        };
        let [pos_c, pos_d, to_c, to_d] = ragged_positions(b, seq, target)?;
        ropes.at_positions(report, (&q_c, &k_c), (&q_d, &k_d), (&pos_c, &pos_d))?;
        // shift: move keys by -1,000 and to other positions.
        let kc = cpu.shift(&k_c, 1000, 0)?;
        let kd = dev.shift(&k_d, 1000, 0)?;
        close(report, &format!("{name}: shift -1000"), &kd, &kc, scale)?;
        let kc = cpu.shift(&k_c, &pos_c, &to_c)?;
        let kd = dev.shift(&k_d, &pos_d, &to_d)?;
        close(report, &format!("{name}: shift_at"), &kd, &kc, scale)?;
        let ks = dev.shift_slow(&k_d, &pos_d, &to_d)?;
        twin(report, name, "shift_at", dtype, &[("", &kd, &ks)], scale)?;
    }
    Ok(())
}

/// One rope on the CPU and on the device, for one dtype, and the scale of its errors.
struct Ropes<'a> {
    name: &'a str,
    cpu: &'a RotaryEmbedding,
    dev: &'a RotaryEmbedding,
    dtype: DType,
    scale: f64,
}

impl Ropes<'_> {
    /// apply_at with per-token positions (a ragged batch, up to 2^31 - 1) in both layouts,
    /// apply_k_at and the slow twin; `(cpu, device)` pairs of q, k and the positions.
    fn at_positions(
        &self,
        report: &mut Report,
        (q_c, k_c): (&Tensor, &Tensor),
        (q_d, k_d): (&Tensor, &Tensor),
        (pos_c, pos_d): (&Tensor, &Tensor),
    ) -> Result<()> {
        let (name, scale) = (self.name, self.scale);
        let (qc, kc) = self.cpu.apply(q_c, k_c, pos_c)?;
        let (qd, kd) = self.dev.apply(q_d, k_d, pos_d)?;
        let what = format!("{name}: apply_at");
        close_qk(report, &what, (&qd, &kd), (&qc, &kc), scale)?;
        let kk = self.dev.apply_k(k_d, pos_d)?;
        close(report, &format!("{name}: apply_k_at"), &kk, &kc, scale)?;
        let (qs, ks) = self.dev.apply_slow(q_d, k_d, pos_d)?;
        let pairs = [(" q", &qd, &qs), (" k", &kd, &ks)];
        twin(report, name, "apply_at", self.dtype, &pairs, scale)?;
        // (tokens, heads, d): the continuous-batching layout, positions (tokens,).
        let (b, _, seq, d) = q_c.dims4()?;
        let tokens =
            |t: &Tensor| -> Result<Tensor> { Ok(t.transpose(1, 2)?.reshape((b * seq, (), d))?) };
        let (flat_c, flat_d) = (pos_c.flatten_all()?, pos_d.flatten_all()?);
        let (qc, kc) = self.cpu.apply(&tokens(q_c)?, &tokens(k_c)?, &flat_c)?;
        let (qd, kd) = self.dev.apply(&tokens(q_d)?, &tokens(k_d)?, &flat_d)?;
        let what = format!("{name}: apply_at (tokens, heads, d)");
        close_qk(report, &what, (&qd, &kd), (&qc, &kc), scale)
    }
}

/// apply_mrope and apply_k_mrope (Qwen2-VL's sections), and its slow twin.
fn mrope(target: &Target, report: &mut Report) -> Result<()> {
    let config = fixture_config("qwen2_vl", None)?;
    let cpu = RotaryEmbedding::new(config.clone())?;
    let dev = RotaryEmbedding::new(config)?.with_backend(target.backend);
    let d = cpu.rope().config().head_dim;
    let (b, seq) = (2, if target.full { 64 } else { 8 });
    let ids: Vec<i64> = (0..3 * b * seq)
        .map(|i| 50_000 + (i as i64 * 37) % 4096)
        .collect();
    let ids_c = Tensor::from_vec(ids.clone(), (3, b, seq), &Device::Cpu)?;
    let ids_d = Tensor::from_vec(ids, (3, b, seq), &target.device)?;
    for dtype in DTYPES {
        let (q_c, q_d) = pair(&[b, 4, seq, d], dtype, target)?;
        let (k_c, k_d) = pair(&[b, 2, seq, d], dtype, target)?;
        let scale = 1.5 * max_abs(&q_c)?.max(max_abs(&k_c)?);
        let (qc, kc) = cpu.apply(&q_c, &k_c, At::mrope(&ids_c))?;
        let (qd, kd) = dev.apply(&q_d, &k_d, At::mrope(&ids_d))?;
        close_qk(
            report,
            "qwen2_vl: apply_mrope",
            (&qd, &kd),
            (&qc, &kc),
            scale,
        )?;
        let kk = dev.apply_k(&k_d, At::mrope(&ids_d))?;
        close(report, "qwen2_vl: apply_k_mrope", &kk, &kc, scale)?;
        let (qs, _) = dev.apply_slow(&q_d, &k_d, At::mrope(&ids_d))?;
        twin(
            report,
            "qwen2_vl",
            "apply_mrope",
            dtype,
            &[("", &qd, &qs)],
            scale,
        )?;
    }
    Ok(())
}

/// Multi-axis rotation (FLUX's axes) at video patch ids.
fn axes(target: &Target, report: &mut Report) -> Result<()> {
    let rotary = AxesRotaryEmbedding::new(&[16, 56, 56], 10_000.0)?;
    let side = if target.full { 32 } else { 4 };
    let ids_c = video_patch_positions(2, side, side, &Device::Cpu)?;
    let ids_d = video_patch_positions(2, side, side, &target.device)?;
    let n = 2 * side * side;
    for dtype in DTYPES {
        let (q_c, q_d) = pair(&[1, 4, n, 128], dtype, target)?;
        let (k_c, k_d) = pair(&[1, 4, n, 128], dtype, target)?;
        let scale = 1.5 * max_abs(&q_c)?.max(max_abs(&k_c)?);
        let (qc, kc) = rotary.apply(&q_c, &k_c, &ids_c)?;
        let (qd, kd) = rotary.apply(&q_d, &k_d, &ids_d)?;
        close_qk(report, "axes flux: apply_at", (&qd, &kd), (&qc, &kc), scale)?;
    }
    Ok(())
}

/// The fused embedding block (sqrt(d) * embedding + positions), against the CPU's.
fn embedding(target: &Target, report: &mut Report) -> Result<()> {
    let (vocab, width) = (1000, 512);
    let (batch, seq) = if target.full { (4, 512) } else { (2, 16) };
    let ids: Vec<u32> = (0..batch * seq)
        .map(|i| ((i * 7919) % vocab) as u32)
        .collect();
    let ids_c = Tensor::from_vec(ids, (batch, seq), &Device::Cpu)?;
    let ids_d = ids_c.to_device(&target.device)?;
    for (preset, mode, padding) in [
        (Preset::Fairseq, PositionMode::PaddingAware, Some(1)),
        (Preset::Whisper, PositionMode::Plain, None),
    ] {
        for dtype in [DType::F32, DType::F16, DType::BF16] {
            let cfg = SinusoidalEmbeddingConfig {
                embedding_scale: EmbeddingScale::SqrtD,
                positions: mode,
                padding_idx: padding,
                ..SinusoidalEmbeddingConfig::for_preset(preset)
            };
            let (w_c, w_d) = pair(&[vocab, width], dtype, target)?;
            let block_c = SinusoidalEmbedding::new(Embedding::new(w_c.clone(), width), &cfg)?;
            let block_d = SinusoidalEmbedding::new(Embedding::new(w_d, width), &cfg)?
                .with_backend(target.backend);
            let scale = max_abs(&w_c)? * (width as f64).sqrt() + 1.0;
            let out_c = block_c.forward_with_offset(&ids_c, 5000)?;
            let out_d = block_d.forward_with_offset(&ids_d, 5000)?;
            close(
                report,
                &format!("embedding block {}", preset.name()),
                &out_d,
                &out_c,
                scale,
            )?;
            let plain = block_d.forward(&ids_d)?;
            let plain_c = block_c.forward(&ids_c)?;
            close(
                report,
                &format!("embedding block {} forward", preset.name()),
                &plain,
                &plain_c,
                scale,
            )?;
        }
    }
    Ok(())
}
