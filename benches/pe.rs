//! Criterion benchmarks: on-the-fly generation against cached tables, the naive candle-op
//! composition and the memory reference (`Tensor::copy`), on the device chosen at compile time
//! (CPU; CUDA with `--features cuda`). Group names start with the device: `cpu_table`, ...
//!
//! ```text
//! cargo bench                          # everything (about ten minutes on 2 cores)
//! cargo bench -- cpu_decode            # one group
//! cargo bench -- cpu_generic           # the candle-op generator (what runs on CUDA)
//! cargo bench -- cpu_shift             # re-rotating cached keys against a copy
//! cargo bench -- --test                # each case once, small sizes only
//! cargo test --bench pe                # the same in the test profile (what CI runs: it reuses
//!                                      # the test build instead of a release build)
//! ```

use std::hint::black_box;
use std::time::{Duration, Instant};

use candle_core::{DType, Device, Module, Tensor};

use candle_pe::{
    EmbeddingScale, PositionMode, Preset, RotaryEmbedding, SinusoidalEmbedding,
    SinusoidalEmbeddingConfig,
};
use candle_pe::{PeCache, PeSpec, Rope, RopeCache, RopeConfig, SinusoidalEncoding, TableBackend};
use criterion::measurement::WallTime;
use criterion::{BenchmarkGroup, BenchmarkId, Criterion, Throughput};
use pe_testkit::{gather_rope, naive_f32_table, whisper_sinusoids};

/// A group of cases, timed by the wall clock.
type Group<'a> = BenchmarkGroup<'a, WallTime>;

/// The largest table a case may build.
const MAX_TABLE_BYTES: usize = 2 << 30;
/// The largest cache a decode case may hold.
const MAX_CACHE_BYTES: usize = 4 << 30;

fn device() -> Device {
    #[cfg(feature = "cuda")]
    return Device::new_cuda(0).expect("--features cuda needs a CUDA GPU");
    #[cfg(not(feature = "cuda"))]
    Device::Cpu
}

fn prefix(dev: &Device) -> &'static str {
    if dev.is_cuda() {
        "cuda"
    } else {
        "cpu"
    }
}

/// Criterion's test mode runs each case once: keep to small sizes there. It is on under
/// `cargo test` (no `--bench` argument) and with `--test`.
fn quick() -> bool {
    let has = |flag: &str| std::env::args().any(|a| a == flag);
    has("--test") || !has("--bench")
}

/// Times `iters` calls of `f`, synchronizing the device before reading the clock.
fn timed<T>(dev: &Device, iters: u64, mut f: impl FnMut() -> T) -> Duration {
    let start = Instant::now();
    for _ in 0..iters {
        black_box(f());
    }
    dev.synchronize().unwrap();
    start.elapsed()
}

fn table(c: &mut Criterion, dev: &Device) {
    let lens: &[usize] = if quick() {
        &[128, 1024]
    } else {
        &[128, 1024, 8192, 65536, 262_144]
    };
    let widths: &[usize] = if quick() { &[512] } else { &[512, 1024, 4096] };
    let mut group = c.benchmark_group(format!("{}_table", prefix(dev)));
    group
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    for &d in widths {
        let pe = SinusoidalEncoding::new(PeSpec::fairseq(d)).unwrap();
        let cache = PeCache::new(pe.clone());
        for &len in lens {
            let mut dtypes = vec![DType::F32];
            if d == 1024 && len == 65536 || quick() {
                dtypes.push(DType::BF16);
            }
            for dtype in dtypes {
                let bytes = len * d * dtype.size_in_bytes();
                if bytes > MAX_TABLE_BYTES {
                    continue;
                }
                group.throughput(Throughput::Bytes(bytes as u64));
                let case = format!("{dtype:?}/{len}x{d}").to_lowercase();
                cache.range(0, len, dtype, dev).unwrap();
                group.bench_function(BenchmarkId::new("generate", &case), |b| {
                    b.iter_custom(|n| timed(dev, n, || pe.range(0, len, dtype, dev).unwrap()))
                });
                // What materialising cached rows costs: `range_owned` copies just the rows
                // (`Tensor::copy` of the view would copy the whole cached table).
                group.bench_function(BenchmarkId::new("cached_owned", &case), |b| {
                    b.iter_custom(|n| {
                        timed(dev, n, || cache.range_owned(0, len, dtype, dev).unwrap())
                    })
                });
                let source = pe.range(0, len, dtype, dev).unwrap();
                group.bench_function(BenchmarkId::new("copy", &case), |b| {
                    b.iter_custom(|n| timed(dev, n, || source.copy().unwrap()))
                });
                if dtype == DType::F32 {
                    group.bench_function(BenchmarkId::new("naive", &case), |b| {
                        b.iter_custom(|n| {
                            timed(dev, n, || naive_f32_table(&pe, 0, len, dev).unwrap())
                        })
                    });
                }
            }
        }
        cache.clear();
    }
    group.finish();
}

