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

use std::mem::MaybeUninit;

use anyhow::Result;
use candle_core::{DType, Device, Module, Tensor};
use rayon::prelude::*;

use candle_pe::TableBackend;
use candle_pe::{At, Longrope, RopeType};
use candle_pe::{EmbeddingScale, RotaryEmbedding, SinusoidalEmbedding, SinusoidalEmbeddingConfig};
use candle_pe::{PeCache, PeSpec, Rope, RopeCache, RopeConfig, SinusoidalEncoding};
use pe_testkit::race::{Case, Race, Rounds};
use pe_testkit::{gather_rope, marian_table, naive_f32_table, naive_llama_rope, whisper_sinusoids};
use pe_testkit::{Sweep, SWEEP_AT, SWEEP_LENGTHS, SWEPT};

const LEN: usize = 65_536;
const WIDTH: usize = 1024;
const BATCH: usize = 8;
const SEQ: usize = 4096;
const VOCAB: usize = 32_000;
const DECODE_AT: usize = 1_000_000;
const ROPE_LEN: usize = 131_072;
const HEAD_DIM: usize = 128;
const ROPE_THETA: f32 = 500_000.0;

/// Times `cases` in `rounds` interleaved rounds (milliseconds), after a warm-up run each;
/// prints each case's median, min and max to stderr.
fn interleaved(rounds: usize, cases: Vec<Case<'_>>) -> Result<Rounds> {
    let measured = Race::new(rounds).run(cases)?;
    measured.print_summary("ms");
    Ok(measured)
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
        "{}, machine class {}, {} threads, rayon pool of {}",
        pe_testkit::cpu_model(),
        pe_testkit::machine_class(),
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

/// What the report measured: the interleaved races, looked up by case, and the errors.
struct Measured {
    load_before: String,
    load_after: String,
    tables: Rounds,
    embed: Rounds,
    decode: Rounds,
    owned: Rounds,
    rope: Rounds,
    rope_cached: Rounds,
    apply: Rounds,
    apply_prefill: Rounds,
    apply_at: Rounds,
    apply_longrope: Rounds,
    shift: Rounds,
    /// Time against sequence length (`pe_testkit::Sweep`).
    sweep: serde_json::Value,
    errors: Errors,
}

/// The largest absolute errors of the tables against exact ones.
struct Errors {
    /// Positions up to 1,000,000 against an independent f64 evaluation: ours, naive f32.
    generate: f64,
    naive: f64,
    /// Over the whole 65,536 x 1,024 table: the generic path, whisper's, Marian's.
    generic: f64,
    whisper: f64,
    marian: f64,
    /// Over the rotary tables: ours, llama.rs's.
    rope: f64,
    llama: f64,
}

fn report(json_path: Option<String>) -> Result<()> {
    let m = measure()?;
    print_markdown(&m);
    if let Some(path) = json_path {
        let mut map: serde_json::Map<String, serde_json::Value> = json_numbers(&m)
            .iter()
            .map(|(k, v)| (k.to_string(), serde_json::json!(v)))
            .collect();
        map.insert("machine".into(), machine().into());
        map.insert("load_before".into(), m.load_before.into());
        map.insert("load_after".into(), m.load_after.into());
        map.insert("sweep".into(), m.sweep.clone());
        std::fs::write(&path, serde_json::to_string_pretty(&map)?)?;
        eprintln!("wrote {path}");
    }
    Ok(())
}

/// Runs every race, then the errors, in the order the report has always run them.
fn measure() -> Result<Measured> {
    let spec = PeSpec::fairseq(WIDTH);
    let pe = SinusoidalEncoding::new(spec)?;
    let generic = pe.clone().with_backend(TableBackend::Generic);
    let load_before = pe_testkit::load();
    eprintln!("measuring on {} (load {load_before}) ...", machine());
    let tables = tables(&pe, &generic)?;
    let cache = PeCache::new(pe.clone());
    let embed = embedding(&cache)?;
    let (decode, owned) = decode(&pe, &cache)?;
    cache.clear();
    let sweep = Sweep {
        label: format!("CPU ({})", machine().split(',').next().unwrap_or("")),
        device: &Device::Cpu,
        backend: TableBackend::Auto,
        width: WIDTH,
        at: SWEEP_AT,
        lengths: &SWEEP_LENGTHS,
        sync: None,
    }
    .run()?;
    let rope = Rope::new(RopeConfig::new(HEAD_DIM, f64::from(ROPE_THETA)))?;
    let (rope_races, rope_cached) = rope_tables(&rope)?;
    let rotary = RotaryEmbedding::new(RopeConfig::new(HEAD_DIM, f64::from(ROPE_THETA)))?;
    let apply = rope_apply(&rotary, 1, 4096, 2001)?;
    let apply_prefill = rope_apply(&rotary, 2048, 0, 31)?;
    let apply_at = rope_apply_at(&rotary)?;
    let apply_longrope = rope_apply_longrope()?;
    let load_after = pe_testkit::load();
    let errors = errors(&spec, &pe, &generic, &rope)?;
    let shift = shift(&rotary)?;
    Ok(Measured {
        load_before,
        load_after,
        tables,
        embed,
        decode,
        owned,
        rope: rope_races,
        rope_cached,
        apply,
        apply_prefill,
        apply_at,
        apply_longrope,
        shift,
        sweep,
        errors,
    })
}

/// Tables: 65,536 x 1,024 f32 (256 MiB), against the write floor, copies, the naive ops.
fn tables(pe: &SinusoidalEncoding, generic: &SinusoidalEncoding) -> Result<Rounds> {
    eprintln!("tables 65,536 x 1,024 f32:");
    let dev = Device::Cpu;
    let source = pe.range(0, LEN, DType::F32, &dev)?;
    let host = source.flatten_all()?.to_vec1::<f32>()?;
    interleaved(
        11,
        vec![
            Case::new("floor (fresh write)", || Ok(fresh_write(LEN * WIDTH))),
            Case::new("generate (CPU)", || {
                Ok(pe.range(0, LEN, DType::F32, &dev)?)
            }),
            Case::new("generate (generic)", || {
                Ok(generic.range(0, LEN, DType::F32, &dev)?)
            }),
            Case::new("whisper sinusoids", || {
                Ok(whisper_sinusoids(LEN, WIDTH, &dev)?)
            }),
            Case::new("marian table", || Ok(marian_table(WIDTH, LEN, &dev)?)),
            Case::new("Tensor::copy", || Ok(source.copy()?)),
            Case::new("parallel copy", || Ok(parallel_copy(&host))),
        ],
    )
}

/// Embedding block: batch 8 x seq 4096, d 1024, vocab 32000; all threads and one.
fn embedding(cache: &PeCache) -> Result<Rounds> {
    eprintln!("embedding 8 x 4,096, d 1,024:");
    let dev = Device::Cpu;
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
    let scale = (WIDTH as f64).sqrt();
    let one = rayon::ThreadPoolBuilder::new().num_threads(1).build()?;
    interleaved(
        9,
        vec![
            Case::new("fused block", || Ok(block.forward(&ids)?)),
            Case::new("bare Embedding", || Ok(plain.forward(&ids)?)),
            Case::new("unfused ops", || {
                let x = plain.forward(&ids)?.affine(scale, 0.0)?;
                Ok(x.broadcast_add(&cache.range(0, SEQ, DType::F32, &dev)?)?)
            }),
            Case::new("fused block, 1 thread", || {
                one.install(|| Ok(block.forward(&ids)?))
            }),
            Case::new("bare Embedding, 1 thread", || {
                one.install(|| Ok(plain.forward(&ids)?))
            }),
        ],
    )
}

/// Decoding one token at position 1,000,000; materialising 4,096 cached rows.
fn decode(pe: &SinusoidalEncoding, cache: &PeCache) -> Result<(Rounds, Rounds)> {
    eprintln!("decode and materialise:");
    let dev = Device::Cpu;
    cache.range(0, DECODE_AT + 1, DType::F32, &dev)?;
    let decode = interleaved(
        2001,
        vec![
            Case::new("cached view", || {
                Ok(cache.range(DECODE_AT, 1, DType::F32, &dev)?)
            }),
            Case::new("generated row", || {
                Ok(pe.range(DECODE_AT, 1, DType::F32, &dev)?)
            }),
        ],
    )?;
    let owned = interleaved(
        21,
        vec![
            Case::new("range_owned 4,096 rows", || {
                Ok(cache.range_owned(DECODE_AT - SEQ, SEQ, DType::F32, &dev)?)
            }),
            Case::new("generate 4,096 rows", || {
                Ok(pe.range(DECODE_AT - SEQ, SEQ, DType::F32, &dev)?)
            }),
        ],
    )?;
    Ok((decode, owned))
}

/// Rotary tables: 131,072 positions, head_dim 128 (cos and sin each 131,072 x 64), f32; and
/// a decode step's cached views.
fn rope_tables(rope: &Rope) -> Result<(Rounds, Rounds)> {
    eprintln!("rotary tables 131,072 x 64 (x2) f32:");
    let dev = Device::Cpu;
    let h = HEAD_DIM / 2;
    let tables = interleaved(
        25,
        vec![
            Case::new("floor (fresh write of cos and sin)", || {
                Ok((fresh_write(ROPE_LEN * h), fresh_write(ROPE_LEN * h)))
            }),
            Case::new("tables (CPU)", || {
                Ok(rope.range(0, ROPE_LEN, DType::F32, &dev)?)
            }),
            Case::new("llama.rs rope setup", || {
                Ok(naive_llama_rope(HEAD_DIM, ROPE_THETA, ROPE_LEN, &dev)?)
            }),
        ],
    )?;
    let rope_cache = RopeCache::new(rope.clone());
    rope_cache.range(0, ROPE_LEN, DType::F32, &dev)?;
    let cached = interleaved(
        2001,
        vec![Case::new("cached views", || {
            Ok(rope_cache.range(ROPE_LEN - 1, 1, DType::F32, &dev)?)
        })],
    )?;
    Ok((tables, cached))
}

/// Applying rope to `seq` tokens at positions `at ..` (a decode step: 1 at 4,096; a prefill:
/// 2,048 at 0): q 32 heads, k 8 heads, head_dim 128, against candle-nn's `rope` on views of a
/// llama.rs-style cache, in `rounds` rounds.
fn rope_apply(rotary: &RotaryEmbedding, seq: usize, at: usize, rounds: usize) -> Result<Rounds> {
    eprintln!("rope apply, {seq} tokens at {at}:");
    let dev = Device::Cpu;
    let (llama_cos, llama_sin) = naive_llama_rope(HEAD_DIM, ROPE_THETA, 8192, &dev)?;
    let q = Tensor::randn(0f32, 1.0, (1, 32, seq, HEAD_DIM), &dev)?;
    let k = Tensor::randn(0f32, 1.0, (1, 8, seq, HEAD_DIM), &dev)?;
    interleaved(
        rounds,
        vec![
            Case::new("RotaryEmbedding::apply", || Ok(rotary.apply(&q, &k, at)?)),
            Case::new("candle-nn rope (llama.rs)", || {
                let cos = llama_cos.narrow(0, at, seq)?;
                let sin = llama_sin.narrow(0, at, seq)?;
                let q = candle_nn::rotary_emb::rope(&q, &cos, &sin)?;
                let k = candle_nn::rotary_emb::rope(&k, &cos, &sin)?;
                Ok((q, k))
            }),
        ],
    )
}

/// Applying rope at per-token positions: a ragged decode step of 8 sequences at positions
/// 100 .. 7800 (q 32 heads, k 8, head_dim 128), against the cached rows gathered by
/// `index_select` + candle-nn's `rope`.
fn rope_apply_at(rotary: &RotaryEmbedding) -> Result<Rounds> {
    eprintln!("rope apply at per-token positions, batch 8 decode:");
    let dev = Device::Cpu;
    let q = Tensor::randn(0f32, 1.0, (8, 32, 1, HEAD_DIM), &dev)?;
    let k = Tensor::randn(0f32, 1.0, (8, 8, 1, HEAD_DIM), &dev)?;
    let ids: Vec<u32> = (0..8).map(|b| 100 + 1100 * b).collect();
    let positions = Tensor::from_vec(ids, (8, 1), &dev)?;
    interleaved(
        2001,
        vec![
            Case::new("RotaryEmbedding::apply_at", || {
                Ok(rotary.apply(&q, &k, &positions)?)
            }),
            Case::new("index_select + candle-nn rope", || {
                Ok(gather_rope(rotary.cache(), &q, &k, &positions)?)
            }),
        ],
    )
}

/// A decode step of a longrope model past its original context, Phi-3-mini's shape (32 heads
/// of 96, original context 4,096, 131,072 in all; factors of that length, not Phi-3's) at
/// position 100,000, against candle-nn's `rope` on precomputed tables of the long factors.
fn rope_apply_longrope() -> Result<Rounds> {
    eprintln!("rope apply, longrope decode at 100,000:");
    let (dev, d, at) = (Device::Cpu, 96, 100_000);
    let factors = |step: f64| (0..d / 2).map(|i| 1.0 + step * i as f64).collect();
    let config = RopeConfig {
        max_position_embeddings: Some(131_072),
        ..RopeConfig::new(d, 10_000.0).with_rope_type(RopeType::Longrope(Longrope {
            short_factor: factors(0.02),
            long_factor: factors(1.25),
            factor: None,
            original_max_position_embeddings: Some(4096),
            attention_factor: None,
            short_mscale: None,
            long_mscale: None,
        }))
    };
    let rotary = RotaryEmbedding::new(config)?;
    let ids = Tensor::arange(at as u32 - 64, at as u32 + 64, &dev)?;
    let (cos, sin) = rotary
        .rope()
        .at(At::positions(&ids).with_tracked_len(at + 1), DType::F32)?;
    let q = Tensor::randn(0f32, 1.0, (1, 32, 1, d), &dev)?;
    let k = Tensor::randn(0f32, 1.0, (1, 32, 1, d), &dev)?;
    interleaved(
        2001,
        vec![
            Case::new("RotaryEmbedding::apply (longrope)", || {
                Ok(rotary.apply(&q, &k, at)?)
            }),
            Case::new("candle-nn rope, precomputed long tables", || {
                let (cos, sin) = (cos.narrow(0, 64, 1)?, sin.narrow(0, 64, 1)?);
                let q = candle_nn::rotary_emb::rope(&q, &cos, &sin)?;
                let k = candle_nn::rotary_emb::rope(&k, &cos, &sin)?;
                Ok((q, k))
            }),
        ],
    )
}

/// Errors: at positions up to 1,000,000 against an independent f64 evaluation, and of the
/// naive constructions over their whole tables against this crate's f64 tables.
fn errors(
    spec: &PeSpec,
    pe: &SinusoidalEncoding,
    generic: &SinusoidalEncoding,
    rope: &Rope,
) -> Result<Errors> {
    eprintln!("errors ...");
    let dev = Device::Cpu;
    let rows = 256;
    let exact = exact_rows(spec, DECODE_AT + 1 - rows, rows)?;
    let ours = pe.range(DECODE_AT + 1 - rows, rows, DType::F32, &dev)?;
    let naive = naive_f32_table(pe, DECODE_AT + 1 - rows, rows, &dev)?;
    let whisper_exact = SinusoidalEncoding::new(PeSpec::whisper(WIDTH))?;
    let whisper = max_abs_diff(
        &whisper_sinusoids(LEN, WIDTH, &dev)?,
        &whisper_exact.range(0, LEN, DType::F64, &dev)?,
    )?;
    let marian_exact = SinusoidalEncoding::new(PeSpec::marian(WIDTH))?;
    let marian = max_abs_diff(
        &marian_table(WIDTH, LEN, &dev)?,
        &marian_exact.range(0, LEN, DType::F64, &dev)?,
    )?;
    let generic = max_abs_diff(
        &generic.range(0, LEN, DType::F32, &dev)?,
        &pe.range(0, LEN, DType::F64, &dev)?,
    )?;
    let (cos, sin) = naive_llama_rope(HEAD_DIM, ROPE_THETA, ROPE_LEN, &dev)?;
    let (exact_cos, exact_sin) = rope.range(0, ROPE_LEN, DType::F64, &dev)?;
    let llama = max_abs_diff(&cos, &exact_cos)?.max(max_abs_diff(&sin, &exact_sin)?);
    let (cos, sin) = rope.range(0, ROPE_LEN, DType::F32, &dev)?;
    Ok(Errors {
        generate: max_abs_diff(&ours, &exact)?,
        naive: max_abs_diff(&naive, &exact)?,
        generic,
        whisper,
        marian,
        rope: max_abs_diff(&cos, &exact_cos)?.max(max_abs_diff(&sin, &exact_sin)?),
        llama,
    })
}

/// Re-rotating cached keys: k (1, 8, 32,768, 128) bf16 shifted back by 1,000 positions (a
/// window cache's eviction), against a fresh read + write of the same bytes.
fn shift(rotary: &RotaryEmbedding) -> Result<Rounds> {
    eprintln!("shift k (1, 8, 32768, 128) bf16:");
    let shape = (1, 8, 32_768, HEAD_DIM);
    let keys = Tensor::randn(0f32, 1.0, shape, &Device::Cpu)?.to_dtype(DType::BF16)?;
    let bits = vec![0x3f80u16; keys.elem_count()];
    interleaved(
        15,
        vec![
            Case::new("floor (fresh read + write of k)", || {
                Ok(parallel_copy_u16(&bits))
            }),
            Case::new("shift", || Ok(rotary.shift(&keys, 1000, 0)?)),
        ],
    )
}

/// The JSON numbers, named as the report has always named them.
fn json_numbers(m: &Measured) -> Vec<(&'static str, f64)> {
    let mut numbers = json_tables(m);
    numbers.extend(json_rest(m));
    numbers.extend(json_rope(m));
    numbers
}

/// The JSON numbers of the sinusoidal tables.
fn json_tables(m: &Measured) -> Vec<(&'static str, f64)> {
    let tab = &m.tables;
    vec![
        ("generate_ms", tab.median("generate (CPU)")),
        ("copy_ms", tab.median("Tensor::copy")),
        ("naive_ms", tab.median("whisper sinusoids")),
        (
            "generate_over_copy",
            tab.ratio("generate (CPU)", "Tensor::copy"),
        ),
        (
            "naive_over_generate",
            tab.ratio("whisper sinusoids", "generate (CPU)"),
        ),
        ("floor_ms", tab.median("floor (fresh write)")),
        (
            "generate_over_floor",
            tab.ratio("generate (CPU)", "floor (fresh write)"),
        ),
        ("par_copy_ms", tab.median("parallel copy")),
        (
            "copy_over_par_copy",
            tab.ratio("Tensor::copy", "parallel copy"),
        ),
        ("generic_ms", tab.median("generate (generic)")),
        ("naive_whisper_ms", tab.median("whisper sinusoids")),
        ("naive_marian_ms", tab.median("marian table")),
        (
            "generic_over_naive",
            tab.ratio("generate (generic)", "whisper sinusoids"),
        ),
    ]
}

/// The JSON numbers of the embedding block, decoding and the sinusoidal errors.
fn json_rest(m: &Measured) -> Vec<(&'static str, f64)> {
    let (emb, e) = (&m.embed, &m.errors);
    vec![
        ("fused_embed_ms", emb.median("fused block")),
        ("plain_embed_ms", emb.median("bare Embedding")),
        ("unfused_embed_ms", emb.median("unfused ops")),
        (
            "fused_over_plain",
            emb.ratio("fused block", "bare Embedding"),
        ),
        ("fused_1t_ms", emb.median("fused block, 1 thread")),
        ("plain_1t_ms", emb.median("bare Embedding, 1 thread")),
        (
            "fused_over_plain_1t",
            emb.ratio("fused block, 1 thread", "bare Embedding, 1 thread"),
        ),
        ("decode_cached_us", m.decode.median("cached view") * 1e3),
        ("decode_generate_us", m.decode.median("generated row") * 1e3),
        (
            "range_owned_4096_ms",
            m.owned.median("range_owned 4,096 rows"),
        ),
        ("generate_4096_ms", m.owned.median("generate 4,096 rows")),
        ("max_abs_err_generate", e.generate),
        ("max_abs_err_naive", e.naive),
        ("max_abs_err_generic", e.generic),
        ("max_abs_err_whisper", e.whisper),
        ("max_abs_err_marian", e.marian),
    ]
}

/// The JSON numbers of the rope: tables, errors, applying and shifting.
fn json_rope(m: &Measured) -> Vec<(&'static str, f64)> {
    let (e, rope) = (&m.errors, &m.rope);
    vec![
        ("rope_generate_ms", rope.median("tables (CPU)")),
        (
            "rope_floor_ms",
            rope.median("floor (fresh write of cos and sin)"),
        ),
        (
            "rope_over_floor",
            rope.ratio("tables (CPU)", "floor (fresh write of cos and sin)"),
        ),
        ("naive_llama_rope_ms", rope.median("llama.rs rope setup")),
        ("max_abs_err_rope", e.rope),
        ("max_abs_err_llama_rope", e.llama),
        ("rope_cached_us", m.rope_cached.median("cached views") * 1e3),
        (
            "rope_apply_us",
            m.apply.median("RotaryEmbedding::apply") * 1e3,
        ),
        (
            "candle_rope_us",
            m.apply.median("candle-nn rope (llama.rs)") * 1e3,
        ),
        (
            "rope_apply_over_candle",
            m.apply
                .ratio("RotaryEmbedding::apply", "candle-nn rope (llama.rs)"),
        ),
        (
            "rope_prefill_ms",
            m.apply_prefill.median("RotaryEmbedding::apply"),
        ),
        (
            "candle_rope_prefill_ms",
            m.apply_prefill.median("candle-nn rope (llama.rs)"),
        ),
        (
            "rope_prefill_over_candle",
            m.apply_prefill
                .ratio("RotaryEmbedding::apply", "candle-nn rope (llama.rs)"),
        ),
        (
            "rope_apply_at_us",
            m.apply_at.median("RotaryEmbedding::apply_at") * 1e3,
        ),
        (
            "gather_rope_us",
            m.apply_at.median("index_select + candle-nn rope") * 1e3,
        ),
        (
            "rope_apply_at_over_gather",
            m.apply_at
                .ratio("RotaryEmbedding::apply_at", "index_select + candle-nn rope"),
        ),
        (
            "rope_longrope_us",
            m.apply_longrope.median("RotaryEmbedding::apply (longrope)") * 1e3,
        ),
        (
            "rope_longrope_over_candle",
            m.apply_longrope.ratio(
                "RotaryEmbedding::apply (longrope)",
                "candle-nn rope, precomputed long tables",
            ),
        ),
        ("shift_ms", m.shift.median("shift")),
        (
            "shift_floor_ms",
            m.shift.median("floor (fresh read + write of k)"),
        ),
        (
            "shift_over_floor",
            m.shift.ratio("shift", "floor (fresh read + write of k)"),
        ),
    ]
}

/// One row of the markdown table: case, candle-pe, reference, ratio.
type Row = [String; 4];

/// A row timing `case` against `reference` in `races`: their medians and the median ratio.
fn versus(label: &str, races: &Rounds, case: &str, reference: &str, unit: Unit) -> Row {
    let v = races.versus(case, reference);
    [
        label.to_string(),
        unit.show(v.ours),
        unit.show(v.reference),
        format!("{:.2}", v.ratio),
    ]
}

/// A row of one time, ours (`ours: true`) or a reference's, without a ratio.
fn alone(label: &str, value: String, ours: bool) -> Row {
    match ours {
        true => [label.to_string(), value, String::new(), String::new()],
        false => [label.to_string(), String::new(), value, String::new()],
    }
}

/// How a time in milliseconds is shown.
#[derive(Clone, Copy)]
enum Unit {
    Ms,
    Us,
}

impl Unit {
    fn show(self, ms: f64) -> String {
        match self {
            Unit::Ms => format!("{ms:.1} ms"),
            Unit::Us => format!("{:.2} us", ms * 1e3),
        }
    }
}

/// The rows of the sinusoidal tables.
fn table_rows(m: &Measured) -> Vec<Row> {
    let tab = &m.tables;
    let t = "table 65,536 x 1,024";
    vec![
        versus(
            &format!("{t}: generate vs fresh-write floor (same threads)"),
            tab,
            "generate (CPU)",
            "floor (fresh write)",
            Unit::Ms,
        ),
        versus(
            &format!("{t}: generate vs `Tensor::copy`"),
            tab,
            "generate (CPU)",
            "Tensor::copy",
            Unit::Ms,
        ),
        versus(
            &format!("{t}: `Tensor::copy` vs a parallel copy"),
            tab,
            "Tensor::copy",
            "parallel copy",
            Unit::Ms,
        ),
        versus(
            &format!("{t}: generic (candle ops) vs whisper's `sinusoids`"),
            tab,
            "generate (generic)",
            "whisper sinusoids",
            Unit::Ms,
        ),
        alone(
            &format!("{t}: Marian's table (candle-transformers)"),
            Unit::Ms.show(tab.median("marian table")),
            false,
        ),
    ]
}

/// The rows of the embedding block and decoding.
fn embed_rows(m: &Measured) -> Vec<Row> {
    let emb = &m.embed;
    vec![
        versus(
            "embed 8 x 4,096, d 1,024: fused block vs bare `Embedding`",
            emb,
            "fused block",
            "bare Embedding",
            Unit::Ms,
        ),
        versus(
            "embed, 1 thread: fused block vs bare `Embedding`",
            emb,
            "fused block, 1 thread",
            "bare Embedding, 1 thread",
            Unit::Ms,
        ),
        versus(
            "embed: fused vs unfused candle ops",
            emb,
            "fused block",
            "unfused ops",
            Unit::Ms,
        ),
        [
            "decode 1 token at 1,000,000, d 1,024: cached view vs generated".to_string(),
            Unit::Us.show(m.decode.median("cached view")),
            Unit::Us.show(m.decode.median("generated row")),
            String::new(),
        ],
        versus(
            "4,096 cached rows: `range_owned` vs generated",
            &m.owned,
            "range_owned 4,096 rows",
            "generate 4,096 rows",
            Unit::Ms,
        ),
    ]
}

/// The rows of the rotary tables, applying and shifting.
fn rope_rows(m: &Measured) -> Vec<Row> {
    let r = "rotary cos+sin 131,072 x 64";
    vec![
        versus(
            &format!("{r}: tables vs fresh-write floor"),
            &m.rope,
            "tables (CPU)",
            "floor (fresh write of cos and sin)",
            Unit::Ms,
        ),
        alone(
            &format!("{r}: llama.rs rope setup"),
            Unit::Ms.show(m.rope.median("llama.rs rope setup")),
            false,
        ),
        alone(
            "rotary decode step at 131,071: cached views",
            Unit::Us.show(m.rope_cached.median("cached views")),
            true,
        ),
        versus(
            "rope apply, decode (q 32, k 8 heads, 128): vs candle-nn `rope`",
            &m.apply,
            "RotaryEmbedding::apply",
            "candle-nn rope (llama.rs)",
            Unit::Us,
        ),
        versus(
            "rope apply, prefill of 2,048 (q 32, k 8 heads, 128): vs candle-nn `rope`",
            &m.apply_prefill,
            "RotaryEmbedding::apply",
            "candle-nn rope (llama.rs)",
            Unit::Ms,
        ),
        versus(
            "rope apply at per-token positions (batch 8 decode): fused vs index_select + candle rope",
            &m.apply_at,
            "RotaryEmbedding::apply_at",
            "index_select + candle-nn rope",
            Unit::Us,
        ),
        versus(
            "rope apply, longrope decode at 100,000 (q, k 32 heads, 96) vs candle-nn `rope` on precomputed tables",
            &m.apply_longrope,
            "RotaryEmbedding::apply (longrope)",
            "candle-nn rope, precomputed long tables",
            Unit::Us,
        ),
        versus(
            "shift k (1, 8, 32,768, 128) bf16 by -1,000 vs fresh read + write of k (same threads)",
            &m.shift,
            "shift",
            "floor (fresh read + write of k)",
            Unit::Ms,
        ),
    ]
}

/// The rows of the largest errors.
fn error_rows(e: &Errors) -> Vec<Row> {
    let row = |label: &str, ours: String, reference: String| {
        [label.to_string(), ours, reference, String::new()]
    };
    vec![
        row(
            "max abs error, positions up to 1,000,000",
            format!("{:.1e}", e.generate),
            format!("{:.1e} (naive)", e.naive),
        ),
        row(
            "max abs error, 65,536 x 1,024: generic vs whisper, Marian",
            format!("{:.1e}", e.generic),
            format!("{:.1e}, {:.1e}", e.whisper, e.marian),
        ),
        row(
            "max abs error, rotary 131,072 x 64: tables vs llama.rs",
            format!("{:.1e}", e.rope),
            format!("{:.1e}", e.llama),
        ),
    ]
}

/// The markdown table on stdout.
fn print_markdown(m: &Measured) {
    println!(
        "Measured on {} (load average {} before, {} after; f32, CPU).\n",
        machine(),
        m.load_before,
        m.load_after
    );
    println!("| case | candle-pe | reference | ratio |");
    println!("|---|---:|---:|---:|");
    let rows = [
        table_rows(m),
        embed_rows(m),
        rope_rows(m),
        error_rows(&m.errors),
    ];
    for [case, ours, reference, ratio] in rows.iter().flatten() {
        println!("| {case} | {ours} | {reference} | {ratio} |");
    }
    println!("\nRows ending at position {SWEEP_AT} (d {WIDTH}, f32), medians in ms:\n");
    println!("| rows | {} |", SWEPT.join(" | "));
    println!("|---:|{}", "---:|".repeat(SWEPT.len()));
    let ms = |k: usize, i: usize| m.sweep["series"][k]["ms"][i].as_f64().unwrap_or(f64::NAN);
    for (i, (n, _)) in SWEEP_LENGTHS.iter().enumerate() {
        let cells: Vec<String> = (0..SWEPT.len())
            .map(|k| format!("{:.4}", ms(k, i)))
            .collect();
        println!("| {n} | {} |", cells.join(" | "));
    }
}
