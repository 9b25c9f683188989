//! Rotary tables against the exact oracle written from the published formulas (HF
//! `modeling_rope_utils`) in 256-bit arithmetic, for every rope type, random head dims, bases
//! and positions up to 2^31 - 1, on every backend; the cache. (Reading configs is tested in
//! pe-formats.)

use candle_core::{DType, Device, Tensor};
use candle_pe_core::At;
use candle_pe_core::{Dynamic, LinearScaling, Llama3, Longrope, NtkAlpha, Proportional, Yarn};
use candle_pe_core::{
    MropeSlots, Rope, RopeCache, RopeConfig, RopeType, TableBackend, MAX_POSITION,
};
use pe_testkit::{backend_tests, random_rope_config, to_f64, tolerance, Big, BigFloat};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// `w_i` of every pair for a sequence of `seq_len` positions, exactly, from the formulas.
fn oracle_frequencies(big: &mut Big, c: &RopeConfig, seq_len: usize) -> Vec<BigFloat> {
    let dim = match c.rope_type {
        // proportional: the exponents and the table are the whole head's.
        RopeType::Proportional(_) => c.head_dim as f64,
        _ => ((c.head_dim as f64) * c.partial_rotary_factor).floor(),
    };
    let theta = |big: &mut Big, base: &BigFloat, i: usize| {
        big.pow(base, &Big::ratio(2.0 * i as f64, dim).neg())
    };
    let base = Big::num(c.rope_theta);
    let n = dim as usize / 2;
    (0..n)
        .map(|i| match &c.rope_type {
            RopeType::Default => theta(big, &base, i),
            RopeType::Linear(LinearScaling { factor }) => {
                Big::div(&theta(big, &base, i), &Big::num(*factor))
            }
            RopeType::Dynamic(Dynamic { factor }) => {
                let m = c.max_position_embeddings.unwrap() as f64;
                let l = (seq_len as f64).max(m);
                // base * (factor l / m - (factor - 1))^(dim / (dim - 2))
                let growth = Big::sub(
                    &Big::div(&Big::mul(&Big::num(*factor), &Big::num(l)), &Big::num(m)),
                    &Big::num(factor - 1.0),
                );
                let grown = Big::mul(&base, &big.pow(&growth, &Big::ratio(dim, dim - 2.0)));
                theta(big, &grown, i)
            }
            RopeType::NtkAlpha(NtkAlpha { alpha }) => {
                // HunYuan: base * alpha^(dim / (dim - 2)), whatever the length.
                let grown = Big::mul(
                    &base,
                    &big.pow(&Big::num(*alpha), &Big::ratio(dim, dim - 2.0)),
                );
                theta(big, &grown, i)
            }
            RopeType::Llama3(Llama3 {
                factor,
                low_freq_factor: lo,
                high_freq_factor: hi,
                original_max_position_embeddings: m,
            }) => {
                let w = theta(big, &base, i);
                let two_pi = Big::mul(&big.pi(), &Big::num(2.0));
                let wavelen = Big::div(&two_pi, &w);
                let m = *m as f64;
                let wl = to_f64(&wavelen);
                if wl < m / hi {
                    w
                } else if wl > m / lo {
                    Big::div(&w, &Big::num(*factor))
                } else {
                    let s = Big::div(
                        &Big::sub(&Big::div(&Big::num(m), &wavelen), &Big::num(*lo)),
                        &Big::num(hi - lo),
                    );
                    let one_minus = Big::sub(&Big::num(1.0), &s);
                    let slow = Big::div(&Big::mul(&one_minus, &w), &Big::num(*factor));
                    Big::add(&slow, &Big::mul(&s, &w))
                }
            }
            RopeType::Yarn(y) => {
                let m = y
                    .original_max_position_embeddings
                    .or(c.max_position_embeddings)
                    .unwrap() as f64;
                let correction = |rot: f64| {
                    dim * (m / (rot * 2.0 * std::f64::consts::PI)).ln() / (2.0 * c.rope_theta.ln())
                };
                let (low, high) = (correction(y.beta_fast), correction(y.beta_slow));
                let (low, high) = if y.truncate {
                    (low.floor(), high.ceil())
                } else {
                    (low, high)
                };
                let low = low.max(0.0);
                let mut high = high.min(dim - 1.0);
                if low == high {
                    high += 0.001;
                }
                let ramp = Big::div(&Big::num(i as f64 - low), &Big::num(high - low));
                let ramp = if ramp.is_negative() {
                    Big::num(0.0)
                } else if to_f64(&ramp) > 1.0 {
                    Big::num(1.0)
                } else {
                    ramp
                };
                let w = theta(big, &base, i);
                let interpolated = Big::mul(&Big::div(&w, &Big::num(y.factor)), &ramp);
                Big::add(
                    &interpolated,
                    &Big::mul(&w, &Big::sub(&Big::num(1.0), &ramp)),
                )
            }
            RopeType::Longrope(l) => {
                // transformers' rule: the long factors once the sequence outgrows L0.
                let original = l
                    .original_max_position_embeddings
                    .or(c.max_position_embeddings)
                    .unwrap();
                let ext = if seq_len > original {
                    &l.long_factor
                } else {
                    &l.short_factor
                };
                Big::div(&theta(big, &base, i), &Big::num(ext[i]))
            }
            RopeType::Proportional(Proportional { factor }) => {
                let angles = (c.partial_rotary_factor * dim / 2.0).floor() as usize;
                if i < angles {
                    Big::div(&theta(big, &base, i), &Big::num(*factor))
                } else {
                    Big::num(0.0)
                }
            }
        })
        .collect()
}

