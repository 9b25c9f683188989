//! Randomized comparison with the 256-bit oracle: widths 1..2048 (odd and even), every preset
//! with tweaked bases, scales and layouts, offsets up to 2^31 - 1, every output dtype, ranges,
//! ids, padding-aware ids and timesteps, on every backend.

use candle_core::{DType, Device, Tensor};
use candle_pe_core::{PeSpec, Preset, SinusoidalEncoding, TableBackend, MAX_POSITION};
use pe_testkit::{assert_matches, backend_tests, encoding, oracle_rows};
use pe_testkit::{random_encoding, random_offset, seeded_rng};
use rand::Rng;

const DTYPES: [DType; 4] = [DType::F32, DType::F16, DType::BF16, DType::F64];

fn rows_for(len_small: usize, width: usize) -> usize {
    if width > 256 {
        len_small.min(6)
    } else {
        len_small
    }
}

fn ranges_match_oracle(dev: &Device, backend: TableBackend) -> anyhow::Result<()> {
    let mut rng = seeded_rng("ranges_match_oracle");
    let mut worst = [0f64; 4];
    for case in 0..160 {
        let pe = random_encoding(&mut rng, 2048, backend);
        let len = rows_for(rng.random_range(1..=40), pe.width());
        let offset = random_offset(&mut rng, len);
        let k = rng.random_range(0..DTYPES.len());
        let table = pe.range(offset, len, DTYPES[k], dev)?;
        assert_eq!(table.dims(), &[len, pe.width()]);
        let positions: Vec<f64> = (offset..offset + len).map(|p| p as f64).collect();
        let expected = oracle_rows(pe.spec(), &positions);
        let context = format!(
            "case {case}: {:?} offset {offset} len {len} {:?}",
            pe.spec(),
            DTYPES[k]
        );
        worst[k] = worst[k].max(assert_matches(&table, &expected, &context)?);
    }
    eprintln!(
        "largest errors f32 {:e}, f16 {:e}, bf16 {:e}, f64 {:e}",
        worst[0], worst[1], worst[2], worst[3]
    );
    Ok(())
}

fn ids_match_oracle(dev: &Device, backend: TableBackend) -> anyhow::Result<()> {
    let mut rng = seeded_rng("ids_match_oracle");
    for case in 0..80 {
        let pe = random_encoding(&mut rng, 2048, backend);
        let (batch, seq) = (
            rng.random_range(1..=3),
            rows_for(rng.random_range(1..=16), pe.width()),
        );
        let mut ids = Vec::with_capacity(batch * seq);
        for _ in 0..batch {
            // Runs of consecutive positions (as when decoding), or scattered ids.
            let start = random_offset(&mut rng, seq);
            let run = rng.random_bool(0.5);
            ids.extend((0..seq).map(|j| {
                if run {
                    start + j
                } else {
                    random_offset(&mut rng, 1)
                }
            }));
        }
        let dtype = DTYPES[rng.random_range(0..DTYPES.len())];
        let tensor = match rng.random_range(0..3) {
            0 => Tensor::from_vec(
                ids.iter().map(|&i| i as u32).collect::<Vec<_>>(),
                (batch, seq),
                dev,
            )?,
            1 => Tensor::from_vec(
                ids.iter().map(|&i| i as i64).collect::<Vec<_>>(),
                (batch, seq),
                dev,
            )?,
            _ => Tensor::from_vec(
                ids.iter().map(|&i| i as i64).collect::<Vec<_>>(),
                batch * seq,
                dev,
            )?,
        };
        let got = pe.at(&tensor, dtype)?;
        let mut shape = tensor.dims().to_vec();
        shape.push(pe.width());
        assert_eq!(got.dims(), shape.as_slice());
        let positions: Vec<f64> = ids.iter().map(|&p| p as f64).collect();
        let expected = oracle_rows(pe.spec(), &positions);
        let context = format!("case {case}: {:?} ids {ids:?} {dtype:?}", pe.spec());
        assert_matches(
            &got.reshape((batch * seq, pe.width()))?,
            &expected,
            &context,
        )?;
    }
    Ok(())
}

