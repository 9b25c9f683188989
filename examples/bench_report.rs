//! The quick performance report: the headline cases of the benchmarks, measured in one run and
//! printed as a markdown table, with the machine and its load.
//!
//! ```text
//! cargo run --release --example bench_report                  # markdown on stdout
//! cargo run --release --example bench_report -- --json r.json # and the numbers as JSON
//! ```
//!
//! Cases that are compared are measured together, interleaved round robin (A B C A B C ...)
//! after one warm-up run each, and reported as medians, so that a change in the machine's load
//! hits all of them alike; ratios are medians of the per-round ratios. Ratios are what to
//! compare across machines. The references are
//! thread-matched: the fresh-memory write floor and the parallel copy use the same thread pool
//! as the generators; the embedding block is also measured on one thread against candle's
//! (single-threaded) `Embedding`. The naive baselines are candle-transformers' own
//! constructions (whisper's `sinusoids`, the Marian table, llama.rs's rope setup), with their
//! errors over the whole table against the f64 tables of this crate (which the tests hold to
//! 1e-9 of a 256-bit oracle).

use std::any::Any;
use std::mem::MaybeUninit;
use std::time::Instant;

use anyhow::Result;
use candle_core::{DType, Device, Module, Tensor};
use rayon::prelude::*;

use candle_pe::TableBackend;
use candle_pe::{EmbeddingScale, RotaryEmbedding, SinusoidalEmbedding, SinusoidalEmbeddingConfig};
use candle_pe::{PeCache, PeSpec, Rope, RopeCache, RopeConfig, SinusoidalEncoding};
use pe_testkit::{gather_rope, marian_table, naive_f32_table, naive_llama_rope, whisper_sinusoids};

const LEN: usize = 65_536;
const WIDTH: usize = 1024;
const BATCH: usize = 8;
const SEQ: usize = 4096;
const VOCAB: usize = 32_000;
const DECODE_AT: usize = 1_000_000;
const ROPE_LEN: usize = 131_072;
const HEAD_DIM: usize = 128;
const ROPE_THETA: f32 = 500_000.0;

/// One measured case: runs once and returns what it built (dropped after the clock stops).
type Case<'a> = (&'a str, Box<dyn FnMut() -> Result<Box<dyn Any>> + 'a>);

fn case<'a, T: 'static>(name: &'a str, mut f: impl FnMut() -> Result<T> + 'a) -> Case<'a> {
    (name, Box::new(move || Ok(Box::new(f()?) as Box<dyn Any>)))
}

/// The times of interleaved cases, in milliseconds: `times[case][round]`.
struct Measured {
    times: Vec<Vec<f64>>,
}

impl Measured {
    /// The median time of each case.
    fn medians(&self) -> Vec<f64> {
        self.times.iter().map(|t| median(t.clone())).collect()
    }