/// YaRN's attention factor from the formulas; 1 otherwise.
fn oracle_attention(c: &RopeConfig) -> f64 {
    let get_mscale = |s: f64, m: f64| {
        if s <= 1.0 {
            1.0
        } else {
            0.1 * m * s.ln() + 1.0
        }
    };
    match &c.rope_type {
        RopeType::Yarn(y) => match (y.attention_factor, y.mscale, y.mscale_all_dim) {
            (Some(a), _, _) => a,
            (None, Some(ms), Some(all)) => get_mscale(y.factor, ms) / get_mscale(y.factor, all),
            _ => get_mscale(y.factor, 1.0),
        },
        RopeType::Longrope(l) => {
            let original = l
                .original_max_position_embeddings
                .or(c.max_position_embeddings)
                .unwrap() as f64;
            let f = l
                .factor
                .unwrap_or_else(|| c.max_position_embeddings.unwrap() as f64 / original);
            match l.attention_factor {
                Some(a) => a,
                None if f <= 1.0 => 1.0,
                None => (1.0 + f.ln() / original.ln()).sqrt(),
            }
        }
        _ => 1.0,
    }
}

/// Compares `(rows, h)` cos and sin tables with the oracle at `positions`.
fn assert_tables(
    c: &RopeConfig,
    cos: &Tensor,
    sin: &Tensor,
    positions: &[usize],
    seq_len: usize,
    what: &str,
) -> anyhow::Result<()> {
    let dtype = cos.dtype();
    let h = c.rotary_dim() / 2;
    let m = oracle_attention(c);
    let mut big = Big::new();
    let freqs = oracle_frequencies(&mut big, c, seq_len);
    let cos = cos
        .to_dtype(DType::F64)?
        .to_device(&Device::Cpu)?
        .flatten_all()?
        .to_vec1::<f64>()?;
    let sin = sin
        .to_dtype(DType::F64)?
        .to_device(&Device::Cpu)?
        .flatten_all()?
        .to_vec1::<f64>()?;
    assert_eq!(cos.len(), positions.len() * h, "{what}: cos size");
    for (r, &p) in positions.iter().enumerate() {
        for i in 0..h {
            let (s, c_) = big.sin_cos(p as f64, &freqs[i]);
            for (name, got, exact) in [
                ("cos", cos[r * h + i], m * c_),
                ("sin", sin[r * h + i], m * s),
            ] {
                let tol = tolerance(dtype, exact) * m.max(1.0);
                assert!(
                    (got - exact).abs() <= tol,
                    "{what}: {name}[p={p}, i={i}] = {got}, exact {exact} ({dtype:?})"
                );
            }
        }
    }
    Ok(())
}

