//! The quick performance report: the headline cases of the benchmarks, measured in one run
//! (medians over repeated runs, after a warm-up), printed as a markdown table.
//!
//! ```text
//! cargo run --release --example bench_report                  # markdown on stdout
//! cargo run --release --example bench_report -- --json r.json # and the numbers as JSON
//! ```
//!
//! Ratios are what to compare across machines: every number here comes from the same run.

use std::time::Instant;

use anyhow::{bail, Result};
use candle_core::{DType, Device, Module, Tensor};
#[path = "../benches/baseline/mod.rs"]
mod baseline;

use baseline::naive_f32_table;
use candle_pe::core::{PeCache, PeSpec, Rope, RopeCache, RopeConfig, SinusoidalEncoding};
use candle_pe::nn::{EmbeddingScale, SinusoidalEmbedding, SinusoidalEmbeddingConfig};

const LEN: usize = 65_536;
const WIDTH: usize = 1024;
const BATCH: usize = 8;
const SEQ: usize = 4096;
const VOCAB: usize = 32_000;
const DECODE_AT: usize = 1_000_000;

/// Median wall time of `f` in milliseconds over `runs` runs, after one warm-up run.
fn median_ms<T>(runs: usize, mut f: impl FnMut() -> Result<T>) -> Result<f64> {
    drop(f()?);
    let mut times: Vec<f64> = (0..runs)
        .map(|_| {
            let start = Instant::now();
            let out = f()?;
            let ms = start.elapsed().as_secs_f64() * 1e3;
            drop(out);
            Ok(ms)
        })
        .collect::<Result<_>>()?;
    times.sort_by(f64::total_cmp);
    Ok(times[runs / 2])
}

/// The exact rows `first .. first + rows` in f64: `sin(p w)` with `p w` kept exact by a fused
/// multiply-add, written here independently of the library.
fn exact_rows(spec: &PeSpec, first: usize, rows: usize) -> Result<Tensor> {
    let pe = SinusoidalEncoding::new(*spec)?;
    let freqs = pe.frequencies();
    let h = freqs.len();
    let mut out = Vec::with_capacity(rows * spec.width);
    for p in first..first + rows {
        let p = p as f64;
        let angles: Vec<(f64, f64)> = freqs
            .iter()
            .map(|&w| {
                let hi = p * w;
                let lo = p.mul_add(w, -hi);
                (hi.sin() + lo * hi.cos(), hi.cos() - lo * hi.sin())
            })
            .collect();
        out.extend(angles.iter().map(|a| a.0));
        out.extend(angles.iter().map(|a| a.1));
    }
    assert_eq!(spec.width, 2 * h, "the report uses an even sin|cos width");
    Ok(Tensor::from_vec(out, (rows, spec.width), &Device::Cpu)?)
}

fn max_abs_diff(a: &Tensor, b: &Tensor) -> Result<f64> {
    let d = (a.to_dtype(DType::F64)? - b.to_dtype(DType::F64)?)?.abs()?;
    Ok(d.flatten_all()?.max(0)?.to_scalar::<f64>()?)
}

