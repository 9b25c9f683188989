//! The `bench_report` cases on the target. Cases compared with each other run interleaved,
//! round robin, after a warm-up run each; every run ends with a device synchronisation, so a
//! time is the wall time of the work queued, medians over the rounds; ratios are medians of the
//! per-round ratios. The floors are the device's own: `Tensor::zeros` (a write of the same
//! bytes) and `Tensor::copy` (a read and a write of them).

use anyhow::Result;
use candle_core::{DType, Module, Tensor};
use candle_pe_core::{PeCache, PeSpec, Preset, Rope, RopeConfig, SinusoidalEncoding};
use candle_pe_nn::{
    EmbeddingScale, PositionMode, RotaryEmbedding, SinusoidalEmbedding, SinusoidalEmbeddingConfig,
    TableBackend,
};
use pe_testkit::race::{Case, Race, Rounds};
use pe_testkit::{gather_rope, whisper_sinusoids, Sweep, SWEEP_AT, SWEEP_LENGTHS, SWEPT};

use crate::report::{Report, Timing};
use crate::Target;

/// The sizes: the bench_report's on the GPU, small ones in the CPU dry run.
struct Sizes {
    len: usize,
    width: usize,
    rope_len: usize,
    prefill: usize,
    keys: usize,
    batch: usize,
    seq: usize,
    rounds: usize,
    fast_rounds: usize,
    /// The sweep's last position and its lengths, each with its rounds.
    sweep_at: usize,
    sweep: &'static [(usize, usize)],
}

impl Sizes {
    fn of(target: &Target) -> Self {
        match target.full {
            true => Sizes {
                len: 65_536,
                width: 1024,
                rope_len: 131_072,
                prefill: 4096,
                keys: 32_768,
                batch: 8,
                seq: 4096,
                rounds: 21,
                fast_rounds: 501,
                // bench_report's sweep, so that `pe plot bench` draws the two together.
                sweep_at: SWEEP_AT,
                sweep: &SWEEP_LENGTHS,
            },
            false => Sizes {
                len: 2048,
                width: 256,
                rope_len: 4096,
                prefill: 128,
                keys: 1024,
                batch: 2,
                seq: 128,
                rounds: 3,
                fast_rounds: 11,
                sweep_at: 4095,
                sweep: &[(1, 11), (16, 5), (256, 3), (2048, 3)],
            },
        }
    }
}

/// One report row: the case against the reference case, the reference described in words.
struct Row<'a> {
    label: String,
    case: &'a str,
    reference: &'a str,
    reference_case: &'a str,
}

fn row<'a>(label: impl Into<String>, case: &'a str, reference: &'a str, of: &'a str) -> Row<'a> {
    Row {
        label: label.into(),
        case,
        reference,
        reference_case: of,
    }
}

/// Times `cases` in `rounds` interleaved rounds, each run ending with a device sync, and adds
/// the report's `rows`.
fn race(
    target: &Target,
    report: &mut Report,
    rounds: usize,
    cases: Vec<Case<'_>>,
    rows: &[Row],
) -> Result<()> {
    let sync = || target.sync();
    let measured = Race::new(rounds).sync(&sync).run(cases)?;
    measured.print_summary("ms");
    for row in rows {
        add_row(report, &measured, row);
    }
    Ok(())
}

fn add_row(report: &mut Report, measured: &Rounds, row: &Row) {
    let v = measured.versus(row.case, row.reference_case);
    report.timing(Timing {
        case: row.label.clone(),
        ours_ms: v.ours,
        reference: row.reference.to_string(),
        reference_ms: Some(v.reference),
        ratio: Some(v.ratio),
    });
}

pub fn run(target: &Target, report: &mut Report) -> Result<()> {
    let s = Sizes::of(target);
    tables(target, report, &s)?;
    rotary_tables(target, report, &s)?;
    let rotary =
        RotaryEmbedding::new(RopeConfig::new(128, 500_000.0))?.with_backend(target.backend);
    rope_apply(target, report, &s, &rotary)?;
    apply_at(target, report, &s, &rotary)?;
    shift(target, report, &s, &rotary)?;
    embedding(target, report, &s)?;
    sweep(target, report, &s)
}