/// M-RoPE tables from (3, batch, seq) ids, each slot against the oracle at the position of
/// the row its section gives it; three equal rows give the 1-D tables bit for bit.
fn mrope_matches_oracle(dev: &Device, backend: TableBackend) -> anyhow::Result<()> {
    let mut rng = StdRng::seed_from_u64(33);
    for case in 0..24 {
        let mut c = random_rope_config(&mut rng);
        let h = c.rotary_dim() / 2;
        let interleaved = rng.random_bool(0.5);
        // Three counts adding up to h (the interleaved rule only reads the last two).
        let a = rng.random_range(0..=h);
        let b = rng.random_range(0..=h - a);
        let section = if interleaved {
            let (s1, s2) = (a.min(h / 3), b.min(h / 3));
            vec![h - s1 - s2, s1, s2]
        } else {
            vec![a, b, h - a - b]
        };
        c.mrope_section = Some(section.clone());
        c.mrope_slots = if interleaved {
            MropeSlots::Alternating
        } else {
            MropeSlots::Sections
        };
        let rope = Rope::new(c.clone())?.with_backend(backend);
        let (batch, seq) = (rng.random_range(1..=2), rng.random_range(1..=6));
        let ids: Vec<u32> = (0..3 * batch * seq)
            .map(|_| match rng.random_range(0..3) {
                0 => rng.random_range(0..5000),
                1 => MAX_POSITION as u32 - 1 - rng.random_range(0..100),
                _ => rng.random_range(0..MAX_POSITION as u32),
            })
            .collect();
        let tensor = Tensor::from_vec(ids.clone(), (3, batch, seq), dev)?;
        let dtype = [DType::F32, DType::F64, DType::BF16][rng.random_range(0..3)];
        let (cos, sin) = rope.at(At::mrope(&tensor), dtype)?;
        assert_eq!(cos.dims(), &[batch, seq, h]);
        let seq_len = *ids.iter().max().unwrap() as usize + 1;
        let cos = cos
            .to_dtype(DType::F64)?
            .to_device(&Device::Cpu)?
            .flatten_all()?
            .to_vec1::<f64>()?;
        let sin = sin
            .to_dtype(DType::F64)?
            .to_device(&Device::Cpu)?
            .flatten_all()?
            .to_vec1::<f64>()?;
        let mut big = Big::new();
        let freqs = oracle_frequencies(&mut big, &c, seq_len);
        let m = oracle_attention(&c);
        for r in 0..batch * seq {
            for k in 0..h {
                let axis = if interleaved {
                    match k % 3 {
                        1 if k < 3 * section[1] => 1,
                        2 if k < 3 * section[2] => 2,
                        _ => 0,
                    }
                } else if k < section[0] {
                    0
                } else if k < section[0] + section[1] {
                    1
                } else {
                    2
                };
                let p = ids[axis * batch * seq + r] as f64;
                let (s, co) = big.sin_cos(p, &freqs[k]);
                for (name, got, exact) in [
                    ("cos", cos[r * h + k], m * co),
                    ("sin", sin[r * h + k], m * s),
                ] {
                    let tol = tolerance(dtype, exact) * m.max(1.0);
                    assert!(
                        (got - exact).abs() <= tol,
                        "case {case}: {name}[row {r}, k {k}, axis {axis}, p {p}] = {got}, \
                         exact {exact}: {c:?}"
                    );
                }
            }
        }
        // Text only: the 1-D tables, bit for bit.
        let row = tensor.get(0)?;
        let text = Tensor::stack(&[&row, &row, &row], 0)?;
        let (c3, s3) = rope.at(At::mrope(&text), dtype)?;
        let (c1, s1) = rope.at(&row, dtype)?;
        let bits = |t: &Tensor| -> anyhow::Result<Vec<f64>> {
            Ok(t.to_dtype(DType::F64)?.flatten_all()?.to_vec1::<f64>()?)
        };
        assert_eq!(bits(&c3)?, bits(&c1)?, "case {case}: text-only cos");
        assert_eq!(bits(&s3)?, bits(&s1)?, "case {case}: text-only sin");
    }
    // Empty ids and wrong shapes.
    let rope = Rope::new(RopeConfig {
        mrope_section: Some(vec![2, 3, 3]),
        ..RopeConfig::new(16, 10_000.0)
    })?
    .with_backend(backend);
    let empty = Tensor::zeros((3, 2, 0), DType::U32, dev)?;
    assert_eq!(rope.at(At::mrope(&empty), DType::F32)?.0.dims(), &[2, 0, 8]);
    for dims in [&[2usize, 4][..], &[4], &[3, 1, 1, 4]] {
        let bad = Tensor::zeros(dims, DType::U32, dev)?;
        let err = rope
            .at(At::mrope(&bad), DType::F32)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("positions must have shape (3, seq) or (3, batch, seq)"),
            "{dims:?}: {err}"
        );
    }
    let plain = Rope::new(RopeConfig::new(16, 10_000.0))?;
    let err = plain
        .at(At::mrope(&empty), DType::F32)
        .unwrap_err()
        .to_string();
    assert!(err.contains("mrope_section"), "{err}");
    Ok(())
}

