//! Bounded KV caches (`CachePolicy`): after every step, in every layer, each cached key is the
//! key its token had before rotation, as first computed, rotated exactly at the position the
//! cache now gives it, to within one f32 rounding; each cached value is the one first computed.
//! Tokens are told apart by their values (random, so distinct). A fresh forward of the kept
//! tokens is not the reference: their deeper keys saw the evicted tokens.

use candle_core::{DType, Device, Tensor};
use candle_pe_formats::FromHfConfig;
use candle_pe_nn::At;
use clap::Parser;
use pe_models::generate_cli::{run, Args};
use pe_models::{greedy, CachePolicy, LlamaFamily, SinkPositions};

/// Half an f32 ulp of `y`.
fn half_ulp(y: f64) -> f64 {
    let e = if y == 0.0 {
        -126
    } else {
        (y.abs().log2().floor() as i32).max(-126)
    };
    2f64.powi(e - 24)
}

fn rows(t: &Tensor) -> anyhow::Result<Vec<Vec<f64>>> {
    // (1, kv_heads, len, d) -> per token, all heads' features.
    let t = t.squeeze(0)?.transpose(0, 1)?.contiguous()?; // (len, kv_heads, d)
    let (len, h, d) = t.dims3()?;
    let flat = t.to_dtype(DType::F64)?.flatten_all()?.to_vec1::<f64>()?;
    Ok((0..len)
        .map(|i| flat[i * h * d..(i + 1) * h * d].to_vec())
        .collect())
}

/// Runs `steps` one-token steps after a prompt under `policy`, checking every layer after each.
/// Returns the token (by order of arrival) of each cached slot after the last step.
fn check_policy(policy: CachePolicy, prompt: &[u32], steps: usize) -> anyhow::Result<Vec<usize>> {
    check_stream("models/llama31", policy, prompt, None, steps)
}

/// [`check_policy`] on the model `fixture`; with M-RoPE, the prompt at ids `mrope` `(3, 1,
/// prompt)` from 0, and each cached key checked at its token's three ids.
fn check_stream(
    fixture: &str,
    policy: CachePolicy,
    prompt: &[u32],
    mrope: Option<&Tensor>,
    steps: usize,
) -> anyhow::Result<Vec<usize>> {
    let dev = Device::Cpu;
    let dir = pe_testkit::fixture(fixture);
    let mut model = LlamaFamily::from_dir(dir, DType::F32, &dev)?.with_cache_policy(policy)?;
    let layers = model.config().num_hidden_layers;
    let rope = model.rotary().rope().clone();
    let (heads, d) = (model.config().num_key_value_heads, model.config().head_dim);
    let half = rope.half_dim();
    // Per layer, per token: (key before rotation, value) as first computed.
    let mut seen: Vec<Vec<(Vec<f64>, Vec<f64>)>> = vec![vec![]; layers];
    let mut input = Tensor::new(prompt, &dev)?.unsqueeze(0)?;
    let mut slots = vec![];
    // The largest error, in half ulps of the pair's norm and as a share of the bound.
    let (mut worst_ulps, mut worst_share) = (0f64, 0f64);
    for step in 0..=steps {
        let logits = match (step, mrope) {
            (0, Some(ids)) => model.forward_stream_mrope(&input, ids)?,
            _ => model.forward_stream(&input)?,
        };
        let positions = model.cache_positions();
        for (layer, tokens) in seen.iter_mut().enumerate() {
            let (k, v) = model.fresh_kv(layer).expect("fresh keys");
            tokens.extend(rows(&k)?.into_iter().zip(rows(&v)?));
            let (keys, values) = model.kv_cache(layer)?.expect("a cache");
            let (keys, values) = (rows(&keys)?, rows(&values)?);
            assert_eq!(keys.len(), positions.len());
            let (cos, sin) = match model.is_mrope() {
                true => {
                    let ids = model.cache_mrope_positions();
                    let rows: Vec<Vec<i64>> = (0..3)
                        .map(|a| ids.iter().map(|id| id[a]).collect())
                        .collect();
                    rope.at(At::mrope(&Tensor::new(rows, &dev)?), DType::F64)?
                }
                false => rope.at(&Tensor::new(positions.as_slice(), &dev)?, DType::F64)?,
            };
            let (cos, sin) = (cos.to_vec2::<f64>()?, sin.to_vec2::<f64>()?);
            slots.clear();
            for (slot, (key, value)) in keys.iter().zip(&values).enumerate() {
                // The first later token with this value (a repeated token id has the same
                // values in the first layer): tokens stay in the order they came.
                let after = slots.last().map_or(0, |&t| t + 1);
                let token = after
                    + tokens[after..]
                        .iter()
                        .position(|(_, v)| v == value)
                        .unwrap_or_else(|| {
                            panic!(
                                "step {step} layer {layer} slot {slot}: a value no later token had"
                            )
                        });
                slots.push(token);
                let pre = &tokens[token].0;
                for hd in 0..heads {
                    let base = hd * d;
                    for i in 0..half {
                        let (a, b) = (base + i, base + i + half);
                        let (c, s) = (cos[slot][i], sin[slot][i]);
                        for (j, want) in
                            [(a, pre[a] * c - pre[b] * s), (b, pre[a] * s + pre[b] * c)]
                        {
                            let bound = half_ulp(want)
                                + 4.0 * 2f64.powi(-24) * (pre[a].abs() + pre[b].abs());
                            let err = (key[j] - want).abs();
                            worst_ulps = worst_ulps.max(err / half_ulp(pre[a].hypot(pre[b])));
                            worst_share = worst_share.max(err / bound);
                            assert!(
                                (key[j] - want).abs() <= bound,
                                "{policy:?} step {step} layer {layer} slot {slot} (token {token} at {}): key {} vs exact {want}",
                                positions[slot],
                                key[j]
                            );
                        }
                    }
                }
            }
        }
        let next = logits.squeeze(0)?.get(logits.dim(1)? - 1)?;
        input = Tensor::new(&[[next.argmax(0)?.to_scalar::<u32>()?]], &dev)?;
    }
    eprintln!(
        "{fixture} {policy:?}: largest key error {worst_ulps:.2} half ulps of the pair's norm, {worst_share:.2} of the bound"
    );
    Ok(slots)
}

