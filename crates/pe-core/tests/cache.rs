//! The cache: growth without recomputation, zero-copy views, ids, and concurrent use.

use candle_core::{DType, Device, Storage, Tensor, D};
use candle_pe_core::{PeCache, PeSpec, Positions, SinusoidalEncoding, TableBackend};
use pe_testkit::{backend_tests, encoding};

fn cache(spec: PeSpec, backend: TableBackend) -> PeCache {
    PeCache::new(encoding(spec, backend))
}

/// `rows` (`ids.dims() + [width]`) with +0.0 in every row whose id is `pad`: what padding rows
/// must be.
fn zeroed_at(rows: &Tensor, ids: &Tensor, pad: u32) -> anyhow::Result<Tensor> {
    let keep = ids
        .ne(pad)?
        .unsqueeze(D::Minus1)?
        .broadcast_as(rows.shape())?;
    Ok(keep.where_cond(rows, &rows.zeros_like()?)?)
}

fn grows_without_recomputing(dev: &Device, backend: TableBackend) -> anyhow::Result<()> {
    let cache = cache(PeSpec::fairseq(64), backend);
    let plain = cache.encoding().clone();
    assert_eq!(cache.cached_rows(DType::F32, dev), 0);
    for (offset, len) in [(0, 10), (5, 5), (90, 10), (0, 50), (1000, 3), (7, 1)] {
        let got = cache.range(offset, len, DType::F32, dev)?;
        assert_eq!(got.dims(), &[len, 64]);
        assert!(cache.cached_rows(DType::F32, dev) >= offset + len);
        let fresh = plain.range(offset, len, DType::F32, dev)?;
        assert_same_bits(&got, &fresh, &format!("rows {offset}..+{len}"))?;
        // Every row ever computed is still in the table: none was computed twice.
        assert_eq!(cache.rows_generated(), cache.cached_rows(DType::F32, dev));
    }
    // Growth is geometric: a request one row past the end adds half the table.
    let before = cache.cached_rows(DType::F32, dev);
    cache.range(before, 1, DType::F32, dev)?;
    assert_eq!(cache.cached_rows(DType::F32, dev), before + before / 2);
    Ok(())
}

fn one_table_per_dtype(dev: &Device, backend: TableBackend) -> anyhow::Result<()> {
    let cache = cache(PeSpec::marian(32), backend);
    cache.range(0, 20, DType::F32, dev)?;
    cache.range(0, 40, DType::BF16, dev)?;
    let (f32_rows, bf16_rows) = (
        cache.cached_rows(DType::F32, dev),
        cache.cached_rows(DType::BF16, dev),
    );
    assert_eq!((f32_rows, bf16_rows), (20, 40));
    assert_eq!(cache.memory_bytes(), f32_rows * 32 * 4 + bf16_rows * 32 * 2);
    assert_eq!(cache.range(3, 2, DType::BF16, dev)?.dtype(), DType::BF16);
    cache.clear();
    assert_eq!(cache.memory_bytes(), 0);
    Ok(())
}

fn ids_and_padding_aware_match_uncached(dev: &Device, backend: TableBackend) -> anyhow::Result<()> {
    let cache = cache(PeSpec::fairseq(16), backend);
    let plain = cache.encoding().clone();
    let ids = Tensor::new(&[[3u32, 4, 5], [700, 2, 9]], dev)?;
    let got = cache.at(&ids, DType::F32)?;
    assert_eq!(got.dims(), &[2, 3, 16]);
    assert_same_bits(&got, &plain.at(&ids, DType::F32)?, "ids")?;
    assert!(cache.cached_rows(DType::F32, dev) >= 701);

    let tokens = Tensor::new(&[[5i64, 6, 7, 1, 1], [1, 1, 9, 10, 11]], dev)?;
    let got = cache.padding_aware(&tokens, 1, 2, DType::F32)?;
    let fresh = plain.padding_aware(&tokens, 1, 2, DType::F32)?;
    assert_same_bits(&got, &fresh, "padding-aware")?;
    assert_eq!(
        got.get(0)?.get(3)?.abs()?.sum_all()?.to_scalar::<f32>()?,
        0.0
    );
    // A padding index whose row has negative values: its rows are +0.0 all the same, cached
    // or not (a row multiplied by zero would give -0.0).
    let ids = Tensor::new(&[[3u32, 5, 700], [5, 5, 9]], dev)?;
    let want = zeroed_at(&plain.at(&ids, DType::F32)?, &ids, 5)?;
    assert_same_bits(&cache.padding_rows(&ids, 5, DType::F32)?, &want, "cached")?;
    assert_same_bits(&plain.padding_rows(&ids, 5, DType::F32)?, &want, "fresh")?;
    Ok(())
}