fn ranges_match_oracle(dev: &Device, backend: TableBackend) -> anyhow::Result<()> {
    let mut rng = StdRng::seed_from_u64(31);
    for case in 0..80 {
        let c = random_rope_config(&mut rng);
        let rope = Rope::new(c.clone())?.with_backend(backend);
        let len = rng.random_range(1..=12);
        let top = MAX_POSITION as usize - len;
        let offset = match rng.random_range(0..4) {
            0 => rng.random_range(0..1000),
            1 => rng.random_range(0..200_000),
            2 => top,
            _ => rng.random_range(0..=top),
        };
        let dtype = [DType::F32, DType::F16, DType::BF16, DType::F64][rng.random_range(0..4)];
        let (cos, sin) = rope.range(offset, len, dtype, dev)?;
        assert!(cos.is_contiguous() && sin.is_contiguous());
        let positions: Vec<usize> = (offset..offset + len).collect();
        assert_tables(
            &c,
            &cos,
            &sin,
            &positions,
            offset + len,
            &format!("case {case}: {c:?} offset {offset}"),
        )?;
    }
    Ok(())
}

fn ids_match_oracle(dev: &Device, backend: TableBackend) -> anyhow::Result<()> {
    let mut rng = StdRng::seed_from_u64(32);
    for case in 0..30 {
        let c = random_rope_config(&mut rng);
        let rope = Rope::new(c.clone())?.with_backend(backend);
        let (batch, seq) = (rng.random_range(1..=3), rng.random_range(1..=8));
        let ids: Vec<u32> = (0..batch * seq)
            .map(|_| rng.random_range(0..MAX_POSITION as u32))
            .collect();
        let tensor = Tensor::from_vec(ids.clone(), (batch, seq), dev)?;
        let (cos, sin) = rope.at(&tensor, DType::F32)?;
        assert_eq!(cos.dims(), &[batch, seq, rope.half_dim()]);
        let positions: Vec<usize> = ids.iter().map(|&p| p as usize).collect();
        let seq_len = positions.iter().max().unwrap() + 1;
        assert_tables(
            &c,
            &cos,
            &sin,
            &positions,
            seq_len,
            &format!("case {case}: {c:?}"),
        )?;
    }
    Ok(())
}