#[test]
fn contiguous_sink_cache_is_consistent_after_every_eviction() -> anyhow::Result<()> {
    let policy = CachePolicy::Sink {
        sink: 4,
        window: 8,
        positions: SinkPositions::Contiguous,
    };
    let slots = check_policy(policy, &[5, 6, 7, 8, 9, 10], 30)?;
    // The 4 sinks and the 8 latest of the 36 tokens (6 prompt tokens, 30 steps).
    let want: Vec<usize> = (0..4).chain(28..36).collect();
    assert_eq!(slots, want);
    // A prompt longer than the cache is cut back to it after its forward.
    let slots = check_policy(policy, &(1..30).collect::<Vec<u32>>(), 3)?;
    assert_eq!(slots, (0..4).chain(24..32).collect::<Vec<_>>());
    Ok(())
}

#[test]
fn transformers_sink_cache_is_consistent_after_every_eviction() -> anyhow::Result<()> {
    let policy = CachePolicy::Sink {
        sink: 2,
        window: 6,
        positions: SinkPositions::Transformers,
    };
    let slots = check_policy(policy, &[5, 6, 7, 8, 9], 20)?;
    assert_eq!(slots.len(), 8);
    check_policy(policy, &(1..12).collect::<Vec<u32>>(), 4)?;
    Ok(())
}

#[test]
fn context_shift_is_consistent_after_every_shift() -> anyhow::Result<()> {
    let policy = CachePolicy::Keep { keep: 3, size: 12 };
    let slots = check_policy(policy, &[5, 6, 7, 8, 9], 30)?;
    assert_eq!(&slots[..3], &[0, 1, 2]);
    Ok(())
}