fn timesteps_match_oracle(dev: &Device, backend: TableBackend) -> anyhow::Result<()> {
    let mut rng = seeded_rng("timesteps_match_oracle");
    for case in 0..60 {
        let pe = random_encoding(&mut rng, 1280, backend);
        let n = rows_for(rng.random_range(1..=12), pe.width());
        let values: Vec<f64> = (0..n)
            .map(|_| match rng.random_range(0..3) {
                0 => rng.random_range(0.0..1000.0),
                1 => rng.random_range(-1000.0..0.0),
                _ => rng.random_range(0.0..2_147_483_000.0),
            })
            .collect();
        let (tensor, exact): (Tensor, Vec<f64>) = if rng.random_bool(0.5) {
            let v32: Vec<f32> = values.iter().map(|&v| v as f32).collect();
            let exact = v32.iter().map(|&v| v as f64).collect();
            (Tensor::from_vec(v32, n, dev)?, exact)
        } else {
            (Tensor::from_vec(values.clone(), n, dev)?, values)
        };
        let dtype = DTYPES[rng.random_range(0..DTYPES.len())];
        let got = pe.timesteps(&tensor, dtype)?;
        let expected = oracle_rows(pe.spec(), &exact);
        assert_matches(
            &got,
            &expected,
            &format!("case {case}: {:?} timesteps {exact:?} {dtype:?}", pe.spec()),
        )?;
    }
    Ok(())
}

fn padding_aware_matches_oracle(dev: &Device, backend: TableBackend) -> anyhow::Result<()> {
    // The worked example of docs/conventions.md.
    let tokens = Tensor::new(&[[5u32, 6, 7, 8, 1, 1], [1, 1, 9, 10, 11, 12]], dev)?;
    let positions = candle_pe_core::padding_aware_positions(&tokens, 1, 0)?;
    assert_eq!(
        positions.to_vec2::<i64>()?,
        [[2, 3, 4, 5, 1, 1], [1, 1, 2, 3, 4, 5]]
    );
    let positions = candle_pe_core::padding_aware_positions(&tokens, 1, 3)?;
    assert_eq!(
        positions.to_vec2::<i64>()?,
        [[5, 6, 7, 8, 1, 1], [1, 1, 5, 6, 7, 8]]
    );

    let mut rng = seeded_rng("padding_aware_matches_oracle");
    for case in 0..40 {
        let pe = random_encoding(&mut rng, 1024, backend);
        let pad = rng.random_range(0..3u32);
        let (batch, seq) = (
            rng.random_range(1..=3),
            rows_for(rng.random_range(1..=12), pe.width()),
        );
        let past = if rng.random_bool(0.5) {
            0
        } else {
            rng.random_range(0..100_000)
        };
        let tokens: Vec<i64> = (0..batch * seq)
            .map(|_| {
                if rng.random_bool(0.3) {
                    pad as i64
                } else {
                    rng.random_range(3..32000)
                }
            })
            .collect();
        let mut positions = Vec::new();
        for sequence in tokens.chunks(seq) {
            let mut next = pad as usize + past;
            for &t in sequence {
                positions.push((t != pad as i64).then(|| {
                    next += 1;
                    next as f64
                }));
            }
        }
        let rows = oracle_rows(
            pe.spec(),
            &positions.iter().flatten().copied().collect::<Vec<_>>(),
        );
        let mut rows = rows.into_iter();
        let expected: Vec<Vec<f64>> = positions
            .iter()
            .map(|p| match p {
                Some(_) => rows.next().unwrap(),
                None => vec![0.0; pe.width()],
            })
            .collect();
        let dtype = DTYPES[rng.random_range(0..DTYPES.len())];
        let got = pe.padding_aware(
            &Tensor::from_vec(tokens.clone(), (batch, seq), dev)?,
            pad,
            past,
            dtype,
        )?;
        assert_eq!(got.dims(), &[batch, seq, pe.width()]);
        let context = format!(
            "case {case}: {:?} pad {pad} past {past} tokens {tokens:?}",
            pe.spec()
        );
        assert_matches(
            &got.reshape((batch * seq, pe.width()))?,
            &expected,
            &context,
        )?;
    }
    Ok(())
}