/// Time against sequence length, as `bench_report` records it on the CPU: the rows ending at
/// `s.sweep_at` generated, viewed in a cache and copied from it, into the JSON's `sweep`.
fn sweep(target: &Target, report: &mut Report, s: &Sizes) -> Result<()> {
    let sync = || target.sync();
    let sweep = Sweep {
        label: format!("GPU ({})", target.name()),
        device: &target.device,
        backend: target.backend,
        width: s.width,
        at: s.sweep_at,
        lengths: s.sweep,
        sync: Some(&sync),
    }
    .run()?;
    let list = |values: &serde_json::Value| -> String {
        let values = values.as_array().into_iter().flatten();
        let text = |v: &serde_json::Value| match v.as_u64() {
            Some(n) => n.to_string(),
            None => format!("{:.4}", v.as_f64().unwrap_or(f64::NAN)),
        };
        values.map(text).collect::<Vec<_>>().join(", ")
    };
    let rows = sweep["rows"].as_str().unwrap_or_default();
    let lengths = list(&sweep["lengths"]);
    for (k, case) in SWEPT.iter().enumerate() {
        let ms = list(&sweep["series"][k]["ms"]);
        report.note(format!("sweep ({rows}), {case}: {ms} ms at {lengths} rows"));
    }
    report.sweep = Some(sweep);
    Ok(())
}

/// Tables: generated against the write and copy floors and whisper's f32 ops.
fn tables(target: &Target, report: &mut Report, s: &Sizes) -> Result<()> {
    let dev = &target.device;
    let (len, width) = (s.len, s.width);
    let pe = SinusoidalEncoding::new(PeSpec::fairseq(width))?.with_backend(target.backend);
    let source = pe.range(0, len, DType::F32, dev)?;
    let t = format!("table {len} x {width}");
    let cases = vec![
        Case::new("generate f32", || Ok(pe.range(0, len, DType::F32, dev)?)),
        Case::new("write floor (zeros)", || {
            Ok(Tensor::zeros((len, width), DType::F32, dev)?)
        }),
        Case::new("copy floor", || Ok(source.copy()?)),
        Case::new("whisper sinusoids (f32 ops)", || {
            Ok(whisper_sinusoids(len, width, dev)?)
        }),
        Case::new("generate bf16", || {
            Ok(pe.range(0, len, DType::BF16, dev)?)
        }),
        Case::new("write floor bf16", || {
            Ok(Tensor::zeros((len, width), DType::BF16, dev)?)
        }),
        Case::new("generate f16", || Ok(pe.range(0, len, DType::F16, dev)?)),
        Case::new("write floor f16", || {
            Ok(Tensor::zeros((len, width), DType::F16, dev)?)
        }),
    ];
    let rows = [
        row(
            format!("{t} f32: generate vs write floor"),
            "generate f32",
            "Tensor::zeros",
            "write floor (zeros)",
        ),
        row(
            format!("{t} f32: generate vs copy floor"),
            "generate f32",
            "Tensor::copy",
            "copy floor",
        ),
        row(
            format!("{t} f32: generate vs whisper's sinusoids"),
            "generate f32",
            "candle f32 ops",
            "whisper sinusoids (f32 ops)",
        ),
        row(
            format!("{t} bf16: generate vs write floor"),
            "generate bf16",
            "Tensor::zeros bf16",
            "write floor bf16",
        ),
        row(
            format!("{t} f16: generate vs write floor"),
            "generate f16",
            "Tensor::zeros f16",
            "write floor f16",
        ),
    ];
    race(target, report, s.rounds, cases, &rows)
}