/// A bounded cache generates any number of tokens in bounded memory; the positions stay within
/// the cache.
#[test]
fn greedy_runs_past_the_cache_in_bounded_memory() -> anyhow::Result<()> {
    let dev = Device::Cpu;
    let dir = pe_testkit::fixture("models/llama31");
    for policy in [
        CachePolicy::Sink {
            sink: 4,
            window: 28,
            positions: SinkPositions::Contiguous,
        },
        CachePolicy::Sink {
            sink: 4,
            window: 28,
            positions: SinkPositions::Transformers,
        },
        CachePolicy::Keep { keep: 4, size: 32 },
    ] {
        let mut model = LlamaFamily::from_dir(&dir, DType::F32, &dev)?.with_cache_policy(policy)?;
        let out = greedy(&mut model, &[5, 6, 7], 0, 300, &[], |_| {})?;
        assert_eq!(out.ids.len(), 300);
        assert!(model.kv_len() <= 32, "{policy:?}: {}", model.kv_len());
        assert!(model.cache_positions().iter().all(|&p| p < 40));
        let err = greedy(&mut model, &[5], 3, 2, &[], |_| {}).unwrap_err();
        assert!(
            err.to_string()
                .contains("first position 3: with a cache policy the positions are the cache's"),
            "{policy:?}: {err}"
        );
    }
    Ok(())
}

/// Until the first eviction, a bounded cache gives the logits of the unbounded one.
#[test]
fn bounded_equals_unbounded_before_the_first_eviction() -> anyhow::Result<()> {
    let dev = Device::Cpu;
    let dir = pe_testkit::fixture("models/llama31");
    let mut full = LlamaFamily::from_dir(&dir, DType::F32, &dev)?;
    let a = greedy(&mut full, &[5, 6, 7], 0, 12, &[], |_| {})?;
    let policy = CachePolicy::Sink {
        sink: 4,
        window: 12,
        positions: SinkPositions::Contiguous,
    };
    let mut model = LlamaFamily::from_dir(&dir, DType::F32, &dev)?.with_cache_policy(policy)?;
    let b = greedy(&mut model, &[5, 6, 7], 0, 12, &[], |_| {})?;
    assert_eq!(a.ids, b.ids);
    Ok(())
}

fn cli(args: &[&str]) -> anyhow::Result<String> {
    cli_on("models/llama31", args)
}

fn cli_on(fixture: &str, args: &[&str]) -> anyhow::Result<String> {
    let mut all = vec!["generate"];
    all.extend(args);
    let args = Args::try_parse_from(all)?;
    let mut out = vec![];
    run(&args, &pe_testkit::fixture(fixture), &mut out)?;
    Ok(String::from_utf8(out)?)
}

/// `generate --keep` runs the M-RoPE fixture past its context (text ids on the three rows,
/// shifted on all three); a sink cache is refused for it, naming --keep.
#[test]
fn generate_keep_runs_an_mrope_model_past_its_context() -> anyhow::Result<()> {
    let base = [
        "--prompt-ids",
        "1,87,14,101",
        "--max-new",
        "300",
        "--eos",
        "",
    ];
    let out = cli_on(
        "models/qwen2_vl",
        &[&base[..], &["--keep", "4", "--context-size", "32"]].concat(),
    )?;
    assert!(out.contains("of 303 seen"), "{out}");
    let held: usize = out
        .lines()
        .find_map(|l| l.strip_prefix("cache: "))
        .and_then(|l| l.split(' ').next())
        .expect("a cache line")
        .parse()?;
    assert!(held <= 32, "{out}");
    let err = cli_on(
        "models/qwen2_vl",
        &[&base[..], &["--sink", "4", "--window", "8"]].concat(),
    )
    .unwrap_err();
    assert!(format!("{err:#}").contains("(--keep) only"), "{err:#}");
    // Its end-of-sequence id is under text_config.
    assert_eq!(
        pe_models::eos_token_ids(pe_testkit::fixture("models/qwen2_vl"))?,
        [2]
    );
    Ok(())
}

