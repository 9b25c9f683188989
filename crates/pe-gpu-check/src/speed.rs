//! The `bench_report` cases on the target. Cases compared with each other run interleaved,
//! round robin, after a warm-up run each; every run ends with a device synchronisation, so a
//! time is the wall time of the work queued, medians over the rounds; ratios are medians of the
//! per-round ratios. The floors are the device's own: `Tensor::zeros` (a write of the same
//! bytes) and `Tensor::copy` (a read and a write of them).

use std::any::Any;
use std::time::Instant;

use anyhow::Result;
use candle_core::{DType, Module, Tensor};
use candle_pe_core::{PeCache, PeSpec, Preset, Rope, RopeConfig, SinusoidalEncoding};
use candle_pe_nn::{
    EmbeddingScale, PositionMode, RotaryEmbedding, SinusoidalEmbedding, SinusoidalEmbeddingConfig,
};
use pe_testkit::{gather_rope, whisper_sinusoids};

use crate::report::{Report, Timing};
use crate::Target;

type Case<'a> = (&'a str, Box<dyn FnMut() -> Result<Box<dyn Any>> + 'a>);

fn case<'a, T: 'static>(name: &'a str, mut f: impl FnMut() -> Result<T> + 'a) -> Case<'a> {
    (name, Box::new(move || Ok(Box::new(f()?) as Box<dyn Any>)))
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// `times[case][round]` in milliseconds.
struct Measured(Vec<Vec<f64>>);

impl Measured {
    fn median(&self, i: usize) -> f64 {
        median(self.0[i].clone())
    }

    fn ratio(&self, a: usize, b: usize) -> f64 {
        median(
            self.0[a]
                .iter()
                .zip(&self.0[b])
                .map(|(x, y)| x / y)
                .collect(),
        )
    }

    /// Adds the report's rows: for each, case `a` against reference `b`.
    fn rows(&self, report: &mut Report, rows: &[(String, usize, &str, usize)]) {
        for (case, a, reference, b) in rows {
            let (a, b) = (*a, *b);
            report.timing(Timing {
                case: case.clone(),
                ours_ms: self.median(a),
                reference: reference.to_string(),
                reference_ms: Some(self.median(b)),
                ratio: Some(self.ratio(a, b)),
            });
        }
    }
}

fn interleaved(target: &Target, rounds: usize, mut cases: Vec<Case<'_>>) -> Result<Measured> {
    for (_, f) in cases.iter_mut() {
        drop(f()?);
        target.sync()?;
    }
    let mut times = vec![Vec::with_capacity(rounds); cases.len()];
    for _ in 0..rounds {
        for (i, (_, f)) in cases.iter_mut().enumerate() {
            let start = Instant::now();
            let out = f()?;
            target.sync()?;
            times[i].push(start.elapsed().as_secs_f64() * 1e3);
            drop(out);
        }
    }
    for (t, (name, _)) in times.iter().zip(&cases) {
        eprintln!("  {name}: median {:.4} ms", median(t.clone()));
    }
    Ok(Measured(times))
}

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
}