    /// The median over rounds of `case a / case b` (each round's pair ran back to back, so a
    /// change of load between rounds cancels out).
    fn ratio(&self, a: usize, b: usize) -> f64 {
        median(
            self.times[a]
                .iter()
                .zip(&self.times[b])
                .map(|(x, y)| x / y)
                .collect(),
        )
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Runs `rounds` rounds that run every case once in turn (A B C A B C ...), after one warm-up
/// run of each; prints each case's median, min and max to stderr.
fn interleaved(rounds: usize, mut cases: Vec<Case<'_>>) -> Result<Measured> {
    for (_, f) in cases.iter_mut() {
        drop(f()?);
    }
    let mut times = vec![Vec::with_capacity(rounds); cases.len()];
    for _ in 0..rounds {
        for (i, (_, f)) in cases.iter_mut().enumerate() {
            let start = Instant::now();
            let out = f()?;
            times[i].push(start.elapsed().as_secs_f64() * 1e3);
            drop(out);
        }
    }
    for (t, (name, _)) in times.iter().zip(&cases) {
        let (min, max) = t
            .iter()
            .fold((f64::MAX, 0f64), |(lo, hi), &v| (lo.min(v), hi.max(v)));
        eprintln!(
            "  {name}: median {:.4} ms (min {min:.4}, max {max:.4})",
            median(t.clone())
        );
    }
    Ok(Measured { times })
}

/// `n` f32 written to fresh memory by the rayon pool, in chunks of 64 Ki values: what filling a
/// new table costs at least.
fn fresh_write(n: usize) -> Box<[MaybeUninit<f32>]> {
    let mut out = Box::<[f32]>::new_uninit_slice(n);
    out.par_chunks_mut(1 << 16)
        .for_each(|chunk| chunk.fill(MaybeUninit::new(1.0)));
    out
}

/// A copy of `src` (2-byte elements, as bf16 keys) into fresh memory by the rayon pool, in
/// chunks of 64 Ki values: what re-rotating keys costs at least (each read and written once).
fn parallel_copy_u16(src: &[u16]) -> Vec<u16> {
    let mut out = vec![0u16; src.len()];
    out.par_chunks_mut(1 << 16)
        .zip(src.par_chunks(1 << 16))
        .for_each(|(dst, src)| dst.copy_from_slice(src));
    out
}

/// A copy of `src` into fresh memory by the rayon pool.
fn parallel_copy(src: &[f32]) -> Vec<f32> {
    src.par_iter().copied().collect()
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
    format!(
        "{}, {} threads, rayon pool of {}",
        pe_testkit::cpu_model(),
        pe_testkit::threads(),
        rayon::current_num_threads()
    )
}

/// The quick performance report: markdown on stdout, and optionally JSON.
#[derive(clap::Parser)]
struct Args {
    /// Also write the numbers as JSON to this file
    #[arg(long, value_name = "PATH")]
    json: Option<String>,
}

fn main() -> std::process::ExitCode {
    let (mut out, mut err) = (std::io::stdout(), std::io::stderr());
    match candle_pe_cli::parse_args::<Args>("bench_report", std::env::args_os(), &mut out, &mut err)
    {
        Ok(args) => candle_pe_cli::finish("bench_report", report(args.json), &mut err),
        Err(code) => code,
    }
}

fn report(json_path: Option<String>) -> Result<()> {
    let dev = Device::Cpu;
    let spec = PeSpec::fairseq(WIDTH);
    let pe = SinusoidalEncoding::new(spec)?;
    let generic = pe.clone().with_backend(TableBackend::Generic);
    let load_before = pe_testkit::load();
    eprintln!("measuring on {} (load {load_before}) ...", machine());

    // Tables: 65,536 x 1,024 f32 (256 MiB), against the write floor, copies, the naive ops.
    eprintln!("tables 65,536 x 1,024 f32:");
    let source = pe.range(0, LEN, DType::F32, &dev)?;
    let host = source.flatten_all()?.to_vec1::<f32>()?;
    let tab = interleaved(
        11,
        vec![
            case("floor (fresh write)", || Ok(fresh_write(LEN * WIDTH))),
            case("generate (CPU)", || {
                Ok(pe.range(0, LEN, DType::F32, &dev)?)
            }),
            case("generate (generic)", || {
                Ok(generic.range(0, LEN, DType::F32, &dev)?)
            }),
            case("whisper sinusoids", || {
                Ok(whisper_sinusoids(LEN, WIDTH, &dev)?)
            }),
            case("marian table", || Ok(marian_table(WIDTH, LEN, &dev)?)),
            case("Tensor::copy", || Ok(source.copy()?)),
            case("parallel copy", || Ok(parallel_copy(&host))),
        ],
    )?;
    drop(host);
    let [floor_ms, generate_ms, generic_ms, naive_whisper_ms, naive_marian_ms, copy_ms, par_copy_ms] =
        tab.medians()[..]
    else {
        unreachable!()
    };

    // Embedding block: batch 8 x seq 4096, d 1024, vocab 32000; all threads and one.
    eprintln!("embedding 8 x 4,096, d 1,024:");
    let weights = Tensor::randn(0f32, 1.0, (VOCAB, WIDTH), &dev)?;
    let cfg = SinusoidalEmbeddingConfig {
        embedding_scale: EmbeddingScale::SqrtD,
        positions: candle_pe::PositionMode::Plain,
        ..SinusoidalEmbeddingConfig::for_preset(candle_pe::Preset::Fairseq)
    };
    let plain = candle_nn::Embedding::new(weights.clone(), WIDTH);
    let block = SinusoidalEmbedding::new(plain.clone(), &cfg)?;
    let ids: Vec<u32> = (0..BATCH * SEQ)
        .map(|i| ((i * 7919) % VOCAB) as u32)
        .collect();
    let ids = Tensor::from_vec(ids, (BATCH, SEQ), &dev)?;
    let cache = PeCache::new(pe.clone());
    let scale = (WIDTH as f64).sqrt();
    let one = rayon::ThreadPoolBuilder::new().num_threads(1).build()?;
    let emb = interleaved(
        9,
        vec![
            case("fused block", || Ok(block.forward(&ids)?)),
            case("bare Embedding", || Ok(plain.forward(&ids)?)),
            case("unfused ops", || {
                let x = plain.forward(&ids)?.affine(scale, 0.0)?;
                Ok(x.broadcast_add(&cache.range(0, SEQ, DType::F32, &dev)?)?)
            }),
            case("fused block, 1 thread", || {
                one.install(|| Ok(block.forward(&ids)?))
            }),
            case("bare Embedding, 1 thread", || {
                one.install(|| Ok(plain.forward(&ids)?))
            }),
        ],
    )?;
    let [fused_embed_ms, plain_embed_ms, unfused_embed_ms, fused_1t_ms, plain_1t_ms] =
        emb.medians()[..]
    else {
        unreachable!()
    };

    // Decoding one token at position 1,000,000; materialising 4,096 cached rows.
    eprintln!("decode and materialise:");
    cache.range(0, DECODE_AT + 1, DType::F32, &dev)?;
    let dec = interleaved(
        2001,
        vec![
            case("cached view", || {
                Ok(cache.range(DECODE_AT, 1, DType::F32, &dev)?)
            }),
            case("generated row", || {
                Ok(pe.range(DECODE_AT, 1, DType::F32, &dev)?)
            }),
        ],
    )?;
    let [decode_cached_ms, decode_generate_ms] = dec.medians()[..] else {
        unreachable!()
    };
    let own = interleaved(
        21,
        vec![
            case("range_owned 4,096 rows", || {
                Ok(cache.range_owned(DECODE_AT - SEQ, SEQ, DType::F32, &dev)?)
            }),
            case("generate 4,096 rows", || {
                Ok(pe.range(DECODE_AT - SEQ, SEQ, DType::F32, &dev)?)
            }),
        ],
    )?;
    let [owned_rows_ms, generate_rows_ms] = own.medians()[..] else {
        unreachable!()
    };
    cache.clear();

    // Rotary tables: 131,072 positions, head_dim 128 (cos and sin each 131,072 x 64), f32.
    eprintln!("rotary tables 131,072 x 64 (x2) f32:");
    let rope = Rope::new(RopeConfig::new(HEAD_DIM, f64::from(ROPE_THETA)))?;
    let h = HEAD_DIM / 2;
    let rop = interleaved(
        9,
        vec![
            case("floor (fresh write of cos and sin)", || {
                Ok((fresh_write(ROPE_LEN * h), fresh_write(ROPE_LEN * h)))
            }),
            case("tables (CPU)", || {
                Ok(rope.range(0, ROPE_LEN, DType::F32, &dev)?)
            }),
            case("llama.rs rope setup", || {
                Ok(naive_llama_rope(HEAD_DIM, ROPE_THETA, ROPE_LEN, &dev)?)
            }),
        ],
    )?;
    let [rope_floor_ms, rope_generate_ms, naive_llama_ms] = rop.medians()[..] else {
        unreachable!()
    };
    let rope_cache = RopeCache::new(rope.clone());
    rope_cache.range(0, ROPE_LEN, DType::F32, &dev)?;
    let rope_cached_us = interleaved(
        2001,
        vec![case("cached views", || {
            Ok(rope_cache.range(ROPE_LEN - 1, 1, DType::F32, &dev)?)
        })],
    )?
    .medians()[0]
        * 1e3;
    drop(rope_cache);

    // Applying rope at a decode step: q 32 heads, k 8 heads, head_dim 128, at position 4,096,
    // against candle-nn's `rope` on views of a llama.rs-style cache.
    eprintln!("rope apply, decode step:");
    let rotary = RotaryEmbedding::new(RopeConfig::new(HEAD_DIM, f64::from(ROPE_THETA)))?;
    let (llama_cos, llama_sin) = naive_llama_rope(HEAD_DIM, ROPE_THETA, 8192, &dev)?;
    let q = Tensor::randn(0f32, 1.0, (1, 32, 1, HEAD_DIM), &dev)?;
    let k = Tensor::randn(0f32, 1.0, (1, 8, 1, HEAD_DIM), &dev)?;
    let at = 4096;
    let app = interleaved(
        2001,
        vec![
            case("RotaryEmbedding::apply", || Ok(rotary.apply(&q, &k, at)?)),
            case("candle-nn rope (llama.rs)", || {
                let cos = llama_cos.narrow(0, at, 1)?;
                let sin = llama_sin.narrow(0, at, 1)?;
                let q = candle_nn::rotary_emb::rope(&q, &cos, &sin)?;
                let k = candle_nn::rotary_emb::rope(&k, &cos, &sin)?;
                Ok((q, k))
            }),
        ],
    )?;
    let (rope_apply_us, candle_rope_us) = (app.medians()[0] * 1e3, app.medians()[1] * 1e3);

    // Applying rope at per-token positions: a ragged decode step of 8 sequences at positions
    // 100 .. 7800 (q 32 heads, k 8, head_dim 128), against the cached rows gathered by
    // `index_select` + candle-nn's `rope`.
    eprintln!("rope apply at per-token positions, batch 8 decode:");
    let q = Tensor::randn(0f32, 1.0, (8, 32, 1, HEAD_DIM), &dev)?;
    let k = Tensor::randn(0f32, 1.0, (8, 8, 1, HEAD_DIM), &dev)?;
    let ids: Vec<u32> = (0..8).map(|b| 100 + 1100 * b).collect();
    let positions = Tensor::from_vec(ids, (8, 1), &dev)?;
    let at = interleaved(
        2001,
        vec![
            case("RotaryEmbedding::apply_at", || {
                Ok(rotary.apply(&q, &k, &positions)?)
            }),
            case("index_select + candle-nn rope", || {
                Ok(gather_rope(rotary.cache(), &q, &k, &positions)?)
            }),
        ],
    )?;
    let (rope_apply_at_us, gather_rope_us) = (at.medians()[0] * 1e3, at.medians()[1] * 1e3);
    let load_after = pe_testkit::load();

    // Errors: at positions up to 1,000,000 against an independent f64 evaluation, and of the
    // naive constructions over their whole tables against this crate's f64 tables.
    eprintln!("errors ...");
    let rows = 256;
    let exact = exact_rows(&spec, DECODE_AT + 1 - rows, rows)?;
    let ours = pe.range(DECODE_AT + 1 - rows, rows, DType::F32, &dev)?;
    let naive = naive_f32_table(&pe, DECODE_AT + 1 - rows, rows, &dev)?;
    let max_abs_err_generate = max_abs_diff(&ours, &exact)?;
    let max_abs_err_naive = max_abs_diff(&naive, &exact)?;
    let whisper_exact = SinusoidalEncoding::new(PeSpec::whisper(WIDTH))?;
    let err_whisper = max_abs_diff(
        &whisper_sinusoids(LEN, WIDTH, &dev)?,
        &whisper_exact.range(0, LEN, DType::F64, &dev)?,
    )?;
    let marian_exact = SinusoidalEncoding::new(PeSpec::marian(WIDTH))?;
    let err_marian = max_abs_diff(
        &marian_table(WIDTH, LEN, &dev)?,
        &marian_exact.range(0, LEN, DType::F64, &dev)?,
    )?;
    let err_generic = max_abs_diff(
        &generic.range(0, LEN, DType::F32, &dev)?,
        &pe.range(0, LEN, DType::F64, &dev)?,
    )?;
    let (cos, sin) = naive_llama_rope(HEAD_DIM, ROPE_THETA, ROPE_LEN, &dev)?;
    let (exact_cos, exact_sin) = rope.range(0, ROPE_LEN, DType::F64, &dev)?;
    let err_llama = max_abs_diff(&cos, &exact_cos)?.max(max_abs_diff(&sin, &exact_sin)?);
    let (cos, sin) = rope.range(0, ROPE_LEN, DType::F32, &dev)?;
    let err_rope = max_abs_diff(&cos, &exact_cos)?.max(max_abs_diff(&sin, &exact_sin)?);

    // Re-rotating cached keys: k (1, 8, 32,768, 128) bf16 shifted back by 1,000 positions (a
    // window cache's eviction), against a fresh read + write of the same bytes.
    eprintln!("shift k (1, 8, 32768, 128) bf16:");
    let shape = (1, 8, 32_768, HEAD_DIM);
    let keys = Tensor::randn(0f32, 1.0, shape, &dev)?.to_dtype(DType::BF16)?;
    let bits = vec![0x3f80u16; keys.elem_count()];
    let shifts = interleaved(
        15,
        vec![
            case("floor (fresh read + write of k)", || {
                Ok(parallel_copy_u16(&bits))
            }),
            case("shift", || Ok(rotary.shift(&keys, 1000, 0)?)),
        ],
    )?;
    let [shift_floor_ms, shift_ms] = shifts.medians()[..] else {
        unreachable!()
    };
    drop((keys, bits));

    let report = [
        ("generate_ms", generate_ms),
        ("copy_ms", copy_ms),
        ("naive_ms", naive_whisper_ms),
        ("generate_over_copy", tab.ratio(1, 5)),
        ("naive_over_generate", tab.ratio(3, 1)),
        ("floor_ms", floor_ms),
        ("generate_over_floor", tab.ratio(1, 0)),
        ("par_copy_ms", par_copy_ms),
        ("copy_over_par_copy", tab.ratio(5, 6)),
        ("generic_ms", generic_ms),
        ("naive_whisper_ms", naive_whisper_ms),
        ("naive_marian_ms", naive_marian_ms),
        ("generic_over_naive", tab.ratio(2, 3)),
        ("fused_embed_ms", fused_embed_ms),
        ("plain_embed_ms", plain_embed_ms),
        ("unfused_embed_ms", unfused_embed_ms),
        ("fused_over_plain", emb.ratio(0, 1)),
        ("fused_1t_ms", fused_1t_ms),
        ("plain_1t_ms", plain_1t_ms),
        ("fused_over_plain_1t", emb.ratio(3, 4)),
        ("decode_cached_us", decode_cached_ms * 1e3),
        ("decode_generate_us", decode_generate_ms * 1e3),
        ("range_owned_4096_ms", owned_rows_ms),
        ("generate_4096_ms", generate_rows_ms),
        ("max_abs_err_generate", max_abs_err_generate),
        ("max_abs_err_naive", max_abs_err_naive),
        ("max_abs_err_generic", err_generic),
        ("max_abs_err_whisper", err_whisper),
        ("max_abs_err_marian", err_marian),
        ("rope_generate_ms", rope_generate_ms),
        ("rope_floor_ms", rope_floor_ms),
        ("rope_over_floor", rop.ratio(1, 0)),
        ("naive_llama_rope_ms", naive_llama_ms),
        ("max_abs_err_rope", err_rope),
        ("max_abs_err_llama_rope", err_llama),
        ("rope_cached_us", rope_cached_us),
        ("rope_apply_us", rope_apply_us),
        ("candle_rope_us", candle_rope_us),
        ("rope_apply_over_candle", app.ratio(0, 1)),
        ("rope_apply_at_us", rope_apply_at_us),
        ("gather_rope_us", gather_rope_us),
        ("rope_apply_at_over_gather", at.ratio(0, 1)),
        ("shift_ms", shift_ms),
        ("shift_floor_ms", shift_floor_ms),
        ("shift_over_floor", shifts.ratio(1, 0)),
    ];

    println!(
        "Measured on {} (load average {load_before} before, {load_after} after; f32, CPU).\n",
        machine()
    );
    println!("| case | candle-pe | reference | ratio |");
    println!("|---|---:|---:|---:|");
    let row = |case: &str, ours: String, reference: String, ratio: String| {
        println!("| {case} | {ours} | {reference} | {ratio} |");
    };
    let ms = |v: f64| format!("{v:.1} ms");
    let us = |v: f64| format!("{v:.2} us");
    let x = |v: f64| format!("{v:.2}");
    row(
        "table 65,536 x 1,024: generate vs fresh-write floor (same threads)",
        ms(generate_ms),
        ms(floor_ms),
        x(tab.ratio(1, 0)),
    );
    row(
        "table 65,536 x 1,024: generate vs `Tensor::copy`",
        ms(generate_ms),
        ms(copy_ms),
        x(tab.ratio(1, 5)),
    );
    row(
        "table 65,536 x 1,024: `Tensor::copy` vs a parallel copy",
        ms(copy_ms),
        ms(par_copy_ms),
        x(tab.ratio(5, 6)),
    );
    row(
        "table 65,536 x 1,024: generic (candle ops) vs whisper's `sinusoids`",
        ms(generic_ms),
        ms(naive_whisper_ms),
        x(tab.ratio(2, 3)),
    );
    row(
        "table 65,536 x 1,024: Marian's table (candle-transformers)",
        String::new(),
        ms(naive_marian_ms),
        String::new(),
    );
    row(
        "embed 8 x 4,096, d 1,024: fused block vs bare `Embedding`",
        ms(fused_embed_ms),
        ms(plain_embed_ms),
        x(emb.ratio(0, 1)),
    );
    row(
        "embed, 1 thread: fused block vs bare `Embedding`",
        ms(fused_1t_ms),
        ms(plain_1t_ms),
        x(emb.ratio(3, 4)),
    );
    row(
        "embed: fused vs unfused candle ops",
        ms(fused_embed_ms),
        ms(unfused_embed_ms),
        x(emb.ratio(0, 2)),
    );
    row(
        "decode 1 token at 1,000,000, d 1,024: cached view vs generated",
        us(decode_cached_ms * 1e3),
        us(decode_generate_ms * 1e3),
        String::new(),
    );
    row(
        "4,096 cached rows: `range_owned` vs generated",
        ms(owned_rows_ms),
        ms(generate_rows_ms),
        x(own.ratio(0, 1)),
    );
    row(
        "rotary cos+sin 131,072 x 64: tables vs fresh-write floor",
        ms(rope_generate_ms),
        ms(rope_floor_ms),
        x(rop.ratio(1, 0)),
    );
    row(
        "rotary cos+sin 131,072 x 64: llama.rs rope setup",
        String::new(),
        ms(naive_llama_ms),
        String::new(),
    );
    row(
        "rotary decode step at 131,071: cached views",
        us(rope_cached_us),
        String::new(),
        String::new(),
    );
    row(
        "rope apply, decode (q 32, k 8 heads, 128): vs candle-nn `rope`",
        us(rope_apply_us),
        us(candle_rope_us),
        x(app.ratio(0, 1)),
    );
    row(
        "rope apply at per-token positions (batch 8 decode): fused vs index_select + candle rope",
        us(rope_apply_at_us),
        us(gather_rope_us),
        x(at.ratio(0, 1)),
    );
    row(
        "shift k (1, 8, 32,768, 128) bf16 by -1,000 vs fresh read + write of k (same threads)",
        ms(shift_ms),
        ms(shift_floor_ms),
        x(shifts.ratio(1, 0)),
    );
    row(
        "max abs error, positions up to 1,000,000",
        format!("{max_abs_err_generate:.1e}"),
        format!("{max_abs_err_naive:.1e} (naive)"),
        String::new(),
    );
    row(
        "max abs error, 65,536 x 1,024: generic vs whisper, Marian",
        format!("{err_generic:.1e}"),
        format!("{err_whisper:.1e}, {err_marian:.1e}"),
        String::new(),
    );
    row(
        "max abs error, rotary 131,072 x 64: tables vs llama.rs",
        format!("{err_rope:.1e}"),
        format!("{err_llama:.1e}"),
        String::new(),
    );

    if let Some(path) = json_path {
        let mut map: serde_json::Map<String, serde_json::Value> = report
            .iter()
            .map(|(k, v)| (k.to_string(), serde_json::json!(v)))
            .collect();
        map.insert("machine".into(), machine().into());
        map.insert("load_before".into(), load_before.into());
        map.insert("load_after".into(), load_after.into());
        std::fs::write(&path, serde_json::to_string_pretty(&map)?)?;
        eprintln!("wrote {path}");
    }
    Ok(())
}