#[test]
fn generate_flags_bound_the_cache() -> anyhow::Result<()> {
    let base = ["--prompt-ids", "5,6,7", "--max-new", "80", "--eos", ""];
    for extra in [
        &["--sink", "4", "--window", "12"][..],
        &[
            "--sink",
            "4",
            "--window",
            "12",
            "--sink-positions",
            "transformers",
        ],
        &["--keep", "4", "--context-size", "16"],
    ] {
        let out = cli(&[&base[..], extra].concat())?;
        let line = out
            .lines()
            .find(|l| l.starts_with("cache: "))
            .expect("a cache line");
        let held: usize = line["cache: ".len()..].split(' ').next().unwrap().parse()?;
        assert!(
            held <= 16 && line.ends_with("of 82 seen"),
            "{extra:?}: {out}"
        );
    }
    for (extra, needle) in [
        (&["--sink", "4"][..], "--window"),
        (&["--sink", "-1", "--window", "4"], "--sink"),
        (&["--keep", "-2"], "--keep"),
        (&["--window", "4"], "--sink"),
        (&["--sink", "4", "--window", "4", "--keep", "2"], "--keep"),
        (&["--keep", "15", "--context-size", "16"], "--keep 15"),
        (
            &["--sink", "4", "--window", "0"],
            "--window must be at least 1",
        ),
        (
            &["--sink", "2", "--window", "4", "--position-offset", "3"],
            "--position-offset 3",
        ),
    ] {
        let err = cli(&[&base[..], extra].concat()).unwrap_err();
        assert!(format!("{err:#}").contains(needle), "{extra:?}: {err:#}");
    }
    Ok(())
}

/// The Qwen2-VL fixture's 27-token stream (two image runs) and its M-RoPE ids `(3, 1, 27)` from
/// 0, as `get_rope_index` gives them.
fn qwen_vl_stream(fixture: &str) -> anyhow::Result<(Vec<u32>, Tensor)> {
    let dir = pe_testkit::fixture(fixture);
    let json: serde_json::Value = pe_testkit::read_json(dir.join("config.json"));
    let config = candle_pe_formats::QwenVlConfig::from_hf_config(&json)?;
    let (img, start, end) = (120, 118, 119);
    let mut ids = vec![1, 87, 14, start];
    ids.extend([img; 6]);
    ids.extend([end, 101, 33, 59, start]);
    ids.extend([img; 8]);
    ids.extend([end, 7, 76, 45]);
    let input = Tensor::new(ids.as_slice(), &Device::Cpu)?.unsqueeze(0)?;
    let positions = config.positions(&input, &[[1, 4, 6], [1, 8, 4]], &[], None, None)?;
    Ok((ids, positions.position_ids().clone()))
}

/// Context shift on an M-RoPE model: each shift drops image tokens (whole runs and part of one)
/// and moves the rest back on all three rows; every cached key of every layer stays one
/// rounding from its key before rotation turned at its token's current three ids.
#[test]
fn mrope_context_shift_is_consistent_after_every_shift() -> anyhow::Result<()> {
    for fixture in ["models/qwen2_vl", "models/qwen3_vl"] {
        let (prompt, ids) = qwen_vl_stream(fixture)?;
        let policy = CachePolicy::Keep { keep: 4, size: 40 };
        let slots = check_stream(fixture, policy, &prompt, Some(&ids), 60)?;
        assert_eq!(&slots[..4], &[0, 1, 2, 3]);
    }
    Ok(())
}

/// The M-RoPE ids a shift leaves: the kept tokens' unchanged, the moved ones right after them
/// (an image run keeps its shape), and the next token after the largest.
#[test]
fn mrope_context_shift_moves_the_rest_on_all_rows() -> anyhow::Result<()> {
    let dev = Device::Cpu;
    let (prompt, ids) = qwen_vl_stream("models/qwen2_vl")?;
    let dir = pe_testkit::fixture("models/qwen2_vl");
    // 27 + 3 tokens fill 30; the 31st drops 13 of the 26 after the kept 4 (tokens 4..17: the
    // first image run, the text after it and 2 tokens of the second run) and moves the rest
    // back by the 8 positions those spanned (ids 4..12, where the second run starts at 12).
    let policy = CachePolicy::Keep { keep: 4, size: 30 };
    let mut model = LlamaFamily::from_dir(dir, DType::F32, &dev)?.with_cache_policy(policy)?;
    let input = Tensor::new(prompt.as_slice(), &dev)?.unsqueeze(0)?;
    model.forward_stream_mrope(&input, &ids)?;
    let before = model.cache_mrope_positions();
    assert_eq!(before[26], [19; 3]);
    for _ in 0..4 {
        model.forward_stream(&Tensor::new(&[[5u32]], &dev)?)?;
    }
    let after = model.cache_mrope_positions();
    assert_eq!(after.len(), 30 - 13 + 1);
    assert_eq!(&after[..4], &before[..4]);
    // The prompt's last 10 tokens and the 3 decoded ones (at 20, 21, 22), 8 back; the second
    // run's last 6 patches keep their rows and columns.
    let decoded = [[20; 3], [21; 3], [22; 3]];
    let moved: Vec<[i64; 3]> = before[17..]
        .iter()
        .chain(&decoded)
        .map(|id| id.map(|v| v - 8))
        .collect();
    assert_eq!(&after[4..17], &moved[..]);
    assert_eq!(after[4], [4, 5, 4]);
    // The new token follows the largest id held.
    assert_eq!(after[17], [15; 3]);
    Ok(())
}