/// A longrope of 8 pairs: short factors up to 64 positions, long ones past.
fn longrope_64() -> RopeType {
    RopeType::Longrope(Longrope {
        short_factor: vec![1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5],
        long_factor: vec![1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0],
        factor: Some(4.0),
        original_max_position_embeddings: Some(64),
        attention_factor: None,
        short_mscale: None,
        long_mscale: None,
    })
}

fn cache_serves_views(dev: &Device, backend: TableBackend) -> anyhow::Result<()> {
    for rope_type in [
        RopeType::Default,
        RopeType::Dynamic(Dynamic { factor: 2.0 }),
        // Short factors up to 64 positions, long ones past: cached up to 64 only.
        longrope_64(),
    ] {
        let config = RopeConfig {
            max_position_embeddings: Some(64),
            ..RopeConfig::new(16, 10_000.0).with_rope_type(rope_type.clone())
        };
        let rope = Rope::new(config)?.with_backend(backend);
        let cache = RopeCache::new(rope.clone());
        for (offset, len) in [(0, 10), (5, 20), (40, 24), (3, 1), (9, 0)] {
            let (cos, sin) = cache.range(offset, len, DType::F32, dev)?;
            let (want_cos, want_sin) = rope.range(offset, len, DType::F32, dev)?;
            assert!(
                cos.is_contiguous() && sin.is_contiguous(),
                "views candle's rope accepts"
            );
            for (a, b) in [(cos, want_cos), (sin, want_sin)] {
                assert_eq!(a.dims(), &[len, 8]);
                let a = a.flatten_all()?.to_vec1::<f32>()?;
                assert_eq!(
                    a,
                    b.flatten_all()?.to_vec1::<f32>()?,
                    "{rope_type:?} {offset}+{len}"
                );
            }
        }
        assert_eq!(
            cache.memory_bytes(),
            cache.cached_rows(DType::F32, dev) * 2 * 8 * 4
        );
        // Past 64 rows: cached for the default type; for dynamic NTK and longrope the
        // frequencies change with the length, so the rows are generated, not cached.
        let (cos, _) = cache.range(100, 4, DType::F32, dev)?;
        let (want, _) = rope.range(100, 4, DType::F32, dev)?;
        assert_eq!(cos.to_vec2::<f32>()?, want.to_vec2::<f32>()?);
        if rope.fixed_up_to().is_some() {
            assert!(cache.cached_rows(DType::F32, dev) <= 64);
        } else {
            assert!(cache.cached_rows(DType::F32, dev) >= 104);
        }
        // Longrope's long factors serve every sequence past 64: their rows are cached apart.
        let longrope = matches!(rope_type, RopeType::Longrope(_));
        let long_rows = cache.cached_long_rows(DType::F32, dev);
        assert_eq!(
            long_rows >= 104,
            longrope,
            "{rope_type:?}: {long_rows} long rows"
        );
        // A smaller limit than the original context: ranges within it keep the short factors.
        let small = RopeCache::new(rope.clone()).with_limit(16);
        for (offset, len) in [(30, 4), (60, 4), (61, 4), (100, 4), (10, 0)] {
            let (cos, sin) = small.range(offset, len, DType::F32, dev)?;
            let (want_cos, want_sin) = rope.range(offset, len, DType::F32, dev)?;
            for (a, b) in [(cos, want_cos), (sin, want_sin)] {
                assert_eq!(
                    a.flatten_all()?.to_vec1::<f32>()?,
                    b.flatten_all()?.to_vec1::<f32>()?,
                    "{rope_type:?} {offset}+{len}, limit 16"
                );
            }
        }
        // Any position, even past the cache's limit.
        let (far, _) = cache.range(MAX_POSITION as usize - 3, 3, DType::F32, dev)?;
        assert_eq!(far.dims(), &[3, 8]);
        let ids = Tensor::zeros((2, 0), DType::U32, dev)?;
        assert_eq!(cache.at(&ids, DType::F32)?.0.dims(), &[2, 0, 8]);
    }
    Ok(())
}