fn machine() -> String {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find_map(|l| {
            l.strip_prefix("model name")
                .map(|m| m.trim_start_matches([' ', '\t', ':']).to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let threads = std::thread::available_parallelism().map_or(0, |n| n.get());
    format!("{model}, {threads} threads")
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let json_path = match args.as_slice() {
        [] => None,
        [flag, path] if flag == "--json" => Some(path.clone()),
        _ => bail!("usage: bench_report [--json PATH]"),
    };
    let dev = Device::Cpu;
    let spec = PeSpec::fairseq(WIDTH);
    let pe = SinusoidalEncoding::new(spec)?;
    eprintln!("measuring on {} ...", machine());

    // Tables: 65,536 x 1,024 f32.
    let generate_ms = median_ms(9, || Ok(pe.range(0, LEN, DType::F32, &dev)?))?;
    let source = pe.range(0, LEN, DType::F32, &dev)?;
    let copy_ms = median_ms(9, || Ok(source.copy()?))?;
    let naive_ms = median_ms(3, || Ok(naive_f32_table(&pe, 0, LEN, &dev)?))?;

    // Embedding block: batch 8 x seq 4096, d 1024, vocab 32000.
    let weights = Tensor::randn(0f32, 1.0, (VOCAB, WIDTH), &dev)?;
    let cfg = SinusoidalEmbeddingConfig {
        scale: EmbeddingScale::SqrtD,
        ..SinusoidalEmbeddingConfig::for_preset(candle_pe::core::Preset::Fairseq)
    };
    let cfg = SinusoidalEmbeddingConfig {
        positions: candle_pe::nn::PositionMode::Plain,
        ..cfg
    };
    let plain = candle_nn::Embedding::new(weights.clone(), WIDTH);
    let block = SinusoidalEmbedding::new(plain.clone(), &cfg)?;
    let ids: Vec<u32> = (0..BATCH * SEQ)
        .map(|i| ((i * 7919) % VOCAB) as u32)
        .collect();
    let ids = Tensor::from_vec(ids, (BATCH, SEQ), &dev)?;
    let fused_embed_ms = median_ms(9, || Ok(block.forward(&ids)?))?;
    let plain_embed_ms = median_ms(9, || Ok(plain.forward(&ids)?))?;
    let cache = PeCache::new(pe.clone());
    let scale = (WIDTH as f64).sqrt();
    let unfused_embed_ms = median_ms(9, || {
        let x = plain.forward(&ids)?.affine(scale, 0.0)?;
        Ok(x.broadcast_add(&cache.range(0, SEQ, DType::F32, &dev)?)?)
    })?;

    // Decoding one token at position 1,000,000.
    cache.range(DECODE_AT, 1, DType::F32, &dev)?;
    let decode_cached_us =
        median_ms(2001, || Ok(cache.range(DECODE_AT, 1, DType::F32, &dev)?))? * 1e3;
    let decode_generate_us =
        median_ms(2001, || Ok(pe.range(DECODE_AT, 1, DType::F32, &dev)?))? * 1e3;

    // Rotary tables: 131,072 positions, head_dim 128, f32.
    let rope = Rope::new(RopeConfig::new(128, 500_000.0))?;
    let rope_generate_ms = median_ms(5, || Ok(rope.tables(0, 131_072, DType::F32, &dev)?))?;
    let rope_cache = RopeCache::new(rope.clone());
    rope_cache.tables(0, 131_072, DType::F32, &dev)?;
    let rope_cached_us = median_ms(2001, || {
        Ok(rope_cache.tables(131_071, 1, DType::F32, &dev)?)
    })? * 1e3;

    // Exactness at positions up to 1,000,000.
    let rows = 256;
    let exact = exact_rows(&spec, DECODE_AT + 1 - rows, rows)?;
    let ours = pe.range(DECODE_AT + 1 - rows, rows, DType::F32, &dev)?;
    let naive = naive_f32_table(&pe, DECODE_AT + 1 - rows, rows, &dev)?;
    let max_abs_err_generate = max_abs_diff(&ours, &exact)?;
    let max_abs_err_naive = max_abs_diff(&naive, &exact)?;

    let report = [
        ("generate_ms", generate_ms),
        ("copy_ms", copy_ms),
        ("naive_ms", naive_ms),
        ("generate_over_copy", generate_ms / copy_ms),
        ("naive_over_generate", naive_ms / generate_ms),
        ("fused_embed_ms", fused_embed_ms),
        ("plain_embed_ms", plain_embed_ms),
        ("unfused_embed_ms", unfused_embed_ms),
        ("fused_over_plain", fused_embed_ms / plain_embed_ms),
        ("decode_cached_us", decode_cached_us),
        ("decode_generate_us", decode_generate_us),
        ("max_abs_err_generate", max_abs_err_generate),
        ("max_abs_err_naive", max_abs_err_naive),
        ("rope_generate_ms", rope_generate_ms),
        ("rope_cached_us", rope_cached_us),
    ];

    println!("Measured on {} (fairseq preset, f32, CPU).\n", machine());
    println!("| case | candle-pe | reference | ratio |");
    println!("|---|---:|---:|---:|");
    println!("| table 65,536 x 1,024: generate vs `Tensor::copy` | {generate_ms:.1} ms | {copy_ms:.1} ms | {:.2} |", generate_ms / copy_ms);
    println!("| table 65,536 x 1,024: naive candle ops vs generate | {generate_ms:.1} ms | {naive_ms:.1} ms | {:.1}x faster |", naive_ms / generate_ms);
    println!("| embed 8 x 4,096, d 1,024: fused block vs bare `Embedding` | {fused_embed_ms:.1} ms | {plain_embed_ms:.1} ms | {:.2} |", fused_embed_ms / plain_embed_ms);
    println!("| embed 8 x 4,096, d 1,024: fused vs unfused candle ops | {fused_embed_ms:.1} ms | {unfused_embed_ms:.1} ms | {:.2} |", fused_embed_ms / unfused_embed_ms);
    println!(
        "| decode 1 token at 1,000,000, d 1,024: cached view | {decode_cached_us:.2} us | | |"
    );
    println!(
        "| decode 1 token at 1,000,000, d 1,024: generated | {decode_generate_us:.2} us | | |"
    );
    println!("| max abs error, positions up to 1,000,000 | {max_abs_err_generate:.1e} | {max_abs_err_naive:.1e} (naive) | |");
    println!(
        "| rotary cos+sin 131,072 x 64 (head_dim 128): generate | {rope_generate_ms:.1} ms | | |"
    );
    println!("| rotary decode step at 131,071: cached views | {rope_cached_us:.2} us | | |");

    if let Some(path) = json_path {
        let map: serde_json::Map<String, serde_json::Value> = report
            .iter()
            .map(|(k, v)| (k.to_string(), serde_json::json!(v)))
            .collect();
        std::fs::write(&path, serde_json::to_string_pretty(&map)?)?;
        eprintln!("wrote {path}");
    }
    Ok(())
}