fn decode(c: &mut Criterion, dev: &Device) {
    let offsets: &[usize] = if quick() {
        &[0, 4096]
    } else {
        &[0, 4096, 1_000_000]
    };
    let mut group = c.benchmark_group(format!("{}_decode", prefix(dev)));
    group
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(1));
    for d in [1024, 4096] {
        let pe = SinusoidalEncoding::new(PeSpec::fairseq(d)).unwrap();
        for &offset in offsets {
            group.throughput(Throughput::Bytes((d * 4) as u64));
            let case = format!("offset{offset}/d{d}");
            group.bench_function(BenchmarkId::new("generate", &case), |b| {
                b.iter_custom(|n| timed(dev, n, || pe.range(offset, 1, DType::F32, dev).unwrap()))
            });
        }
    }
    group.finish();
}

/// Zero-copy views of cached tables: no bytes are moved, so no throughput is reported.
fn views(c: &mut Criterion, dev: &Device) {
    let offsets: &[usize] = if quick() {
        &[0, 4096]
    } else {
        &[0, 4096, 1_000_000]
    };
    let mut group = c.benchmark_group(format!("{}_view", prefix(dev)));
    group
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(1));
    for d in [1024, 4096] {
        let cache = PeCache::new(SinusoidalEncoding::new(PeSpec::fairseq(d)).unwrap());
        for &offset in offsets {
            if (offset + 1) * d * 4 > MAX_CACHE_BYTES {
                continue;
            }
            cache.range(0, offset + 1, DType::F32, dev).unwrap();
            let case = format!("offset{offset}/d{d}");
            group.bench_function(BenchmarkId::new("decode_row", &case), |b| {
                b.iter_custom(|n| {
                    timed(dev, n, || cache.range(offset, 1, DType::F32, dev).unwrap())
                })
            });
        }
        let len = if quick() { 1024 } else { 65_536 };
        cache.range(0, len, DType::F32, dev).unwrap();
        group.bench_function(BenchmarkId::new("range", format!("{len}x{d}")), |b| {
            b.iter_custom(|n| timed(dev, n, || cache.range(0, len, DType::F32, dev).unwrap()))
        });
        cache.clear();
    }
    let rope = RopeCache::new(Rope::new(RopeConfig::new(128, 500_000.0)).unwrap());
    let len = if quick() { 1024 } else { 131_072 };
    rope.range(0, len, DType::F32, dev).unwrap();
    group.bench_function(BenchmarkId::new("rope_tables", len), |b| {
        b.iter_custom(|n| timed(dev, n, || rope.range(0, len, DType::F32, dev).unwrap()))
    });
    group.bench_function(BenchmarkId::new("rope_decode_step", len), |b| {
        b.iter_custom(|n| timed(dev, n, || rope.range(len - 1, 1, DType::F32, dev).unwrap()))
    });
    group.finish();
}

