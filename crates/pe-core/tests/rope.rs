//! Rotary tables against a float64 oracle written from the published formulas (HF
//! `modeling_rope_utils`), for every variant, random head dims, bases and positions up to
//! 2^31 - 1, on every backend; HF config parsing; the cache.

mod common;

use std::f64::consts::PI;

use candle_core::{DType, Device, Tensor};
use common::{exact_sin_cos, tolerance};
use pe_core::{Backend, Rope, RopeCache, RopeConfig, RopeScaling, MAX_POSITION};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// `w_i` of pair `i` for a sequence of `seq_len` positions, straight from the formulas.
fn oracle_frequency(c: &RopeConfig, i: usize, seq_len: usize) -> f64 {
    let dim = ((c.head_dim as f64) * c.partial_rotary_factor).floor();
    let theta = |base: f64| 1.0 / base.powf(2.0 * i as f64 / dim);
    match c.scaling {
        RopeScaling::Default => theta(c.base),
        RopeScaling::Linear { factor } => theta(c.base) / factor,
        RopeScaling::Dynamic {
            factor,
            original_max_positions: m,
        } => {
            let l = seq_len.max(m) as f64;
            theta(c.base * ((factor * l / m as f64) - (factor - 1.0)).powf(dim / (dim - 2.0)))
        }
        RopeScaling::Llama3 {
            factor,
            low_freq_factor: lo,
            high_freq_factor: hi,
            original_max_positions: m,
        } => {
            let w = theta(c.base);
            let wavelen = 2.0 * PI / w;
            let m = m as f64;
            if wavelen < m / hi {
                w
            } else if wavelen > m / lo {
                w / factor
            } else {
                let s = (m / wavelen - lo) / (hi - lo);
                (1.0 - s) * w / factor + s * w
            }
        }
        RopeScaling::Yarn {
            factor,
            original_max_positions: m,
            beta_fast,
            beta_slow,
            ..
        } => {
            let correction =
                |rot: f64| dim * (m as f64 / (rot * 2.0 * PI)).ln() / (2.0 * c.base.ln());
            let low = correction(beta_fast).floor().max(0.0);
            let mut high = correction(beta_slow).ceil().min(dim - 1.0);
            if low == high {
                high += 0.001;
            }
            let ramp = ((i as f64 - low) / (high - low)).clamp(0.0, 1.0);
            let extrapolation_factor = 1.0 - ramp;
            let w = theta(c.base);
            (w / factor) * (1.0 - extrapolation_factor) + w * extrapolation_factor
        }
    }
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
    match c.scaling {
        RopeScaling::Yarn {
            factor,
            attention_factor: Some(a),
            ..
        } => {
            let _ = factor;
            a
        }
        RopeScaling::Yarn {
            factor,
            mscale: Some(ms),
            mscale_all_dim: Some(all),
            ..
        } => get_mscale(factor, ms) / get_mscale(factor, all),
        RopeScaling::Yarn { factor, .. } => get_mscale(factor, 1.0),
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
    let h = ((c.head_dim as f64 * c.partial_rotary_factor) as usize) / 2;
    let m = oracle_attention(c);
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
            let (s, c_) = exact_sin_cos(p as f64, oracle_frequency(c, i, seq_len));
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

fn random_config(rng: &mut StdRng) -> RopeConfig {
    let head_dim = 2 * rng.random_range(1..=128);
    let base = [
        10_000.0,
        500_000.0,
        1_000_000.0,
        rng.random_range(10_000.0..1_000_000.0),
    ][rng.random_range(0..4)];
    let original = [2048, 4096, 8192][rng.random_range(0..3)];
    let factor = rng.random_range(1.5..40.0);
    let scaling = match rng.random_range(0..5) {
        0 => RopeScaling::Default,
        1 => RopeScaling::Linear { factor },
        2 => RopeScaling::Dynamic {
            factor,
            original_max_positions: original,
        },
        3 => RopeScaling::Llama3 {
            factor,
            low_freq_factor: 1.0,
            high_freq_factor: 4.0,
            original_max_positions: original,
        },
        _ => RopeScaling::Yarn {
            factor,
            original_max_positions: original,
            beta_fast: 32.0,
            beta_slow: 1.0,
            attention_factor: None,
            mscale: rng.random_bool(0.5).then_some(1.0),
            mscale_all_dim: rng.random_bool(0.5).then_some(0.707),
        },
    };
    let mut c = RopeConfig::new(head_dim, base).with_scaling(scaling);
    if rng.random_bool(0.2) && head_dim >= 8 {
        // phi-style partial rotary; keep the rotated width even.
        c.partial_rotary_factor = 0.5;
        if c.rotary_dim() % 2 == 1
            || matches!(c.scaling, RopeScaling::Dynamic { .. }) && c.rotary_dim() <= 2
        {
            c.partial_rotary_factor = 1.0;
        }
    }
    if matches!(c.scaling, RopeScaling::Dynamic { .. }) && c.rotary_dim() <= 2 {
        c.head_dim = 4;
    }
    c
}

fn ranges_match_oracle(dev: &Device, backend: Backend) -> anyhow::Result<()> {
    let mut rng = StdRng::seed_from_u64(31);
    for case in 0..80 {
        let c = random_config(&mut rng);
        let rope = Rope::new(c)?.with_backend(backend);
        let len = rng.random_range(1..=12);
        let top = MAX_POSITION as usize - len;
        let offset = match rng.random_range(0..4) {
            0 => rng.random_range(0..1000),
            1 => rng.random_range(0..200_000),
            2 => top,
            _ => rng.random_range(0..=top),
        };
        let dtype = [DType::F32, DType::F16, DType::BF16, DType::F64][rng.random_range(0..4)];
        let (cos, sin) = rope.tables(offset, len, dtype, dev)?;
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

fn ids_match_oracle(dev: &Device, backend: Backend) -> anyhow::Result<()> {
    let mut rng = StdRng::seed_from_u64(32);
    for case in 0..30 {
        let c = random_config(&mut rng);
        let rope = Rope::new(c)?.with_backend(backend);
        let (batch, seq) = (rng.random_range(1..=3), rng.random_range(1..=8));
        let ids: Vec<u32> = (0..batch * seq)
            .map(|_| rng.random_range(0..MAX_POSITION as u32))
            .collect();
        let tensor = Tensor::from_vec(ids.clone(), (batch, seq), dev)?;
        let (cos, sin) = rope.tables_for_ids(&tensor, DType::F32)?;
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

fn cache_serves_views(dev: &Device, backend: Backend) -> anyhow::Result<()> {
    for scaling in [
        RopeScaling::Default,
        RopeScaling::Dynamic {
            factor: 2.0,
            original_max_positions: 64,
        },
    ] {
        let rope =
            Rope::new(RopeConfig::new(16, 10_000.0).with_scaling(scaling))?.with_backend(backend);
        let cache = RopeCache::new(rope.clone());
        for (offset, len) in [(0, 10), (5, 20), (40, 24), (3, 1)] {
            let (cos, sin) = cache.tables(offset, len, DType::F32, dev)?;
            let (want_cos, want_sin) = rope.tables(offset, len, DType::F32, dev)?;
            assert!(
                cos.is_contiguous() && sin.is_contiguous(),
                "views candle's rope accepts"
            );
            for (a, b) in [(cos, want_cos), (sin, want_sin)] {
                let diff = (a - b)?.abs()?.flatten_all()?.max(0)?.to_scalar::<f32>()?;
                assert!(diff <= 5e-7, "{scaling:?} rows {offset}..+{len}: {diff}");
            }
        }
        assert_eq!(
            cache.memory_bytes(),
            cache.rows(DType::F32, dev) * 2 * 8 * 4
        );
        // Past 64 rows: cached for the default variant; for dynamic NTK the frequencies
        // change with the length, so the rows are generated, not cached.
        let (cos, _) = cache.tables(100, 4, DType::F32, dev)?;
        let (want, _) = rope.tables(100, 4, DType::F32, dev)?;
        let diff = (cos - want)?
            .abs()?
            .flatten_all()?
            .max(0)?
            .to_scalar::<f32>()?;
        if rope.depends_on_length() {
            assert_eq!(diff, 0.0);
            assert!(cache.rows(DType::F32, dev) <= 64);
        } else {
            assert!(diff <= 5e-7);
            assert!(cache.rows(DType::F32, dev) >= 104);
        }
    }
    Ok(())
}

#[test]
fn hf_configs_parse() -> anyhow::Result<()> {
    let llama31 = r#"{"hidden_size": 4096, "num_attention_heads": 32, "rope_theta": 500000.0, "max_position_embeddings": 131072,
        "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}}"#;
    let c: RopeConfig = serde_json::from_str(llama31)?;
    assert_eq!((c.head_dim, c.base), (128, 500000.0));
    assert_eq!(
        c.scaling,
        RopeScaling::Llama3 {
            factor: 8.0,
            low_freq_factor: 1.0,
            high_freq_factor: 4.0,
            original_max_positions: 8192
        }
    );

    let deepseek = r#"{"qk_rope_head_dim": 64, "head_dim": 64, "rope_theta": 10000, "max_position_embeddings": 163840,
        "rope_scaling": {"type": "yarn", "factor": 40, "beta_fast": 32, "beta_slow": 1, "mscale": 1.0, "mscale_all_dim": 1.0, "original_max_position_embeddings": 4096}}"#;
    let c: RopeConfig = serde_json::from_str(deepseek)?;
    assert!(matches!(
        c.scaling,
        RopeScaling::Yarn {
            factor: 40.0,
            original_max_positions: 4096,
            ..
        }
    ));
    assert_eq!(
        Rope::new(c)?.attention_scaling(),
        1.0,
        "mscale / mscale_all_dim = 1"
    );
    let qwen_yarn = r#"{"head_dim": 128, "rope_scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}}"#;
    let c: RopeConfig = serde_json::from_str(qwen_yarn)?;
    assert!((Rope::new(c)?.attention_scaling() - (0.1 * 4f64.ln() + 1.0)).abs() < 1e-15);

    let phi = r#"{"hidden_size": 2560, "num_attention_heads": 32, "partial_rotary_factor": 0.4, "rope_theta": 10000.0}"#;
    let c: RopeConfig = serde_json::from_str(phi)?;
    assert_eq!((c.head_dim, c.rotary_dim()), (80, 32));
    let dynamic = r#"{"head_dim": 64, "max_position_embeddings": 2048, "rope_scaling": {"type": "dynamic", "factor": 2.0}}"#;
    let c: RopeConfig = serde_json::from_str(dynamic)?;
    assert_eq!(
        c.scaling,
        RopeScaling::Dynamic {
            factor: 2.0,
            original_max_positions: 2048
        }
    );
    let linear = r#"{"head_dim": 64, "rope_scaling": {"type": "linear", "factor": 4.0}}"#;
    assert_eq!(
        serde_json::from_str::<RopeConfig>(linear)?.scaling,
        RopeScaling::Linear { factor: 4.0 }
    );

    for (json, needle) in [
        (
            r#"{"head_dim": 64, "rope_scaling": {"rope_type": "longrope", "factor": 4.0}}"#,
            "longrope",
        ),
        (
            r#"{"head_dim": 64, "rope_scaling": {"rope_type": "llama3", "factor": 8.0}}"#,
            "low_freq_factor",
        ),
        (r#"{"rope_theta": 10000.0}"#, "head_dim"),
    ] {
        let err = serde_json::from_str::<RopeConfig>(json)
            .unwrap_err()
            .to_string();
        assert!(err.contains(needle), "{err}");
    }
    Ok(())
}

#[test]
fn nonsense_parameters_are_errors() {
    let base = RopeConfig::new(64, 10_000.0);
    let cases = [
        (RopeConfig { base: -1.0, ..base }, "rope_theta"),
        (
            RopeConfig {
                head_dim: 7,
                ..base
            },
            "rotary dim",
        ),
        (
            RopeConfig {
                partial_rotary_factor: 0.0,
                ..base
            },
            "partial_rotary_factor",
        ),
        (
            base.with_scaling(RopeScaling::Linear { factor: 0.0 }),
            "rope_scaling.factor",
        ),
        (
            base.with_scaling(RopeScaling::Llama3 {
                factor: 8.0,
                low_freq_factor: 4.0,
                high_freq_factor: 1.0,
                original_max_positions: 8192,
            }),
            "high_freq_factor",
        ),
        (
            base.with_scaling(RopeScaling::Yarn {
                factor: 4.0,
                original_max_positions: 4096,
                beta_fast: 1.0,
                beta_slow: 32.0,
                attention_factor: None,
                mscale: None,
                mscale_all_dim: None,
            }),
            "beta_fast",
        ),
        (
            base.with_scaling(RopeScaling::Dynamic {
                factor: 2.0,
                original_max_positions: 0,
            }),
            "original_max_position_embeddings",
        ),
    ];
    for (config, needle) in cases {
        let err = Rope::new(config).unwrap_err().to_string();
        assert!(err.contains(needle), "{config:?}: {err}");
    }
}

backend_tests!(ranges_match_oracle, ids_match_oracle, cache_serves_views);
