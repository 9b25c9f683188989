//! Query temperature and NoPE layers read from config.json: the factor on the queries per
//! position against transformers' attention classes (fixtures written by
//! `scripts/fixtures/query_scale.py` with transformers 5.24.0) and against the 256-bit oracle up
//! to 2^31 - 1; which layers have no rotary.
//!
//! transformers computes the factor in f32: `ln` (or `log1p`) of a whole number of steps,
//! rounded (within an f32 ulp), times a factor of 0.1 and plus 1, each rounded: within 2 f32
//! ulps of the exact value, the bound held below.

use candle_core::{DType, Device, Tensor};
use candle_pe_core::{QueryScale, Rope, RopeConfig, RopeConfigs, MAX_POSITION};
use candle_pe_formats::FromHfConfig;
use pe_testkit::{to_f64, Big};
use rand::{Rng, SeedableRng};

struct Fixture {
    json: serde_json::Value,
    positions: Tensor,
    scale: Vec<f64>,
}

fn fixture(name: &str) -> anyhow::Result<Fixture> {
    let dir = pe_testkit::fixture("rope");
    let json = pe_testkit::read_json(dir.join(format!("{name}.json")));
    let t = candle_core::safetensors::load(dir.join(format!("{name}.safetensors")), &Device::Cpu)?;
    let scale = t["scale"].to_dtype(DType::F64)?.to_vec1::<f64>()?;
    Ok(Fixture {
        json,
        positions: t["positions"].clone(),
        scale,
    })
}

/// Ours (f64) against transformers' f32 values: within 2 f32 ulps of the value. Returns the
/// largest difference in f32 ulps.
fn matches(name: &str, scale: &QueryScale, fx: &Fixture) -> anyhow::Result<f64> {
    let ours = scale.at(&fx.positions, DType::F64)?.to_vec1::<f64>()?;
    let positions = fx.positions.to_vec1::<i64>()?;
    assert_eq!(ours.len(), fx.scale.len());
    let mut worst = 0f64;
    for ((o, t), p) in ours.iter().zip(&fx.scale).zip(&positions) {
        let ulps = (o - t).abs() / (f32::EPSILON as f64 * o);
        worst = worst.max(ulps);
        assert!(ulps <= 2.0, "{name}: scale at {p} = {o}, transformers {t}");
    }
    eprintln!(
        "{name}: max difference {worst:.3} f32 ulps over {} positions",
        ours.len()
    );
    Ok(worst)
}

#[test]
fn ministral3_and_mistral4() -> anyhow::Result<()> {
    for name in ["query_scale_ministral3", "query_scale_mistral4"] {
        let fx = fixture(name)?;
        let config = RopeConfig::from_hf_config(&fx.json["config_input"])?;
        let rope = Rope::new(config)?;
        let scale = rope.query_scale().expect("llama_4_scaling_beta");
        matches(name, scale, &fx)?;
    }
    Ok(())
}

/// Llama 4: every 4th layer is NoPE (no_rope_layers' default), and only those scale their
/// queries (attn_temperature_tuning).
#[test]
fn llama4_nope_layers() -> anyhow::Result<()> {
    let fx = fixture("query_scale_llama4_nope")?;
    let configs = RopeConfigs::from_hf_config(&fx.json["config_input"])?;
    let flags = fx.json["no_rope_layers"].as_array().unwrap();
    for (i, flag) in flags.iter().enumerate() {
        let rotary = flag.as_i64().unwrap() != 0;
        assert_eq!(configs.for_layer(i)?.is_some(), rotary, "layer {i}");
        assert_eq!(configs.query_scale(i)?.is_some(), !rotary, "layer {i}");
    }
    // Its attention turns adjacent pairs, with no config key saying so.
    let first = configs.for_layer(0)?.unwrap();
    assert!(
        first.pair_layout.is_interleaved(),
        "llama4 rotates adjacent pairs"
    );
    let layer = fx.json["layer"].as_u64().unwrap() as usize;
    let scale = configs.query_scale(layer)?.unwrap();
    matches("query_scale_llama4_nope", &scale, &fx)?;
    // A config with NoPE layers has no single rope: RopeConfig refuses it, naming the layer.
    let err = RopeConfig::from_hf_config(&fx.json["config_input"]).unwrap_err();
    assert!(err.to_string().contains("no_rope_layers") && err.to_string().contains("layer 3"));
    // Switched off, NoPE layers keep their queries.
    let mut off = fx.json["config_input"].clone();
    off["attn_temperature_tuning"] = serde_json::json!(false);
    assert_eq!(RopeConfigs::from_hf_config(&off)?.query_scale(layer)?, None);
    Ok(())
}