/// Rotary tables against writing two tables of zeros.
fn rotary_tables(target: &Target, report: &mut Report, s: &Sizes) -> Result<()> {
    let dev = &target.device;
    let rope = Rope::new(RopeConfig::new(128, 500_000.0))?.with_backend(target.backend);
    let rope_len = s.rope_len;
    let cases = vec![
        Case::new("rope tables", || {
            Ok(rope.range(0, rope_len, DType::F32, dev)?)
        }),
        Case::new("write floor (2 tables)", || {
            Ok((
                Tensor::zeros((rope_len, 64), DType::F32, dev)?,
                Tensor::zeros((rope_len, 64), DType::F32, dev)?,
            ))
        }),
    ];
    let rows = [row(
        format!("rotary cos+sin {rope_len} x 64: tables vs write floor"),
        "rope tables",
        "Tensor::zeros x2",
        "write floor (2 tables)",
    )];
    race(target, report, s.rounds, cases, &rows)
}

/// The dtypes q and k are rotated in: bf16 first, as the H200's run of 2026-11-26 had it alone.
const DTYPES: [DType; 3] = [DType::BF16, DType::F16, DType::F32];

/// Rope apply in each of [`DTYPES`]: decode and prefill, at an offset and at the same positions
/// given per token on the device (where the kernels run, both without tables: the rope kernel
/// computes each token's cos and sin), and at the offset by the cached tables (the generic
/// backend's rope, whose rotation reads its cached rows), against candle-nn's rope on the same
/// cached tables: computed on the fly or read from a cache.
fn rope_apply(
    target: &Target,
    report: &mut Report,
    s: &Sizes,
    rotary: &RotaryEmbedding,
) -> Result<()> {
    let dev = &target.device;
    let cached =
        RotaryEmbedding::new(rotary.rope().config().clone())?.with_backend(TableBackend::Generic);
    for (label, seq, rounds) in [
        ("decode", 1, s.fast_rounds),
        ("prefill", s.prefill, s.rounds),
    ] {
        for dtype in DTYPES {
            let name = format!("{dtype:?}").to_lowercase();
            let q = Tensor::randn(0f32, 1.0, (1, 32, seq, 128), dev)?.to_dtype(dtype)?;
            let k = Tensor::randn(0f32, 1.0, (1, 8, seq, 128), dev)?.to_dtype(dtype)?;
            let at = 4096;
            let (cos, sin) = rotary.cache().range(0, at + seq, dtype, dev)?;
            let ids = Tensor::arange(at as u32, (at + seq) as u32, dev)?.unsqueeze(0)?;
            let cases = vec![
                Case::new("RotaryEmbedding::apply", || Ok(rotary.apply(&q, &k, at)?)),
                Case::new("without tables", || Ok(rotary.apply(&q, &k, &ids)?)),
                Case::new("cached tables", || Ok(cached.apply(&q, &k, at)?)),
                Case::new("candle-nn rope", || {
                    let (c, s) = (cos.narrow(0, at, seq)?, sin.narrow(0, at, seq)?);
                    Ok((
                        candle_nn::rotary_emb::rope(&q, &c, &s)?,
                        candle_nn::rotary_emb::rope(&k, &c, &s)?,
                    ))
                }),
            ];
            let rows = [
                row(
                    format!("rope apply {name}, {label} (q 32, k 8 heads, 128, {seq} tokens)"),
                    "RotaryEmbedding::apply",
                    "candle-nn rope, same tables",
                    "candle-nn rope",
                ),
                row(
                    format!("rope without tables {name}, {label}, the same positions per token"),
                    "without tables",
                    "candle-nn rope, precomputed tables",
                    "candle-nn rope",
                ),
                row(
                    format!("rope apply {name}, {label}, by the cached tables"),
                    "cached tables",
                    "candle-nn rope, same tables",
                    "candle-nn rope",
                ),
                row(
                    format!("rope apply {name}, {label}: on the fly vs cached tables"),
                    "RotaryEmbedding::apply",
                    "RotaryEmbedding::apply by the cached tables",
                    "cached tables",
                ),
            ];
            race(target, report, rounds, cases, &rows)?;
        }
    }
    Ok(())
}