/// The device-generic generator (candle ops: what runs on CUDA) forced on this device.
fn generic(c: &mut Criterion, dev: &Device) {
    let lens: &[usize] = if quick() {
        &[128, 1024]
    } else {
        &[1024, 8192, 65_536]
    };
    let d = if quick() { 512 } else { 1024 };
    let mut group = c.benchmark_group(format!("{}_generic", prefix(dev)));
    group
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    let pe = SinusoidalEncoding::new(PeSpec::fairseq(d))
        .unwrap()
        .with_backend(TableBackend::Generic);
    for &len in lens {
        for dtype in [DType::F32, DType::BF16] {
            group.throughput(Throughput::Bytes((len * d * dtype.size_in_bytes()) as u64));
            let case = format!("{dtype:?}/{len}x{d}").to_lowercase();
            group.bench_function(BenchmarkId::new("range", &case), |b| {
                b.iter_custom(|n| timed(dev, n, || pe.range(0, len, dtype, dev).unwrap()))
            });
        }
        let ids: Vec<u32> = (0..len as u32).map(|i| (i * 7) % len as u32).collect();
        let ids = Tensor::new(ids.as_slice(), dev).unwrap();
        group.throughput(Throughput::Bytes((len * d * 4) as u64));
        group.bench_function(BenchmarkId::new("ids", format!("f32/{len}x{d}")), |b| {
            b.iter_custom(|n| timed(dev, n, || pe.at(&ids, DType::F32).unwrap()))
        });
        if d == 1024 && len == 65_536 {
            group.bench_function(
                BenchmarkId::new("naive_whisper", format!("f32/{len}x{d}")),
                |b| b.iter_custom(|n| timed(dev, n, || whisper_sinusoids(len, d, dev).unwrap())),
            );
        }
    }
    let rope = Rope::new(RopeConfig::new(128, 500_000.0))
        .unwrap()
        .with_backend(TableBackend::Generic);
    let len = if quick() { 1024 } else { 131_072 };
    group.throughput(Throughput::Bytes((len * 128 * 4) as u64));
    group.bench_function(BenchmarkId::new("rope_tables", len), |b| {
        b.iter_custom(|n| timed(dev, n, || rope.range(0, len, DType::F32, dev).unwrap()))
    });
    group.finish();
}

fn embed(c: &mut Criterion, dev: &Device) {
    let (batch, d, vocab) = (8, 1024, 32_000);
    let seqs: &[usize] = if quick() { &[512] } else { &[512, 4096] };
    let mut group = c.benchmark_group(format!("{}_embed", prefix(dev)));
    group
        .sample_size(20)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    let weights = Tensor::randn(0f32, 1.0, (vocab, d), dev).unwrap();
    let plain = candle_nn::Embedding::new(weights, d);
    let cfg = SinusoidalEmbeddingConfig {
        embedding_scale: EmbeddingScale::SqrtD,
        ..SinusoidalEmbeddingConfig::for_preset(Preset::Marian)
    };
    let block = SinusoidalEmbedding::new(plain.clone(), &cfg).unwrap();
    let cache = PeCache::new(SinusoidalEncoding::new(cfg.spec(d)).unwrap());
    let scale = (d as f64).sqrt();
    for &seq in seqs {
        let ids: Vec<u32> = (0..batch * seq)
            .map(|i| ((i * 7919) % vocab) as u32)
            .collect();
        let ids = Tensor::from_vec(ids, (batch, seq), dev).unwrap();
        group.throughput(Throughput::Bytes((batch * seq * d * 4) as u64));
        let case = format!("{batch}x{seq}/d{d}");
        group.bench_function(BenchmarkId::new("fused_block", &case), |b| {
            b.iter_custom(|n| timed(dev, n, || block.forward(&ids).unwrap()))
        });
        group.bench_function(BenchmarkId::new("plain_embedding", &case), |b| {
            b.iter_custom(|n| timed(dev, n, || plain.forward(&ids).unwrap()))
        });
        group.bench_function(BenchmarkId::new("unfused_ops", &case), |b| {
            b.iter_custom(|n| {
                timed(dev, n, || {
                    let x = plain.forward(&ids).unwrap().affine(scale, 0.0).unwrap();
                    x.broadcast_add(&cache.range(0, seq, DType::F32, dev).unwrap())
                        .unwrap()
                })
            })
        });
    }
    group.finish();
}