/// A sliding-window model (the mistral fixture: `sliding_window` 8) under a cache policy: the
/// policy replaces the window (`with_cache_policy` clears each layer's), so the cache holds
/// the 16 tokens the policy keeps, not the window's 8, each key rotated exactly at the position
/// the policy gives it; and until the first eviction the logits are, bit for bit, those of
/// the same model without a window, and not those of the model with its window.
#[test]
fn a_cache_policy_replaces_the_sliding_window() -> anyhow::Result<()> {
    let (dev, dir) = (Device::Cpu, pe_testkit::fixture("models/mistral"));
    let policy = CachePolicy::Sink {
        sink: 4,
        window: 12,
        positions: SinkPositions::Contiguous,
    };
    let slots = check_stream("models/mistral", policy, &[5, 6, 7, 8, 9, 10], None, 20)?;
    assert_eq!(slots, (0..4).chain(14..26).collect::<Vec<_>>());

    let config = pe_models::LlamaConfig::from_file(dir.join("config.json"))?;
    assert_eq!(config.sliding_window, Some(8));
    let model = |window: Option<usize>| -> anyhow::Result<LlamaFamily> {
        let config = pe_models::LlamaConfig {
            sliding_window: window,
            ..config.clone()
        };
        let files = [dir.join("model.safetensors")];
        // SAFETY: the fixture is read-only while the test runs.
        let vb =
            unsafe { candle_nn::VarBuilder::from_mmaped_safetensors(&files, DType::F32, &dev)? };
        LlamaFamily::new(&config, vb)
    };
    let mut bounded = model(Some(8))?.with_cache_policy(policy)?;
    let (mut unwindowed, mut windowed) = (model(None)?, model(Some(8))?);
    let prompt = [5u32, 6, 7, 8, 9, 10];
    let ids = Tensor::new(&prompt, &dev)?.unsqueeze(0)?;
    let positions = Tensor::arange(0u32, prompt.len() as u32, &dev)?.unsqueeze(0)?;
    let mut got = bounded.forward_stream(&ids)?;
    let mut want = unwindowed.forward(&ids, &positions, None)?;
    let mut other = windowed.forward(&ids, &positions, None)?;
    let bits = |t: &Tensor| -> anyhow::Result<Vec<u32>> {
        Ok(t.flatten_all()?
            .to_vec1::<f32>()?
            .into_iter()
            .map(f32::to_bits)
            .collect())
    };
    let mut differs = false;
    // Up to 16 tokens held: no eviction yet, and from the 9th on the window would cut.
    for position in prompt.len() as u32..16 {
        assert_eq!(
            bits(&got)?,
            bits(&want)?,
            "logits before position {position}"
        );
        differs |= bits(&other)? != bits(&want)?;
        let next = want.squeeze(0)?.get(want.dim(1)? - 1)?.argmax(0)?;
        let ids = Tensor::new(&[[next.to_scalar::<u32>()?]], &dev)?;
        let at = Tensor::new(&[[position]], &dev)?;
        got = bounded.forward_stream(&ids)?;
        want = unwindowed.forward(&ids, &at, None)?;
        other = windowed.forward(&ids, &at, None)?;
    }
    assert_eq!(bits(&got)?, bits(&want)?);
    assert!(
        differs,
        "the fixture's window never cut: the test would not see it"
    );
    assert_eq!(bounded.kv_len(), 16);
    Ok(())
}