/// Per-token positions: a ragged decode step of 8 sequences.
fn apply_at(
    target: &Target,
    report: &mut Report,
    s: &Sizes,
    rotary: &RotaryEmbedding,
) -> Result<()> {
    let dev = &target.device;
    let q = Tensor::randn(0f32, 1.0, (8, 32, 1, 128), dev)?;
    let k = Tensor::randn(0f32, 1.0, (8, 8, 1, 128), dev)?;
    let ids: Vec<u32> = (0..8).map(|b| 100 + 1100 * b).collect();
    let positions = Tensor::from_vec(ids, (8, 1), dev)?;
    rotary.cache().range(0, 8192, DType::F32, dev)?;
    let cases = vec![
        Case::new("apply_at", || Ok(rotary.apply(&q, &k, &positions)?)),
        Case::new("index_select + candle-nn rope", || {
            Ok(gather_rope(rotary.cache(), &q, &k, &positions)?)
        }),
    ];
    let rows = [row(
        "rope apply_at, batch 8 decode, per-token positions",
        "apply_at",
        "index_select + candle-nn rope",
        "index_select + candle-nn rope",
    )];
    race(target, report, s.fast_rounds, cases, &rows)
}

/// Shift a cache of keys, against a copy of them: between two offsets, and per token from
/// positions on the device.
fn shift(target: &Target, report: &mut Report, s: &Sizes, rotary: &RotaryEmbedding) -> Result<()> {
    let dev = &target.device;
    let keys = Tensor::randn(0f32, 1.0, (1, 8, s.keys, 128), dev)?.to_dtype(DType::BF16)?;
    let positions =
        |start: u32| Tensor::arange(start, start + s.keys as u32, dev)?.reshape((1, s.keys));
    let (from, to) = (positions(1000)?, positions(0)?);
    let cases = vec![
        Case::new("shift -1000", || Ok(rotary.shift(&keys, 1000, 0)?)),
        Case::new("shift per token", || Ok(rotary.shift(&keys, &from, &to)?)),
        Case::new("copy floor", || Ok(keys.copy()?)),
    ];
    let k = format!("shift k (1, 8, {}, 128) bf16", s.keys);
    let rows = [
        row(
            format!("{k} by -1,000"),
            "shift -1000",
            "Tensor::copy of k",
            "copy floor",
        ),
        row(
            format!("{k} per token, positions on the device"),
            "shift per token",
            "Tensor::copy of k",
            "copy floor",
        ),
    ];
    race(target, report, s.rounds, cases, &rows)
}

/// The fused embedding block against a bare embedding and the unfused ops.
fn embedding(target: &Target, report: &mut Report, s: &Sizes) -> Result<()> {
    let dev = &target.device;
    let (vocab, width, batch, seq) = (32_000, s.width, s.batch, s.seq);
    let weights = Tensor::randn(0f32, 1.0, (vocab, width), dev)?;
    let cfg = SinusoidalEmbeddingConfig {
        embedding_scale: EmbeddingScale::SqrtD,
        positions: PositionMode::Plain,
        ..SinusoidalEmbeddingConfig::for_preset(Preset::Fairseq)
    };
    let plain = candle_nn::Embedding::new(weights, width);
    let block = SinusoidalEmbedding::new(plain.clone(), &cfg)?.with_backend(target.backend);
    let ids: Vec<u32> = (0..batch * seq)
        .map(|i| ((i * 7919) % vocab) as u32)
        .collect();
    let ids = Tensor::from_vec(ids, (batch, seq), dev)?;
    let cache =
        PeCache::new(SinusoidalEncoding::new(PeSpec::fairseq(width))?.with_backend(target.backend));
    let scale = (width as f64).sqrt();
    let cases = vec![
        Case::new("fused block", || Ok(block.forward(&ids)?)),
        Case::new("bare Embedding", || Ok(plain.forward(&ids)?)),
        Case::new("unfused ops", || {
            let x = plain.forward(&ids)?.affine(scale, 0.0)?;
            Ok(x.broadcast_add(&cache.range(0, seq, DType::F32, dev)?)?)
        }),
    ];
    let e = format!("embed {batch} x {seq}, d {width}");
    let rows = [
        row(
            format!("{e}: fused block vs bare Embedding"),
            "fused block",
            "candle-nn Embedding",
            "bare Embedding",
        ),
        row(
            format!("{e}: fused block vs unfused ops"),
            "fused block",
            "Embedding, affine, add",
            "unfused ops",
        ),
    ];
    race(target, report, s.rounds, cases, &rows)
}