fn ids(c: &mut Criterion, dev: &Device) {
    let (batch, d) = (8, 1024);
    let seq = if quick() { 256 } else { 4096 };
    let mut group = c.benchmark_group(format!("{}_ids", prefix(dev)));
    group
        .sample_size(20)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    let pe = SinusoidalEncoding::new(PeSpec::fairseq(d)).unwrap();
    // Left-padded: sequence b has 64 * b pad tokens (id 1) before its tokens.
    let tokens: Vec<u32> = (0..batch * seq)
        .map(|i| {
            if i % seq < 64 * (i / seq) {
                1
            } else {
                5 + (i % 1000) as u32
            }
        })
        .collect();
    let tokens = Tensor::from_vec(tokens, (batch, seq), dev).unwrap();
    let positions = pe_core_positions(&tokens);
    group.throughput(Throughput::Bytes((batch * seq * d * 4) as u64));
    let case = format!("{batch}x{seq}/d{d}");
    group.bench_function(BenchmarkId::new("range_per_sequence", &case), |b| {
        b.iter_custom(|n| {
            timed(dev, n, || {
                pe.range(0, batch * seq, DType::F32, dev).unwrap()
            })
        })
    });
    group.bench_function(BenchmarkId::new("explicit_ids", &case), |b| {
        b.iter_custom(|n| timed(dev, n, || pe.at(&positions, DType::F32).unwrap()))
    });
    group.bench_function(BenchmarkId::new("padding_aware", &case), |b| {
        b.iter_custom(|n| {
            timed(dev, n, || {
                pe.padding_aware(&tokens, 1, 0, DType::F32).unwrap()
            })
        })
    });
    let block = SinusoidalEmbedding::new(
        candle_nn::Embedding::new(Tensor::randn(0f32, 1.0, (1000 + 5, d), dev).unwrap(), d),
        &SinusoidalEmbeddingConfig {
            positions: PositionMode::PaddingAware,
            ..SinusoidalEmbeddingConfig::for_preset(Preset::Fairseq)
        },
    )
    .unwrap();
    group.bench_function(BenchmarkId::new("padding_aware_block", &case), |b| {
        b.iter_custom(|n| timed(dev, n, || block.forward(&tokens).unwrap()))
    });
    group.finish();
}

fn rope(c: &mut Criterion, dev: &Device) {
    let head_dim = 128;
    let lens: &[usize] = if quick() {
        &[1024]
    } else {
        &[1024, 8192, 131_072]
    };
    let mut group = c.benchmark_group(format!("{}_rope", prefix(dev)));
    group
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    let config = RopeConfig::new(head_dim, 500_000.0);
    rope_tables(&mut group, dev, &config, lens);
    let rotary = RotaryEmbedding::new(config).unwrap();
    rope_apply(&mut group, dev, &rotary);
    rope_apply_at(&mut group, dev, &rotary);
    group.finish();
}

/// The rope's tables generated and cached, `lens` rows.
fn rope_tables(group: &mut Group, dev: &Device, config: &RopeConfig, lens: &[usize]) {
    let head_dim = config.head_dim;
    let rope = Rope::new(config.clone()).unwrap();
    let cache = RopeCache::new(rope.clone());
    for &len in lens {
        group.throughput(Throughput::Bytes((2 * len * head_dim / 2 * 4) as u64));
        cache.range(0, len, DType::F32, dev).unwrap();
        group.bench_function(BenchmarkId::new("tables_generate", len), |b| {
            b.iter_custom(|n| timed(dev, n, || rope.range(0, len, DType::F32, dev).unwrap()))
        });
        group.bench_function(BenchmarkId::new("tables_owned", len), |b| {
            b.iter_custom(|n| {
                timed(dev, n, || {
                    cache.range_owned(0, len, DType::F32, dev).unwrap()
                })
            })
        });
    }
}

/// Applying to q (32 heads) and k (8 heads): one decode step and a 2048-token prefill.
fn rope_apply(group: &mut Group, dev: &Device, rotary: &RotaryEmbedding) {
    let head_dim = 128;
    for (name, seq, offset) in [("apply_decode", 1, 4096), ("apply_prefill", 2048, 0)] {
        let seq = if quick() { seq.min(64) } else { seq };
        let q = Tensor::randn(0f32, 1.0, (1, 32, seq, head_dim), dev).unwrap();
        let k = Tensor::randn(0f32, 1.0, (1, 8, seq, head_dim), dev).unwrap();
        group.throughput(Throughput::Bytes(((32 + 8) * seq * head_dim * 4) as u64));
        group.bench_function(BenchmarkId::new(name, seq), |b| {
            b.iter_custom(|n| timed(dev, n, || rotary.apply(&q, &k, offset).unwrap()))
        });
    }
}

