//! The cache: growth without recomputation, zero-copy views, ids, and concurrent use.

mod common;

use candle_core::{DType, Device, Storage, Tensor};
use pe_core::{Backend, PeCache, PeSpec, SinusoidalEncoding};

fn cache(spec: PeSpec, backend: Backend) -> PeCache {
    PeCache::new(common::encoding(spec, backend))
}

fn max_diff(a: &Tensor, b: &Tensor) -> anyhow::Result<f64> {
    let d = (a.to_dtype(DType::F64)? - b.to_dtype(DType::F64)?)?.abs()?;
    Ok(d.flatten_all()?.max(0)?.to_scalar::<f64>()?)
}

fn grows_without_recomputing(dev: &Device, backend: Backend) -> anyhow::Result<()> {
    let cache = cache(PeSpec::fairseq(64), backend);
    let plain = cache.encoding().clone();
    assert_eq!(cache.rows(DType::F32, dev), 0);
    for (offset, len) in [(0, 10), (5, 5), (90, 10), (0, 50), (1000, 3), (7, 1)] {
        let got = cache.range(offset, len, DType::F32, dev)?;
        assert_eq!(got.dims(), &[len, 64]);
        assert!(cache.rows(DType::F32, dev) >= offset + len);
        assert!(max_diff(&got, &plain.range(offset, len, DType::F32, dev)?)? <= 5e-7);
        // Every row ever computed is still in the table: none was computed twice.
        assert_eq!(cache.rows_generated(), cache.rows(DType::F32, dev));
    }
    // Growth is geometric: a request one row past the end adds half the table.
    let before = cache.rows(DType::F32, dev);
    cache.range(before, 1, DType::F32, dev)?;
    assert_eq!(cache.rows(DType::F32, dev), before + before / 2);
    Ok(())
}

fn one_table_per_dtype(dev: &Device, backend: Backend) -> anyhow::Result<()> {
    let cache = cache(PeSpec::marian(32), backend);
    cache.range(0, 20, DType::F32, dev)?;
    cache.range(0, 40, DType::BF16, dev)?;
    let (f32_rows, bf16_rows) = (cache.rows(DType::F32, dev), cache.rows(DType::BF16, dev));
    assert_eq!((f32_rows, bf16_rows), (20, 40));
    assert_eq!(cache.memory_bytes(), f32_rows * 32 * 4 + bf16_rows * 32 * 2);
    assert_eq!(cache.range(3, 2, DType::BF16, dev)?.dtype(), DType::BF16);
    cache.clear();
    assert_eq!(cache.memory_bytes(), 0);
    Ok(())
}

fn ids_and_padding_aware_match_uncached(dev: &Device, backend: Backend) -> anyhow::Result<()> {
    let cache = cache(PeSpec::fairseq(16), backend);
    let plain = cache.encoding().clone();
    let ids = Tensor::new(&[[3u32, 4, 5], [700, 2, 9]], dev)?;
    let got = cache.ids(&ids, DType::F32)?;
    assert_eq!(got.dims(), &[2, 3, 16]);
    assert!(max_diff(&got, &plain.ids(&ids, DType::F32)?)? <= 5e-7);
    assert!(cache.rows(DType::F32, dev) >= 701);

    let tokens = Tensor::new(&[[5i64, 6, 7, 1, 1], [1, 1, 9, 10, 11]], dev)?;
    let got = cache.padding_aware(&tokens, 1, 2, DType::F32)?;
    assert!(max_diff(&got, &plain.padding_aware(&tokens, 1, 2, DType::F32)?)? <= 5e-7);
    assert_eq!(
        got.get(0)?.get(3)?.abs()?.sum_all()?.to_scalar::<f32>()?,
        0.0
    );
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
    let cache = cache(PeSpec::vaswani(8), Backend::Cpu);
    let table = cache.table(100, DType::F32, &dev)?;
    let view = cache.range(40, 10, DType::F32, &dev)?;
    assert_eq!(storage_ptr(&view)?, storage_ptr(&table)?);
    assert_eq!(view.storage_and_layout().1.start_offset(), 40 * 8);
    assert!(max_diff(&view, &table.narrow(0, 40, 10)?)? == 0.0);
    Ok(())
}

#[test]
fn eight_threads_reading_and_growing_agree() -> anyhow::Result<()> {
    let dev = Device::Cpu;
    let cache = cache(PeSpec::fairseq(96), Backend::Cpu);
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
    let table = cache.table(1, DType::F32, &dev)?;
    assert_eq!(cache.rows_generated(), table.dim(0)?);
    for (offset, len, got) in results.into_iter().flatten() {
        assert_eq!(
            max_diff(&got, &table.narrow(0, offset, len)?)?,
            0.0,
            "rows {offset}..+{len}"
        );
    }
    Ok(())
}

#[test]
fn cache_is_send_sync_clone() {
    fn assert_shareable<T: Send + Sync + Clone + 'static>() {}
    assert_shareable::<PeCache>();
    assert_shareable::<SinusoidalEncoding>();
}

backend_tests!(
    grows_without_recomputing,
    one_table_per_dtype,
    ids_and_padding_aware_match_uncached
);