/// The start of a CPU tensor's storage, to tell views from copies.
fn storage_ptr(t: &Tensor) -> anyhow::Result<usize> {
    let (storage, _) = t.storage_and_layout();
    match &*storage {
        Storage::Cpu(cpu) => Ok(cpu.as_slice::<f32>()?.as_ptr() as usize),
        _ => anyhow::bail!("not a CPU tensor"),
    }
}

#[test]
fn ranges_are_zero_copy_views() -> anyhow::Result<()> {
    let dev = Device::Cpu;
    let cache = cache(PeSpec::vaswani(8), TableBackend::Cpu);
    let table = cache.range(0, 100, DType::F32, &dev)?;
    let view = cache.range(40, 10, DType::F32, &dev)?;
    assert_eq!(storage_ptr(&view)?, storage_ptr(&table)?);
    assert_eq!(view.storage_and_layout().1.start_offset(), 40 * 8);
    assert_same_bits(&view, &table.narrow(0, 40, 10)?, "a view")?;
    Ok(())
}

#[test]
fn eight_threads_reading_and_growing_agree() -> anyhow::Result<()> {
    let dev = Device::Cpu;
    let cache = cache(PeSpec::fairseq(96), TableBackend::Cpu);
    let results: Vec<Vec<(usize, usize, Tensor)>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..8)
            .map(|t| {
                let cache = cache.clone();
                let dev = dev.clone();
                s.spawn(move || {
                    (0..40)
                        .map(|i| {
                            // Interleaved growth: every thread reaches further as it goes.
                            let offset = (i * 97 + t * 331) % (200 + i * 150);
                            let len = 1 + (i + t) % 17;
                            let got = cache.range(offset, len, DType::F32, &dev).unwrap();
                            (offset, len, got)
                        })
                        .collect()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(cache.rows_generated(), cache.cached_rows(DType::F32, &dev));
    // However the table grew, every row is the row generated fresh, to the bit.
    for (offset, len, got) in results.into_iter().flatten() {
        let fresh = cache.encoding().range(offset, len, DType::F32, &dev)?;
        assert_same_bits(&got, &fresh, &format!("rows {offset}..+{len}"))?;
    }
    Ok(())
}

/// Bit-for-bit equality of two tables (values compared exactly, shapes too).
fn assert_same_bits(a: &Tensor, b: &Tensor, what: &str) -> anyhow::Result<()> {
    anyhow::ensure!(
        a.dims() == b.dims(),
        "{what}: {:?} vs {:?}",
        a.dims(),
        b.dims()
    );
    let a = a.to_dtype(DType::F64)?.flatten_all()?.to_vec1::<f64>()?;
    let b = b.to_dtype(DType::F64)?.flatten_all()?.to_vec1::<f64>()?;
    if let Some(i) = (0..a.len()).find(|&i| a[i].to_bits() != b[i].to_bits()) {
        anyhow::bail!("{what}: element {i} is {:e}, fresh {:e}", a[i], b[i]);
    }
    Ok(())
}

/// A value depends only on (spec, position, column, dtype): random sequences of ranges and ids,
/// through a cache (which grows in between) and fresh, with 1 and 8 threads, all give the bits
/// of one table built at once.
#[test]
fn values_do_not_depend_on_history_or_threads() -> anyhow::Result<()> {
    use candle_pe_core::{Rope, RopeCache, RopeConfig};
    use rand::{Rng, SeedableRng};
    let dev = Device::Cpu;
    let rope_config = RopeConfig::new(128, 500_000.0);
    for threads in [1, 8] {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()?;
        pool.install(|| -> anyhow::Result<()> {
            let mut rng = rand::rngs::StdRng::seed_from_u64(9 + threads as u64);
            // The example first: fairseq d = 512, range(0, 100), then range(0, 1000).
            let fairseq = PeCache::new(SinusoidalEncoding::new(PeSpec::fairseq(512))?);
            fairseq.range(0, 100, DType::F32, &dev)?;
            let grown = fairseq.range(0, 1000, DType::F32, &dev)?;
            let fresh = fairseq.encoding().range(0, 1000, DType::F32, &dev)?;
            assert_same_bits(&grown, &fresh, "fairseq 0..100 then 0..1000")?;
            for spec in [
                PeSpec::vaswani(63),
                PeSpec::marian(256),
                PeSpec::fairseq(96),
            ] {
                for dtype in [DType::F32, DType::F16, DType::BF16, DType::F64] {
                    let pe = SinusoidalEncoding::new(spec)?;
                    let whole = pe.range(0, 2048, dtype, &dev)?;
                    let cache = PeCache::new(pe.clone()).with_limit(1500);
                    for step in 0..25 {
                        let offset = rng.random_range(0..1900);
                        let len = rng.random_range(0..=(2048 - offset).min(300));
                        let want = whole.narrow(0, offset, len)?;
                        let what = format!("{spec:?} {dtype:?} step {step}: rows {offset}..+{len}");
                        assert_same_bits(&cache.range(offset, len, dtype, &dev)?, &want, &what)?;
                        assert_same_bits(&pe.range(offset, len, dtype, &dev)?, &want, &what)?;
                        let ids: Vec<u32> = (0..rng.random_range(0..20))
                            .map(|_| rng.random_range(0..2048))
                            .collect();
                        let ids = Tensor::new(ids.as_slice(), &dev)?;
                        let want = whole.index_select(&ids, 0)?;
                        assert_same_bits(&cache.at(&ids, dtype)?, &want, &what)?;
                        assert_same_bits(&pe.at(&ids, dtype)?, &want, &what)?;
                        // Padding rows: all zero (+0.0, whatever the row's signs) where the id
                        // is the padding index, the row's bits elsewhere.
                        let pad = rng.random_range(0..2048u32);
                        let ids = Tensor::cat(&[&ids, &Tensor::new(&[pad], &dev)?], 0)?;
                        let want = zeroed_at(&whole.index_select(&ids, 0)?, &ids, pad)?;
                        let what = format!("{what}, padding index {pad}");
                        assert_same_bits(&cache.padding_rows(&ids, pad, dtype)?, &want, &what)?;
                        assert_same_bits(&pe.padding_rows(&ids, pad, dtype)?, &want, &what)?;
                    }
                }
            }
            let rope = Rope::new(rope_config.clone())?;
            let (cos, sin) = rope.range(0, 4096, DType::F32, &dev)?;
            let cache = RopeCache::new(rope.clone()).with_limit(3000);
            for _ in 0..30 {
                let offset = rng.random_range(0..4000);
                let len = rng.random_range(0..=(4096 - offset).min(500));
                let (c, s) = cache.range(offset, len, DType::F32, &dev)?;
                let what = format!("rope rows {offset}..+{len}");
                assert_same_bits(&c, &cos.narrow(0, offset, len)?, &what)?;
                assert_same_bits(&s, &sin.narrow(0, offset, len)?, &what)?;
            }
            Ok(())
        })?;
    }
    Ok(())
}

/// The sequences of a batch embedded at an offset (which share their encoding rows) have the
/// bits of each sequence embedded alone and of the same positions given as ids, with 1 and 8
/// threads, for offsets on and off the generator's anchors.
#[test]
fn a_batch_at_an_offset_equals_each_sequence_alone() -> anyhow::Result<()> {
    use candle_pe_core::TokenPositions;
    let dev = Device::Cpu;
    for threads in [1, 8] {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()?;
        pool.install(|| -> anyhow::Result<()> {
            for spec in [PeSpec::vaswani(63), PeSpec::fairseq(96)] {
                let cache = PeCache::new(SinusoidalEncoding::new(spec)?);
                for dtype in [DType::F32, DType::BF16] {
                    let weights =
                        Tensor::randn(0f32, 1.0, (50, spec.width), &dev)?.to_dtype(dtype)?;
                    for (offset, seq) in [(0, 130), (37, 200), (1000, 64), (5, 1)] {
                        let tokens: Vec<u32> = (0..3 * seq).map(|i| (i * 7 % 50) as u32).collect();
                        let tokens = Tensor::from_vec(tokens, (3, seq), &dev)?;
                        let at = TokenPositions::Offset(offset);
                        let batch = cache.embed(&weights, &tokens, at, 2.5)?;
                        let what = format!("{spec:?} {dtype:?} offset {offset}, seq {seq}");
                        for b in 0..3 {
                            let alone = cache.embed(&weights, &tokens.narrow(0, b, 1)?, at, 2.5)?;
                            assert_same_bits(&batch.narrow(0, b, 1)?, &alone, &what)?;
                        }
                        let ids = Tensor::arange(offset as i64, (offset + seq) as i64, &dev)?
                            .broadcast_as((3, seq))?
                            .contiguous()?;
                        let by_ids = cache.embed(
                            &weights,
                            &tokens,
                            TokenPositions::Ids(&Positions::new(&ids)?),
                            2.5,
                        )?;
                        assert_same_bits(&batch, &by_ids, &what)?;
                    }
                }
            }
            Ok(())
        })?;
    }
    Ok(())
}

#[test]
fn cache_is_send_sync_clone() {
    fn assert_shareable<T: Send + Sync + Clone + 'static>() {}
    assert_shareable::<PeCache>();
    assert_shareable::<SinusoidalEncoding>();
}

/// Every empty request on a fresh cache: an empty tensor of the right shape and dtype.
fn empty_requests_on_a_fresh_cache(dev: &Device, backend: TableBackend) -> anyhow::Result<()> {
    use candle_pe_core::{Rope, RopeCache, RopeConfig, TokenPositions};
    let cache = cache(PeSpec::fairseq(6), backend);
    let t = cache.range(0, 0, DType::BF16, dev)?;
    assert_eq!((t.dims(), t.dtype()), (&[0, 6][..], DType::BF16));
    assert_eq!(cache.range(17, 0, DType::F32, dev)?.dims(), &[0, 6]);
    let none = Tensor::zeros((2, 0), DType::U32, dev)?;
    assert_eq!(cache.at(&none, DType::F32)?.dims(), &[2, 0, 6]);
    assert_eq!(
        cache.padding_aware(&none, 1, 0, DType::F32)?.dims(),
        &[2, 0, 6]
    );
    let weights = Tensor::zeros((10, 6), DType::F16, dev)?;
    let none_positions = Positions::new(&none)?;
    for positions in [
        TokenPositions::Offset(3),
        TokenPositions::Ids(&none_positions),
    ] {
        let x = cache.embed(&weights, &none, positions, 1.0)?;
        assert_eq!((x.dims(), x.dtype()), (&[2, 0, 6][..], DType::F16));
    }
    assert_eq!(
        cache.cached_rows(DType::F32, dev),
        0,
        "empty requests grow nothing"
    );
    let rope = RopeCache::new(Rope::new(RopeConfig::new(8, 10_000.0))?.with_backend(backend));
    let (cos, sin) = rope.range(0, 0, DType::F32, dev)?;
    assert_eq!((cos.dims(), sin.dims()), (&[0, 4][..], &[0, 4][..]));
    assert_eq!(rope.at(&none, DType::F32)?.1.dims(), &[2, 0, 4]);
    Ok(())
}

backend_tests!(
    empty_requests_on_a_fresh_cache,
    grows_without_recomputing,
    one_table_per_dtype,
    ids_and_padding_aware_match_uncached
);

/// The generic generator too: a row's bits depend only on its position, whether it comes in a
/// long range (anchor blocks), a short one or sparse ids (gathered per row), dense ids (blocks,
/// then a gather), or timesteps mixing integers with fractions.
#[test]
fn generic_values_do_not_depend_on_the_request() -> anyhow::Result<()> {
    use rand::{Rng, SeedableRng};
    let dev = Device::Cpu;
    let mut rng = rand::rngs::StdRng::seed_from_u64(77);
    for spec in [
        PeSpec::vaswani(63),
        PeSpec::marian(256),
        PeSpec::fairseq(96),
    ] {
        for dtype in [DType::F32, DType::F16, DType::BF16, DType::F64] {
            let pe = SinusoidalEncoding::new(spec)?.with_backend(TableBackend::Generic);
            let whole = pe.range(0, 2048, dtype, &dev)?;
            for step in 0..12 {
                let offset = rng.random_range(0..1900);
                let len = rng.random_range(0..=(2048 - offset).min(400));
                let want = whole.narrow(0, offset, len)?;
                let what = format!("{spec:?} {dtype:?} step {step}: rows {offset}..+{len}");
                assert_same_bits(&pe.range(offset, len, dtype, &dev)?, &want, &what)?;
                for (n, span) in [(rng.random_range(0..20), 2048), (300, 320)] {
                    let base = rng.random_range(0..2048 - span + 1);
                    let ids: Vec<u32> = (0..n)
                        .map(|_| (base + rng.random_range(0..span)) as u32)
                        .collect();
                    let ids = Tensor::new(ids.as_slice(), &dev)?;
                    let want = whole.index_select(&ids, 0)?;
                    assert_same_bits(&pe.at(&ids, dtype)?, &want, &what)?;
                }
                let steps: Vec<f64> = (0..40)
                    .map(|i| {
                        let p = rng.random_range(0..2048) as f64;
                        if i % 3 == 0 {
                            p + 0.25
                        } else {
                            p
                        }
                    })
                    .collect();
                let got = pe.timesteps(&Tensor::new(steps.as_slice(), &dev)?, dtype)?;
                for (r, &p) in steps.iter().enumerate() {
                    if p.fract() == 0.0 {
                        let what = format!("{what}: timestep {p}");
                        assert_same_bits(
                            &got.narrow(0, r, 1)?,
                            &whole.narrow(0, p as usize, 1)?,
                            &what,
                        )?;
                    }
                }
            }
        }
    }
    Ok(())
}

/// `range_owned` and `tables_owned` copy just the rows: storage of their own, no larger.
#[test]
fn owned_rows_copy_only_those_rows() -> anyhow::Result<()> {
    use candle_pe_core::{Rope, RopeCache, RopeConfig};
    let dev = Device::Cpu;
    let storage_len = |t: &Tensor| -> anyhow::Result<usize> {
        let (storage, layout) = t.storage_and_layout();
        anyhow::ensure!(
            layout.start_offset() == 0,
            "starts at {}",
            layout.start_offset()
        );
        match &*storage {
            Storage::Cpu(cpu) => Ok(cpu.as_slice::<f32>()?.len()),
            _ => anyhow::bail!("not a CPU tensor"),
        }
    };
    let cache = cache(PeSpec::vaswani(8), TableBackend::Cpu);
    let view = cache.range(40, 10, DType::F32, &dev)?;
    let owned = cache.range_owned(40, 10, DType::F32, &dev)?;
    assert_eq!(storage_len(&owned)?, 80);
    assert_same_bits(&owned, &view, "range_owned")?;
    // Past one copy task (64 Ki values) the rayon pool copies: the same bits in every dtype.
    let wide = PeCache::new(encoding(PeSpec::vaswani(64), TableBackend::Cpu));
    for dtype in [DType::F32, DType::F16, DType::BF16, DType::F64] {
        let view = wide.range(123, 2000, dtype, &dev)?;
        let owned = wide.range_owned(123, 2000, dtype, &dev)?;
        assert_same_bits(&owned, &view, &format!("range_owned {dtype:?}, 2,000 rows"))?;
        if dtype == DType::F32 {
            assert_eq!(storage_len(&owned)?, 2000 * 64);
        }
    }
    let rope = RopeCache::new(Rope::new(RopeConfig::new(16, 10_000.0))?);
    let (cos, sin) = rope.range(100, 7, DType::F32, &dev)?;
    let (own_cos, own_sin) = rope.range_owned(100, 7, DType::F32, &dev)?;
    assert_eq!((storage_len(&own_cos)?, storage_len(&own_sin)?), (56, 56));
    assert_same_bits(&own_cos, &cos, "tables_owned cos")?;
    assert_same_bits(&own_sin, &sin, "tables_owned sin")?;
    Ok(())
}

/// The row limit is inclusive of its last row: requests ending at the limit are served from
/// the cache, one row further they are generated and leave the cache as it was.
#[test]
fn requests_ending_at_the_limit_are_cached() -> anyhow::Result<()> {
    let dev = Device::Cpu;
    let cache = PeCache::new(encoding(PeSpec::fairseq(16), TableBackend::Cpu)).with_limit(100);
    let ids = |v: &[u32]| Tensor::new(v, &dev);
    cache.range(91, 10, DType::F32, &dev)?;
    cache.at(&ids(&[3, 100])?, DType::F32)?;
    assert_eq!(
        cache.cached_rows(DType::F32, &dev),
        0,
        "past the limit: generated"
    );
    cache.at(&ids(&[99, 0])?, DType::F32)?;
    assert_eq!(
        cache.cached_rows(DType::F32, &dev),
        100,
        "ids up to row 99: cached"
    );
    cache.clear();
    cache.range(90, 10, DType::F32, &dev)?;
    assert_eq!(
        cache.cached_rows(DType::F32, &dev),
        100,
        "rows 90..100: cached"
    );
    let cached = cache.rows_generated();
    cache.range_owned(95, 6, DType::F32, &dev)?;
    assert_eq!(
        cache.rows_generated(),
        cached,
        "rows 95..101: generated outside"
    );
    assert_eq!(cache.cached_rows(DType::F32, &dev), 100);
    Ok(())
}