/// At per-token positions, against the cached rows gathered by `index_select` + candle-nn's
/// `rope`: a ragged decode step of 8 sequences at positions 100 .. 7800, and a 2048-token
/// prefill of 4 sequences of 512 at different offsets.
fn rope_apply_at(group: &mut Group, dev: &Device, rotary: &RotaryEmbedding) {
    let head_dim = 128;
    for (name, batch, seq) in [("decode", 8, 1), ("prefill", 4, 512)] {
        let seq = if quick() { seq.min(16) } else { seq };
        let q = Tensor::randn(0f32, 1.0, (batch, 32, seq, head_dim), dev).unwrap();
        let k = Tensor::randn(0f32, 1.0, (batch, 8, seq, head_dim), dev).unwrap();
        let ids: Vec<u32> = (0..batch as u32)
            .flat_map(|b| (0..seq as u32).map(move |s| 100 + 1100 * b + s))
            .collect();
        let positions = Tensor::from_vec(ids, (batch, seq), dev).unwrap();
        let case = format!("{batch}x{seq}");
        group.throughput(Throughput::Bytes(
            ((32 + 8) * batch * seq * head_dim * 4) as u64,
        ));
        group.bench_function(BenchmarkId::new(format!("apply_at_{name}"), &case), |b| {
            b.iter_custom(|n| timed(dev, n, || rotary.apply(&q, &k, &positions).unwrap()))
        });
        group.bench_function(
            BenchmarkId::new(format!("gather_rope_{name}"), &case),
            |b| {
                b.iter_custom(|n| {
                    timed(dev, n, || {
                        gather_rope(rotary.cache(), &q, &k, &positions).unwrap()
                    })
                })
            },
        );
    }
}

/// Re-rotating cached keys: k (1, 8, len, 128) bf16 moved back by 1,000 positions (`shift`, one
/// table row), and moved per token from positions `p` to `p - 1000` (`shift_at`), against a copy
/// of k (`Tensor::copy`, the memory reference).
fn shift(c: &mut Criterion, dev: &Device) {
    let head_dim = 128;
    let len = if quick() { 256 } else { 32_768 };
    let mut group = c.benchmark_group(format!("{}_shift", prefix(dev)));
    group
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    let rotary = RotaryEmbedding::new(RopeConfig::new(head_dim, 500_000.0)).unwrap();
    let k = Tensor::randn(0f32, 1.0, (1, 8, len, head_dim), dev)
        .unwrap()
        .to_dtype(DType::BF16)
        .unwrap();
    let from = Tensor::arange(1000u32, 1000 + len as u32, dev)
        .unwrap()
        .unsqueeze(0)
        .unwrap();
    let to = Tensor::arange(0u32, len as u32, dev)
        .unwrap()
        .unsqueeze(0)
        .unwrap();
    group.throughput(Throughput::Bytes((2 * 8 * len * head_dim * 2) as u64));
    group.bench_function(BenchmarkId::new("shift", len), |b| {
        b.iter_custom(|n| timed(dev, n, || rotary.shift(&k, 1000, 0).unwrap()))
    });
    group.bench_function(BenchmarkId::new("shift_at", len), |b| {
        b.iter_custom(|n| timed(dev, n, || rotary.shift(&k, &from, &to).unwrap()))
    });
    group.bench_function(BenchmarkId::new("copy", len), |b| {
        b.iter_custom(|n| timed(dev, n, || k.copy().unwrap()))
    });
    group.finish();
}

fn pe_core_positions(tokens: &Tensor) -> Tensor {
    candle_pe::padding_aware_positions(tokens, 1, 0).unwrap()
}

fn main() {
    let dev = device();
    let mut c = Criterion::default().configure_from_args();
    table(&mut c, &dev);
    decode(&mut c, &dev);
    views(&mut c, &dev);
    generic(&mut c, &dev);
    embed(&mut c, &dev);
    ids(&mut c, &dev);
    rope(&mut c, &dev);
    shift(&mut c, &dev);
    c.final_summary();
}