pub fn run(target: &Target, report: &mut Report) -> Result<()> {
    let s = match target.full {
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
        },
    };
    let dev = &target.device;
    let (len, width) = (s.len, s.width);

    // Tables.
    let pe = SinusoidalEncoding::new(PeSpec::fairseq(width))?.with_backend(target.backend);
    let source = pe.range(0, len, DType::F32, dev)?;
    let m = interleaved(
        target,
        s.rounds,
        vec![
            case("generate f32", || Ok(pe.range(0, len, DType::F32, dev)?)),
            case("write floor (zeros)", || {
                Ok(Tensor::zeros((len, width), DType::F32, dev)?)
            }),
            case("copy floor", || Ok(source.copy()?)),
            case("whisper sinusoids (f32 ops)", || {
                Ok(whisper_sinusoids(len, width, dev)?)
            }),
            case("generate bf16", || {
                Ok(pe.range(0, len, DType::BF16, dev)?)
            }),
            case("write floor bf16", || {
                Ok(Tensor::zeros((len, width), DType::BF16, dev)?)
            }),
        ],
    )?;
    let t = format!("table {len} x {width}");
    m.rows(
        report,
        &[
            (
                format!("{t} f32: generate vs write floor"),
                0,
                "Tensor::zeros",
                1,
            ),
            (
                format!("{t} f32: generate vs copy floor"),
                0,
                "Tensor::copy",
                2,
            ),
            (
                format!("{t} f32: generate vs whisper's sinusoids"),
                0,
                "candle f32 ops",
                3,
            ),
            (
                format!("{t} bf16: generate vs write floor"),
                4,
                "Tensor::zeros bf16",
                5,
            ),
        ],
    );
    drop(source);

    // Rotary tables.
    let rope = Rope::new(RopeConfig::new(128, 500_000.0))?.with_backend(target.backend);
    let rope_len = s.rope_len;
    let m = interleaved(
        target,
        s.rounds,
        vec![
            case("rope tables", || {
                Ok(rope.range(0, rope_len, DType::F32, dev)?)
            }),
            case("write floor (2 tables)", || {
                Ok((
                    Tensor::zeros((rope_len, 64), DType::F32, dev)?,
                    Tensor::zeros((rope_len, 64), DType::F32, dev)?,
                ))
            }),
        ],
    )?;
    m.rows(
        report,
        &[(
            format!("rotary cos+sin {rope_len} x 64: tables vs write floor"),
            0,
            "Tensor::zeros x2",
            1,
        )],
    );

    // Rope apply: decode and prefill, against candle-nn's rope on the same cached tables.
    let rotary =
        RotaryEmbedding::new(RopeConfig::new(128, 500_000.0))?.with_backend(target.backend);
    for (label, seq, rounds) in [
        ("decode", 1, s.fast_rounds),
        ("prefill", s.prefill, s.rounds),
    ] {
        let q = Tensor::randn(0f32, 1.0, (1, 32, seq, 128), dev)?.to_dtype(DType::BF16)?;
        let k = Tensor::randn(0f32, 1.0, (1, 8, seq, 128), dev)?.to_dtype(DType::BF16)?;
        let at = 4096;
        let (cos, sin) = rotary.cache().range(0, at + seq, DType::BF16, dev)?;
        let m = interleaved(
            target,
            rounds,
            vec![
                case("RotaryEmbedding::apply", || Ok(rotary.apply(&q, &k, at)?)),
                case("candle-nn rope", || {
                    let (c, s) = (cos.narrow(0, at, seq)?, sin.narrow(0, at, seq)?);
                    Ok((
                        candle_nn::rotary_emb::rope(&q, &c, &s)?,
                        candle_nn::rotary_emb::rope(&k, &c, &s)?,
                    ))
                }),
            ],
        )?;
        m.rows(
            report,
            &[(
                format!("rope apply bf16, {label} (q 32, k 8 heads, 128, {seq} tokens)"),
                0,
                "candle-nn rope, same tables",
                1,
            )],
        );
    }

    // Per-token positions: a ragged decode step of 8 sequences.
    let q = Tensor::randn(0f32, 1.0, (8, 32, 1, 128), dev)?;
    let k = Tensor::randn(0f32, 1.0, (8, 8, 1, 128), dev)?;
    let ids: Vec<u32> = (0..8).map(|b| 100 + 1100 * b).collect();
    let positions = Tensor::from_vec(ids, (8, 1), dev)?;
    rotary.cache().range(0, 8192, DType::F32, dev)?;
    let m = interleaved(
        target,
        s.fast_rounds,
        vec![
            case("apply_at", || Ok(rotary.apply(&q, &k, &positions)?)),
            case("index_select + candle-nn rope", || {
                Ok(gather_rope(rotary.cache(), &q, &k, &positions)?)
            }),
        ],
    )?;
    m.rows(
        report,
        &[(
            "rope apply_at, batch 8 decode, per-token positions".into(),
            0,
            "index_select + candle-nn rope",
            1,
        )],
    );

    // Shift a cache of keys.
    let keys = Tensor::randn(0f32, 1.0, (1, 8, s.keys, 128), dev)?.to_dtype(DType::BF16)?;
    let m = interleaved(
        target,
        s.rounds,
        vec![
            case("shift -1000", || Ok(rotary.shift(&keys, 1000, 0)?)),
            case("copy floor", || Ok(keys.copy()?)),
        ],
    )?;
    m.rows(
        report,
        &[(
            format!("shift k (1, 8, {}, 128) bf16 by -1,000", s.keys),
            0,
            "Tensor::copy of k",
            1,
        )],
    );
    drop(keys);

    // The fused embedding block.
    let vocab = 32_000;
    let weights = Tensor::randn(0f32, 1.0, (vocab, width), dev)?;
    let cfg = SinusoidalEmbeddingConfig {
        embedding_scale: EmbeddingScale::SqrtD,
        positions: PositionMode::Plain,
        ..SinusoidalEmbeddingConfig::for_preset(Preset::Fairseq)
    };
    let plain = candle_nn::Embedding::new(weights, width);
    let block = SinusoidalEmbedding::new(plain.clone(), &cfg)?.with_backend(target.backend);
    let (batch, seq) = (s.batch, s.seq);
    let ids: Vec<u32> = (0..batch * seq)
        .map(|i| ((i * 7919) % vocab) as u32)
        .collect();
    let ids = Tensor::from_vec(ids, (batch, seq), dev)?;
    let cache =
        PeCache::new(SinusoidalEncoding::new(PeSpec::fairseq(width))?.with_backend(target.backend));
    let scale = (width as f64).sqrt();
    let m = interleaved(
        target,
        s.rounds,
        vec![
            case("fused block", || Ok(block.forward(&ids)?)),
            case("bare Embedding", || Ok(plain.forward(&ids)?)),
            case("unfused ops", || {
                let x = plain.forward(&ids)?.affine(scale, 0.0)?;
                Ok(x.broadcast_add(&cache.range(0, seq, DType::F32, dev)?)?)
            }),
        ],
    )?;
    let e = format!("embed {batch} x {seq}, d {width}");
    m.rows(
        report,
        &[
            (
                format!("{e}: fused block vs bare Embedding"),
                0,
                "candle-nn Embedding",
                1,
            ),
            (
                format!("{e}: fused block vs unfused ops"),
                0,
                "Embedding, affine, add",
                2,
            ),
        ],
    );
    Ok(())
}