/// The CPU generator and its plain twin, the generic candle-op path, agree on larger tables.
#[test]
fn cpu_and_generic_agree() -> anyhow::Result<()> {
    let mut rng = seeded_rng("cpu_and_generic_agree");
    for _ in 0..12 {
        let spec = *random_encoding(&mut rng, 1024, TableBackend::Cpu).spec();
        let cpu = SinusoidalEncoding::new(spec)?.with_backend(TableBackend::Cpu);
        let generic = SinusoidalEncoding::new(spec)?.with_backend(TableBackend::Generic);
        let len = rng.random_range(100..300);
        let offset = random_offset(&mut rng, len);
        for (dtype, tol) in [(DType::F64, 1e-12), (DType::F32, 5e-7)] {
            let a = cpu
                .range(offset, len, dtype, &Device::Cpu)?
                .to_dtype(DType::F64)?;
            let b = generic
                .range(offset, len, dtype, &Device::Cpu)?
                .to_dtype(DType::F64)?;
            let diff = (a - b)?.abs()?.max_all()?.to_scalar::<f64>()?;
            assert!(
                diff <= tol,
                "{spec:?} offset {offset} {dtype:?}: backends differ by {diff:e}"
            );
        }
    }
    Ok(())
}

/// The far end, 2^31 - 64 ..= 2^31 - 1, for every preset (several widths, including the odd
/// and the wide) and every dtype: the worst errors against the exact values.
fn far_end_every_preset_and_dtype(dev: &Device, backend: TableBackend) -> anyhow::Result<()> {
    let top = MAX_POSITION as usize - 1;
    let positions: Vec<f64> = (top - 63..=top).map(|p| p as f64).collect();
    let mut worst = [0f64; 4];
    for preset in Preset::ALL {
        for width in [8, 63, 1032] {
            let Ok(pe) = SinusoidalEncoding::new(preset.spec(width)) else {
                continue; // whisper rejects odd widths
            };
            let pe = pe.with_backend(backend);
            let expected = oracle_rows(pe.spec(), &positions);
            for (k, dtype) in DTYPES.into_iter().enumerate() {
                let table = pe.range(top - 63, 64, dtype, dev)?;
                let context = format!("{preset} width {width} {dtype:?} at 2^31 - 64 ..");
                worst[k] = worst[k].max(assert_matches(&table, &expected, &context)?);
                // The last row alone, as an id, is the same row.
                let last = pe.at(&Tensor::new(&[top as u32], dev)?, dtype)?;
                assert_matches(&last, &expected[63..], &context)?;
            }
        }
    }
    eprintln!(
        "worst errors at 2^31 - 64 ..= 2^31 - 1: f32 {:e}, f16 {:e}, bf16 {:e}, f64 {:e}",
        worst[0], worst[1], worst[2], worst[3]
    );
    Ok(())
}

/// Empty requests give empty tables of the right shape and dtype.
fn empty_requests(dev: &Device, backend: TableBackend) -> anyhow::Result<()> {
    let pe = encoding(PeSpec::fairseq(6), backend);
    for dtype in DTYPES {
        let t = pe.range(5, 0, dtype, dev)?;
        assert_eq!((t.dims(), t.dtype()), (&[0, 6][..], dtype));
    }
    for shape in [vec![0], vec![2, 0], vec![0, 3]] {
        let ids = Tensor::zeros(shape.as_slice(), DType::U32, dev)?;
        let mut want = shape.clone();
        want.push(6);
        assert_eq!(pe.at(&ids, DType::F32)?.dims(), want.as_slice());
        let ts = Tensor::zeros(shape.as_slice(), DType::F32, dev)?;
        assert_eq!(pe.timesteps(&ts, DType::BF16)?.dims(), want.as_slice());
        if shape.len() == 2 {
            assert_eq!(
                pe.padding_aware(&ids, 1, 0, DType::F32)?.dims(),
                want.as_slice()
            );
        }
    }
    Ok(())
}

backend_tests!(
    far_end_every_preset_and_dtype,
    ranges_match_oracle,
    ids_match_oracle,
    timesteps_match_oracle,
    padding_aware_matches_oracle,
    empty_requests,
);