#[test]
fn nonsense_parameters_are_errors() {
    let base = RopeConfig::new(64, 10_000.0);
    let cases = [
        (
            RopeConfig {
                rope_theta: -1.0,
                ..base.clone()
            },
            "rope_theta",
        ),
        (
            RopeConfig {
                head_dim: 7,
                ..base.clone()
            },
            "rotary dim",
        ),
        (
            RopeConfig {
                partial_rotary_factor: 0.0,
                ..base.clone()
            },
            "partial_rotary_factor",
        ),
        (
            base.clone()
                .with_rope_type(RopeType::Linear(LinearScaling { factor: 0.0 })),
            "factor",
        ),
        (
            base.clone()
                .with_rope_type(RopeType::Linear(LinearScaling { factor: 1e-300 })),
            "2^40",
        ),
        (
            base.clone().with_rope_type(RopeType::Llama3(Llama3 {
                factor: 8.0,
                low_freq_factor: 4.0,
                high_freq_factor: 1.0,
                original_max_position_embeddings: 8192,
            })),
            "high_freq_factor",
        ),
        (
            base.clone().with_rope_type(RopeType::Yarn(Yarn {
                beta_fast: 1.0,
                beta_slow: 32.0,
                ..Yarn::new(4.0, 4096)
            })),
            "beta_fast",
        ),
        (
            base.clone()
                .with_rope_type(RopeType::Dynamic(Dynamic { factor: 2.0 })),
            "max_position_embeddings",
        ),
        (
            base.clone()
                .with_rope_type(RopeType::Yarn(Yarn::new(4.0, 0))),
            "original_max_position_embeddings",
        ),
    ];
    for (config, needle) in cases {
        let err = Rope::new(config.clone()).unwrap_err().to_string();
        assert!(err.contains(needle), "{config:?}: {err}");
    }
}

/// Past the lengths that share the fixed frequencies, each length's tables are those of a fresh
/// rope asked for that length alone, whatever lengths came before (the rope keeps the last
/// generator it made for a longer sequence and reuses it only for a length with its
/// frequencies): dynamic NTK's differ at every length, longrope's long factors are one.
fn grown_tables_follow_each_length(dev: &Device, backend: TableBackend) -> anyhow::Result<()> {
    for rope_type in [RopeType::Dynamic(Dynamic { factor: 2.0 }), longrope_64()] {
        let config = RopeConfig {
            max_position_embeddings: Some(64),
            ..RopeConfig::new(16, 10_000.0).with_rope_type(rope_type.clone())
        };
        let rope = Rope::new(config.clone())?.with_backend(backend);
        let tables = |rope: &Rope, len: usize| -> anyhow::Result<Vec<Vec<f32>>> {
            let ids = Tensor::new(&[0u32, 5, 63, len as u32 - 1], dev)?;
            let (cos, sin) = rope.at(At::positions(&ids).with_tracked_len(len), DType::F32)?;
            Ok(vec![
                cos.flatten_all()?.to_vec1()?,
                sin.flatten_all()?.to_vec1()?,
            ])
        };
        let mut seen = Vec::new();
        for len in [100, 200, 100, 65, 64, 300, 65, 200] {
            let fresh = Rope::new(config.clone())?.with_backend(backend);
            let got = tables(&rope, len)?;
            assert_eq!(got, tables(&fresh, len)?, "{rope_type:?} at {len}");
            seen.push((len, got));
        }
        // Rows 0, 5 and 63 at lengths 100 and 200: one spectrum for longrope, two for dynamic;
        // and not the fixed one of 64.
        let at = |len| &seen.iter().find(|(l, _)| *l == len).expect("asked").1;
        let longrope = matches!(rope_type, RopeType::Longrope(_));
        let first_rows = |t: &Vec<Vec<f32>>| t[0][..24].to_vec();
        assert_eq!(
            first_rows(at(100)) == first_rows(at(200)),
            longrope,
            "{rope_type:?}"
        );
        assert_ne!(first_rows(at(100)), first_rows(at(64)), "{rope_type:?}");
    }
    Ok(())
}

