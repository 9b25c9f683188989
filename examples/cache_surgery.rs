//! The numbers of docs/cache-surgery.md. First the error of a shift: f32 keys (8 heads x 128)
//! rotated at `p` and moved back by `d = 10^3 .. 10^6` positions, against their exact turn by
//! `-d w` (f64 tables from the same exact angles), for `shift` and for two f32-table shifts as
//! other stacks compute them: the angle `d * w` in f32 (llama.cpp's rope shift), and the
//! product of f32 tables at `p` and `p - d` (transformers' `SinkCache`).
//!
//! Then endless generation with a bounded KV cache: 10,000 greedy tokens of the tiny Llama 3.1 test
//! fixture with a 256-token attention-sink cache (4 sinks + 252, contiguous positions) against
//! the unbounded cache, with the KV bytes held and the process's resident memory before and
//! after, and tokens/s; then the cost of the ways to move kept keys (rotating the keys kept
//! before rotation, shifting the first-rotated keys from their first position, or shifting
//! the rotated keys again each time, which accumulates rounding), for the tiny model's cache
//! and a real one's.
//!
//! ```text
//! cargo run --release --example cache_surgery [-- --tokens 10000 --cache 256]
//! ```

use std::time::Instant;

use anyhow::Result;
use candle_core::{DType, Device, Tensor};
use candle_pe::{RopeConfig, RotaryEmbedding};
use clap::Parser;
use pe_models::{greedy, CachePolicy, LlamaFamily, SinkPositions};
use pe_testkit::race::{Case, Race};

#[derive(Parser)]
struct Args {
    /// Tokens to generate.
    #[arg(long, default_value_t = 10_000)]
    tokens: usize,
    /// Tokens the bounded cache holds (4 of them sinks).
    #[arg(long, default_value_t = 256)]
    cache: usize,
}

/// The process's resident memory, in MiB (Linux), or 0.
fn rss_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let kib: f64 = status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0);
    kib / 1024.0
}

fn kv_bytes(model: &LlamaFamily) -> usize {
    let c = model.config();
    // Keys and values, plus the keys before rotation a bounded cache keeps.
    let per_token = c.num_hidden_layers * c.num_key_value_heads * c.head_dim * 4;
    let copies = if model.cache_policy().is_some() { 3 } else { 2 };
    model.kv_len() * per_token * copies
}

fn run(label: &str, mut model: LlamaFamily, tokens: usize) -> Result<()> {
    let before = rss_mib();
    let start = Instant::now();
    let out = greedy(&mut model, &[1, 5, 6, 7], 0, tokens, &[], |_| {})?;
    let secs = start.elapsed().as_secs_f64();
    println!(
        "| {label} | {} | {:.1} KiB | {before:.1} -> {:.1} MiB | {:.0} |",
        model.kv_len(),
        kv_bytes(&model) as f64 / 1024.0,
        rss_mib(),
        out.ids.len() as f64 / secs,
    );
    Ok(())
}

/// The median time of `rounds` runs of `f` in microseconds, after a warm-up run.
fn median_us(f: impl FnMut() -> Result<Tensor>, rounds: usize) -> Result<f64> {
    let timed = Race::new(rounds).run(vec![Case::new("run", f)])?;
    Ok(timed.median("run") * 1e3)
}

/// `x` `(tokens, heads, d)` as f64 rows, turned pair by pair (halves) by `cos`, `sin` `(tokens, d / 2)`.
fn turn(x: &[f64], cos: &[f64], sin: &[f64], tokens: usize, heads: usize, d: usize) -> Vec<f64> {
    let h = d / 2;
    let mut y = x.to_vec();
    for t in 0..tokens {
        for hd in 0..heads {
            let base = (t * heads + hd) * d;
            for i in 0..h {
                let (c, s) = (cos[t * h + i], sin[t * h + i]);
                let (a, b) = (x[base + i], x[base + h + i]);
                y[base + i] = a * c - b * s;
                y[base + h + i] = a * s + b * c;
            }
        }
    }
    y
}

fn max_err(a: &[f64], b: &[f64]) -> f64 {
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f64::max)
}

/// The f32 cos and sin of `p * w` for every position `p` and frequency `w`, the angle
/// rounded to f32 (as llama.cpp and transformers build them), widened to f64.
fn naive_cos_sin(w: &[f32], positions: &[f32]) -> (Vec<f64>, Vec<f64>) {
    let mut c = vec![];
    let mut s = vec![];
    for &p in positions {
        for &w in w {
            let a = p * w;
            c.push(f64::from(a.cos()));
            s.push(f64::from(a.sin()));
        }
    }
    (c, s)
}

/// The cos and sin of `q - p` from f32 tables at `p` and at `q`, in f32 (transformers' way):
/// cos(q - p) = cos q cos p + sin q sin p, sin(q - p) = sin q cos p - cos q sin p.
fn difference_tables(w: &[f32], p: &[u32], q: &[u32]) -> (Vec<f64>, Vec<f64>) {
    let pf: Vec<f32> = p.iter().map(|&p| p as f32).collect();
    let qf: Vec<f32> = q.iter().map(|&q| q as f32).collect();
    let ((cp, sp), (cq, sq)) = (naive_cos_sin(w, &pf), naive_cos_sin(w, &qf));
    let c: Vec<f64> = (0..cp.len())
        .map(|i| f64::from(cq[i] as f32 * cp[i] as f32 + sq[i] as f32 * sp[i] as f32))
        .collect();
    let s: Vec<f64> = (0..cp.len())
        .map(|i| f64::from(sq[i] as f32 * cp[i] as f32 - cq[i] as f32 * sp[i] as f32))
        .collect();
    (c, s)
}