/// SmolLM3's explicit list (0: NoPE), its interval default, and bad values.
#[test]
fn no_rope_layers() -> anyhow::Result<()> {
    let read = |json: serde_json::Value| RopeConfigs::from_hf_config(&json);
    let listed = read(serde_json::json!({"model_type": "smollm3", "head_dim": 64,
        "num_hidden_layers": 3, "no_rope_layers": [1, 0, 1]}))?;
    let nope: Vec<bool> = (0..3)
        .map(|i| listed.for_layer(i).map(|c| c.is_none()))
        .collect::<Result<_, _>>()?;
    assert_eq!(nope, [false, true, false]);
    assert!(listed
        .for_layer(3)
        .unwrap_err()
        .to_string()
        .contains("no_rope_layers"));
    let interval = read(serde_json::json!({"model_type": "smollm3", "head_dim": 64,
        "num_hidden_layers": 6, "no_rope_layer_interval": 3}))?;
    let nope: Vec<bool> = (0..6)
        .map(|i| interval.for_layer(i).map(|c| c.is_none()))
        .collect::<Result<_, _>>()?;
    assert_eq!(nope, [false, false, true, false, false, true]);
    let err = read(serde_json::json!({"model_type": "smollm3", "head_dim": 64,
        "num_hidden_layers": 6, "no_rope_layer_interval": 0}))
    .unwrap_err();
    assert!(err.to_string().contains("no_rope_layer_interval"), "{err}");
    // Other models: every layer rotates.
    let llama = read(serde_json::json!({"head_dim": 64, "num_hidden_layers": 4}))?;
    assert!(llama.for_layer(3)?.is_some());
    Ok(())
}

/// Both scales against the 256-bit oracle at random positions up to 2^31 - 1: the f64 value
/// within an f64 ulp, the f32 table equal to the oracle rounded.
#[test]
fn matches_oracle() -> anyhow::Result<()> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(19);
    let mut big = Big::new();
    let scales = [
        QueryScale::Llama4Scaling {
            beta: 0.1,
            original_max_position_embeddings: 16384,
        },
        QueryScale::Llama4Scaling {
            beta: 0.37,
            original_max_position_embeddings: 8191,
        },
        QueryScale::AttnTemperature {
            floor_scale: 8192,
            attn_scale: 0.1,
        },
        QueryScale::AttnTemperature {
            floor_scale: 1000,
            attn_scale: 0.25,
        },
    ];
    for scale in scales {
        let mut positions: Vec<i64> = (0..64)
            .map(|_| rng.random_range(0..MAX_POSITION as i64))
            .collect();
        positions.extend([0, 8190, 8191, 16383, 16384, MAX_POSITION as i64 - 1]);
        let t = Tensor::new(positions.as_slice(), &Device::Cpu)?;
        let f64s = scale.at(&t, DType::F64)?.to_vec1::<f64>()?;
        let f32s = scale.at(&t, DType::F32)?.to_vec1::<f32>()?;
        for ((&p, &o64), &o32) in positions.iter().zip(&f64s).zip(&f32s) {
            let (c, k) = match scale {
                QueryScale::Llama4Scaling {
                    beta,
                    original_max_position_embeddings: n,
                } => (beta, p as u64 / n as u64),
                QueryScale::AttnTemperature {
                    floor_scale: f,
                    attn_scale,
                } => (attn_scale, (p as u64 + 1) / f as u64),
            };
            let ln = big.ln(&Big::num((k + 1) as f64));
            let exact = to_f64(&Big::add(&Big::num(1.0), &Big::mul(&Big::num(c), &ln)));
            assert!(
                (o64 - exact).abs() <= f64::EPSILON * exact,
                "{scale:?} at {p}: {o64} vs {exact}"
            );
            assert_eq!(o32, exact as f32, "{scale:?} at {p}");
        }
    }
    Ok(())
}