backend_tests!(
    ranges_match_oracle,
    ids_match_oracle,
    mrope_matches_oracle,
    cache_serves_views,
    grown_tables_follow_each_length
);

/// `at_shift` takes each side's frequencies from its largest position, as `at` does:
/// `at_shift_with_len` at those lengths, bit for bit; and longrope's long factors on the far
/// side, not the short ones of length 0.
#[test]
fn at_shift_takes_each_sides_spectrum() -> anyhow::Result<()> {
    let config = RopeConfig {
        max_position_embeddings: Some(64),
        ..RopeConfig::new(16, 10_000.0).with_rope_type(longrope_64())
    };
    let rope = Rope::new(config)?;
    let dev = Device::Cpu;
    let from = Tensor::new(&[3u32, 10, 40], &dev)?;
    let to = Tensor::new(&[100u32, 2000, 41], &dev)?;
    let bits = |(cos, sin): (Tensor, Tensor)| -> anyhow::Result<Vec<u64>> {
        let cat = Tensor::cat(&[cos, sin], 0)?.flatten_all()?;
        Ok(cat.to_vec1::<f64>()?.iter().map(|v| v.to_bits()).collect())
    };
    let plain = bits(rope.at_shift(&from, &to, DType::F64)?)?;
    let lens = bits(rope.at_shift(
        At::positions(&from).with_tracked_len(41),
        At::positions(&to).with_tracked_len(2001),
        DType::F64,
    )?)?;
    let short = bits(rope.at_shift(
        At::positions(&from).with_tracked_len(0),
        At::positions(&to).with_tracked_len(0),
        DType::F64,
    )?)?;
    assert_eq!(plain, lens);
    assert_ne!(plain, short);
    Ok(())
}

/// A rotated width given directly comes back whole, for every head that is a multiple of 16 up
/// to 1,024 and every width that is a multiple of 8, including the 83 where the plain ratio
/// `r / h` times `h` rounds down to `r - 1` (120 of 176 among them). Proportional rope, which
/// reads the factor as its rotated pairs, gets `r / 2` of them.
#[test]
fn a_rotary_dim_given_directly_comes_back_whole() -> anyhow::Result<()> {
    let mut short_by_the_ratio = 0;
    for head in (16..=1024).step_by(16) {
        for r in (8..=head).step_by(8) {
            let config = RopeConfig::new(head, 10000.0).with_rotary_dim(r);
            assert_eq!(config.rotary_dim(), r, "{r} of {head}");
            assert_eq!(Rope::new(config)?.half_dim(), r / 2, "{r} of {head}");
            let proportional = RopeConfig::new(head, 10000.0)
                .with_rope_type(RopeType::Proportional(Proportional { factor: 1.0 }))
                .with_rotary_dim(r);
            let factor = proportional.partial_rotary_factor;
            assert_eq!((factor * head as f64 / 2.0).floor() as usize, r / 2);
            Rope::new(proportional)?;
            if (head as f64 * (r as f64 / head as f64)) as usize != r {
                short_by_the_ratio += 1;
            }
        }
    }
    assert_eq!(short_by_the_ratio, 83);
    let odd = Rope::new(RopeConfig::new(176, 10000.0).with_rotary_dim(119)).unwrap_err();
    assert!(odd.to_string().contains("119"), "{odd}");
    for wrong in [0, 177] {
        let err = Rope::new(RopeConfig::new(176, 10000.0).with_rotary_dim(wrong)).unwrap_err();
        assert!(err.to_string().contains("partial_rotary_factor"), "{err}");
    }
    Ok(())
}