fn shift_errors() -> Result<()> {
    let dev = Device::Cpu;
    let (tokens, heads, d) = (16, 8, 128);
    let rotary = RotaryEmbedding::new(RopeConfig::new(d, 500_000.0))?;
    let w: Vec<f32> = rotary
        .rope()
        .inv_freq(0)
        .iter()
        .map(|&w| w as f32)
        .collect();
    let naive = |positions: &[f32]| naive_cos_sin(&w, positions);
    println!("| distance | shift (ours) | f32 angle (llama.cpp) | f32 tables at p and q (transformers) |");
    println!("|---:|---:|---:|---:|");
    for distance in [1_000u32, 10_000, 100_000, 1_000_000] {
        let p: Vec<u32> = (0..tokens as u32).map(|t| distance + 17 + 3 * t).collect();
        let q: Vec<u32> = p.iter().map(|p| p - distance).collect();
        let k0 = Tensor::randn(0f32, 1.0, (tokens, heads, d), &dev)?;
        let (_, k) = rotary.apply(&k0, &k0, &Tensor::new(p.as_slice(), &dev)?)?;
        let x = k.to_dtype(DType::F64)?.flatten_all()?.to_vec1::<f64>()?;
        let (pt, qt) = (
            Tensor::new(p.as_slice(), &dev)?,
            Tensor::new(q.as_slice(), &dev)?,
        );
        let (cos, sin) = rotary.rope().at_shift(&pt, &qt, DType::F64)?;
        let exact = turn(
            &x,
            &cos.flatten_all()?.to_vec1::<f64>()?,
            &sin.flatten_all()?.to_vec1::<f64>()?,
            tokens,
            heads,
            d,
        );
        let ours = rotary.shift(&k, distance as usize, 0)?;
        let ours = ours.to_dtype(DType::F64)?.flatten_all()?.to_vec1::<f64>()?;
        let (c, s) = naive(&vec![-(distance as f32); tokens]);
        let angle = turn(&x, &c, &s, tokens, heads, d);
        let (c, s) = difference_tables(&w, &p, &q);
        let tables = turn(&x, &c, &s, tokens, heads, d);
        let round = |v: Vec<f64>| -> Vec<f64> { v.into_iter().map(|v| v as f32 as f64).collect() };
        println!(
            "| 10^{} | {:.1e} | {:.1e} | {:.1e} |",
            distance.ilog10(),
            max_err(&ours, &exact),
            max_err(&round(angle), &exact),
            max_err(&round(tables), &exact),
        );
    }
    println!();
    Ok(())
}

fn main() -> Result<()> {
    let args = Args::parse();
    let dev = Device::Cpu;
    shift_errors()?;
    let dir = pe_testkit::fixture("models/llama31");
    println!(
        "{} greedy tokens, tiny Llama 3.1 fixture (2 layers, 2 kv heads x 16), f32, CPU\n",
        args.tokens
    );
    println!("| cache | held at the end | KV bytes | resident memory before -> after | tokens/s |");
    println!("|---|---:|---:|---:|---:|");
    let policy = CachePolicy::Sink {
        sink: 4,
        window: args.cache - 4,
        positions: SinkPositions::Contiguous,
    };
    let bounded = LlamaFamily::from_dir(&dir, DType::F32, &dev)?.with_cache_policy(policy)?;
    run(
        &format!("sink 4 + window {}", args.cache - 4),
        bounded,
        args.tokens,
    )?;
    let full = LlamaFamily::from_dir(&dir, DType::F32, &dev)?;
    run("unbounded", full, args.tokens)?;

    // Moving `len` kept keys back by one position (one eviction of a full contiguous cache).
    println!("\n| kept keys | rotate the keys before rotation | shift from the first rotation | shift again (accumulates) |");
    println!("|---|---:|---:|---:|");
    for (label, heads, len, d, dtype) in [
        ("tiny (1, 2, 252, 16) f32", 2, 252, 16, DType::F32),
        ("(1, 8, 4096, 128) bf16", 8, 4096, 128, DType::BF16),
    ] {
        let rotary = RotaryEmbedding::new(RopeConfig::new(d, 500_000.0))?;
        let keys = Tensor::randn(0f32, 1.0, (1, heads, len, d), &dev)?.to_dtype(dtype)?;
        let zeros = Tensor::zeros((1, len), DType::U32, &dev)?;
        let first = Tensor::arange(5000u32, 5000 + len as u32, &dev)?.unsqueeze(0)?;
        let now = Tensor::arange(4u32, 4 + len as u32, &dev)?.unsqueeze(0)?;
        let unrotated = median_us(|| Ok(rotary.apply_k(&keys, &now)?), 51)?;
        let from_zero = median_us(|| Ok(rotary.shift(&keys, &zeros, &now)?), 51)?;
        let original = median_us(|| Ok(rotary.shift(&keys, &first, &now)?), 51)?;
        let again = median_us(|| Ok(rotary.shift(&keys, 1, 0)?), 51)?;
        println!("| {label} | {unrotated:.1} us ({from_zero:.1} us by shift_at from 0) | {original:.1} us | {again:.1} us |");
    }
    Ok(())
}
