//! The reference decoder read from GGUF files (`LlamaFamily::from_gguf`) against transformers'
//! logits on the same dequantized weights (fixtures written by `scripts/fixtures/gguf_files.py`):
//! Llama 3.1 (llama3 rope recovered from `rope_freqs`, Q/K permuted by the converter), Qwen2.5
//! YaRN, Phi-3 LongRoPE (f32 factors) and Mistral (converted as llama), each in F32 and Q8_0;
//! and Phi-3 with the converter's `sliding_window = 0` (no window) from
//! `scripts/fixtures/gguf_none_values.py`.
//!
//! Bounds, as in `tests/transformers.rs`: prefill and cached decode within `TOL`; at positions
//! 20,000.. transformers' own f32 angles drift (`|tf_far - tf_prefill|`, read from the fixture),
//! so ours are held to `TOL` + that drift, and Phi-3's far logits (long factors, no
//! shift-invariant reference) to `FAR_LONGROPE_BOUND`.

use std::collections::HashMap;

use anyhow::Result;
use candle_core::{DType, Device, IndexOp, Tensor};
use pe_models::LlamaFamily;

const TOL: f32 = 1e-4;
/// As in `tests/transformers.rs`: 2.5x the largest drift transformers shows at 20,000.
const FAR_LONGROPE_BOUND: f32 = 2e-3;

fn max_diff(a: &Tensor, b: &Tensor) -> Result<f32> {
    assert_eq!(a.dims(), b.dims());
    Ok((a - b)?.abs()?.flatten_all()?.max(0)?.to_scalar::<f32>()?)
}

fn argmax(logits: &Tensor) -> Result<Vec<u32>> {
    Ok(logits.argmax(2)?.flatten_all()?.to_vec1::<u32>()?)
}

/// How a fixture's GGUF file is loaded.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Load {
    /// `from_gguf`: quantized projections on `QMatMul`, the file's pair layout.
    Quantized,
    /// `from_gguf_dequantized`: every weight dense, Q/K back in transformers' order.
    Dequantized,
}

impl Load {
    fn model(self, path: &std::path::Path) -> Result<LlamaFamily> {
        match self {
            Load::Quantized => LlamaFamily::from_gguf(path, DType::F32, &Device::Cpu),
            Load::Dequantized => LlamaFamily::from_gguf_dequantized(path, DType::F32, &Device::Cpu),
        }
    }
}

/// The largest distances of one case's logits to transformers', and ours at 20,000 to ours at
/// 0 (shift invariance).
#[derive(Debug, Default)]
struct Distances {
    prefill: f32,
    decode: f32,
    far: f32,
    far_vs_ours: f32,
    /// transformers' own drift at 20,000: `|tf_far - tf_prefill|`.
    tf_drift: f32,
    /// The calls whose greedy ids differ from transformers'.
    ids_differ: Vec<String>,
    /// Our logits: prefill and at 20,000.
    logits: Vec<Tensor>,
}

/// Runs the reference `case` (prefill, 8 cached greedy steps fed transformers' ids, the prompt
/// at 20,000) on its GGUF file (`<model>_q8_0` for `<model>_q8_0_act`); returns the distances
/// and the calls whose greedy ids differ, for the caller's bounds.
fn run(case: &str, load: Load) -> Result<Distances> {
    run_on(case, case.strip_suffix("_act").unwrap_or(case), load)
}

/// [`run`] on the GGUF file `file` (`gguf/<file>.gguf`).
fn run_on(case: &str, file: &str, load: Load) -> Result<Distances> {
    let dir = pe_testkit::fixture("gguf");
    let t = reference(case)?;
    let mut model = load.model(&dir.join(format!("{file}.gguf")))?;
    let mut d = Distances::default();

    let prefill = model.forward(&t["prefill.input_ids"], &t["prefill.position_ids"], None)?;
    d.prefill = max_diff(&prefill, &t["prefill.logits"])?;
    if argmax(&prefill)? != argmax(&t["prefill.logits"])? {
        d.ids_differ.push("prefill".into());
    }

    let inputs = t["decode.input_ids"].to_dtype(DType::I64)?;
    let positions = t["decode.position_ids"].to_dtype(DType::I64)?;
    let want_ids = t["decode.generated_ids"]
        .to_dtype(DType::I64)?
        .to_vec2::<i64>()?;
    for s in 0..inputs.dim(1)? {
        let logits = model.forward(
            &inputs.i((.., s..s + 1))?,
            &positions.i((.., s..s + 1))?,
            None,
        )?;
        d.decode = d.decode.max(max_diff(
            &logits,
            &t["decode.logits"].i((.., s..s + 1, ..))?,
        )?);
        if argmax(&logits)?[0] as i64 != want_ids[0][s + 1] {
            d.ids_differ.push(format!("decode step {s}"));
        }
    }

    model.clear_cache();
    let far = model.forward(&t["prefill.input_ids"], &t["far20000.position_ids"], None)?;
    d.far = max_diff(&far, &t["far20000.logits"])?;
    d.far_vs_ours = max_diff(&far, &prefill)?;
    d.tf_drift = max_diff(&t["far20000.logits"], &t["prefill.logits"])?;
    if argmax(&far)? != argmax(&t["far20000.logits"])? {
        d.ids_differ.push("far20000".into());
    }
    d.logits = vec![prefill, far];
    println!(
        "{case:>24} {load:?} ({file}): prefill {:.3e} decode {:.3e} far20000 {:.3e} (ours at 20000 vs 0: {:.3e}; transformers' drift {:.3e}); greedy ids differ: {:?}",
        d.prefill, d.decode, d.far, d.far_vs_ours, d.tf_drift, d.ids_differ
    );
    Ok(d)
}

/// Holds `d` to the bounds of dense f32 weights: prefill and decode within `TOL`; at 20,000
/// ours shift-invariant (within `TOL` of our prefill) and within `TOL` + transformers' drift,
/// Phi-3's within `longrope_bound()` (its far logits have no shift-invariant reference).
fn check(case: &str, d: &Distances, longrope_bound: impl FnOnce() -> Result<f32>) -> Result<()> {
    assert!(
        d.ids_differ.is_empty(),
        "{case}: greedy ids differ at {:?}",
        d.ids_differ
    );
    assert!(d.prefill <= TOL, "{case} prefill: {}", d.prefill);
    assert!(d.decode <= TOL, "{case} decode: {}", d.decode);
    let bound = if case.starts_with("phi3") {
        longrope_bound()?
    } else {
        assert!(
            d.far_vs_ours <= TOL,
            "{case} far vs prefill: {}",
            d.far_vs_ours
        );
        TOL + d.tf_drift
    };
    assert!(d.far <= bound, "{case} far20000: {} > {bound}", d.far);
    Ok(())
}

/// transformers' tensors of the reference `name` (`gguf/<name>.safetensors`).
fn reference(name: &str) -> Result<HashMap<String, Tensor>> {
    let path = pe_testkit::fixture("gguf").join(format!("{name}.safetensors"));
    Ok(candle_core::safetensors::load(path, &Device::Cpu)?)
}

/// The past-the-context references and the Llama 3.1 file each replays.
const BEYOND: [(&str, &str); 2] = [
    ("llama31_f32_beyond", "llama31_f32"),
    ("llama31_q8_0_act_beyond", "llama31_q8_0"),
];

/// The fixtures' models: Llama 3.1 (llama3 rope recovered from `rope_freqs`), Qwen2.5 YaRN,
/// Phi-3 LongRoPE, and Mistral (written as `llama` by the converter, Q/K permuted, its sliding
/// window dropped: transformers' reference runs without one).
const CASES: [&str; 4] = ["llama31", "qwen25_yarn", "phi3_longrope", "mistral"];

/// The cases with a row each in `Family` since the GGUF decoder became table-driven: Qwen3
/// (qk-norm), written by `gguf_files.py` as llama.cpp's converter writes `Qwen3ForCausalLM`.
/// (The tiny Gemma 3 file is not here: without `attention.sliding_window_pattern` llama.cpp,
/// and this decoder, read both of its layers as sliding and scale the scores by the head, where
/// transformers' recorded logits take its `layer_types` and `query_pre_attn_scalar`; the real
/// Gemma 3 270M in `tests/real.rs` is held to llama.cpp instead.)
const ROW_CASES: [&str; 1] = ["qwen3"];

/// The dense twin, every weight dequantized: transformers' logits on the same weights.
#[test]
fn dequantized_gguf_decoders_match_transformers() -> Result<()> {
    for model in CASES.into_iter().chain(ROW_CASES) {
        for weights in ["f32", "q8_0"] {
            let case = format!("{model}_{weights}");
            check(&case, &run(&case, Load::Dequantized)?, || {
                Ok(FAR_LONGROPE_BOUND)
            })?;
        }
    }
    Ok(())
}

/// `from_gguf` on F32 files: the weights stay dense, the Q/K layout is the file's; the same
/// bounds as the twin.
#[test]
fn gguf_decoders_match_transformers_f32() -> Result<()> {
    for model in CASES.into_iter().chain(ROW_CASES) {
        let case = format!("{model}_f32");
        check(&case, &run(&case, Load::Quantized)?, || {
            Ok(FAR_LONGROPE_BOUND)
        })?;
    }
    Ok(())
}

/// `from_gguf` on Q8_0 files. candle's CPU matmul with a Q8_0 weight rounds its input to Q8_0
/// blocks too (as llama.cpp's does), so it is held to `<model>_q8_0_act`: transformers on the
/// same weights with every quantized Linear's input rounded so. That is the arithmetic candle
/// does, so prefill and decode get the dense bounds (`TOL`) and the same greedy ids. At 20,000,
/// llama and qwen2 are shift-invariant as for dense weights (within `TOL` of our prefill, within
/// `TOL` + transformers' drift of its far logits). Phi-3's far logits have no shift-invariant
/// reference, and transformers' f32 angles there move some of its roundings by a step: they are
/// held within what rounding every input costs at those positions, `|far_act - far|` between
/// the two references (a few flips move the logits less than all the roundings do).
///
/// Against transformers without that rounding (`<model>_q8_0`), the distance is the price of
/// Q8_0 activations (printed; 0.16 to 0.28 on these logits of magnitude 5 to 7), and where the
/// top two logits lie closer than that, greedy ids can differ (Qwen2.5's first decode step,
/// margin 0.016; Phi-3's prefill, margin 0.012; Mistral's fourth decode step, margin 0.021):
/// those ids are printed, not asserted.
#[test]
fn gguf_decoders_match_transformers_q8_0() -> Result<()> {
    for model in CASES {
        let plain = format!("{model}_q8_0");
        let act = format!("{plain}_act");
        // Phi-3 at 20,000: what rounding every input costs there.
        let rounding = || {
            let far =
                |name: &str| Ok::<_, anyhow::Error>(reference(name)?["far20000.logits"].clone());
            Ok(TOL + max_diff(&far(&act)?, &far(&plain)?)?)
        };
        check(&act, &run(&act, Load::Quantized)?, rounding)?;
        // The price of Q8_0 activations, against transformers on f32 activations.
        run(&plain, Load::Quantized)?;
    }
    Ok(())
}

/// `phi3_longrope_f32_swa0.gguf` is `phi3_longrope_f32.gguf` with the key
/// `phi3.attention.sliding_window = 0` added (`scripts/fixtures/gguf_none_values.py`), as
/// llama.cpp's converter writes a Phi-3 whose config has no sliding window. llama.cpp reads 0
/// as no window (it was read as a window of 0 tokens on every layer, wrong from the first
/// token): the decoder gives the same logits, bit for bit, as on the file without the key, and
/// transformers' greedy ids (`phi3_longrope_f32`, recorded without a window), in both loads and
/// through `generate --model`.
#[test]
fn a_sliding_window_of_0_is_no_window() -> Result<()> {
    let case = "phi3_longrope_f32";
    for load in [Load::Quantized, Load::Dequantized] {
        let with_key = run_on(case, "phi3_longrope_f32_swa0", load)?;
        check(case, &with_key, || Ok(FAR_LONGROPE_BOUND))?;
        let without = run(case, load)?;
        for (ours, theirs) in with_key.logits.iter().zip(&without.logits) {
            assert_eq!(max_diff(ours, theirs)?, 0.0, "{load:?}");
        }
        assert_eq!(
            (with_key.decode, with_key.ids_differ),
            (without.decode, without.ids_differ),
            "{load:?}"
        );
    }
    let gguf = pe_testkit::fixture("gguf").join("phi3_longrope_f32_swa0.gguf");
    assert_eq!(
        generate_ids(&gguf, "0", "8")?,
        recorded_ids(&reference(case)?, 8)?
    );
    Ok(())
}

/// A copy of the fixture `gguf/<name>.gguf` in `dir` with the metadata `keys` set (added or
/// replaced), its tensors as they are.
fn gguf_with(
    dir: &std::path::Path,
    name: &str,
    keys: &[(&str, candle_core::quantized::gguf_file::Value)],
) -> Result<std::path::PathBuf> {
    use candle_core::quantized::gguf_file;
    let mut file = std::fs::File::open(pe_testkit::fixture("gguf").join(format!("{name}.gguf")))?;
    let content = gguf_file::Content::read(&mut file)?;
    let mut metadata = content.metadata.clone();
    for (k, v) in keys {
        metadata.insert(k.to_string(), v.clone());
    }
    let mut tensors = vec![];
    for name in content.tensor_infos.keys() {
        tensors.push((name.clone(), content.tensor(&mut file, name, &Device::Cpu)?));
    }
    let path = dir.join(format!("{name}_edited.gguf"));
    let mut out = std::fs::File::create(&path)?;
    let meta: Vec<(&str, &gguf_file::Value)> =
        metadata.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let tensors: Vec<(&str, &candle_core::quantized::QTensor)> =
        tensors.iter().map(|(k, t)| (k.as_str(), t)).collect();
    gguf_file::write(&mut out, &meta, &tensors)?;
    Ok(path)
}

/// Head counts the decoder cannot take (0 KV heads, which llama.cpp reads as a layer without
/// attention; a count that does not divide the heads; no heads) are errors naming the key and
/// the value, not a panic.
#[test]
fn bad_head_counts_are_errors_naming_the_key() -> Result<()> {
    use candle_core::quantized::gguf_file::Value;
    let dir = tempfile::tempdir()?;
    let cases = [
        (
            vec![("phi3.attention.head_count_kv", Value::U32(0))],
            "key phi3.attention.head_count_kv: must divide phi3.attention.head_count = 4 (and be \
             at least 1), got 0",
        ),
        (
            vec![("phi3.attention.head_count_kv", Value::U32(3))],
            "key phi3.attention.head_count_kv: must divide phi3.attention.head_count = 4 (and be \
             at least 1), got 3",
        ),
        (
            vec![
                ("phi3.attention.head_count", Value::U32(0)),
                ("phi3.attention.key_length", Value::U32(16)),
            ],
            "key phi3.attention.head_count: must be at least 1, got 0",
        ),
    ];
    for (keys, want) in cases {
        let path = gguf_with(dir.path(), "phi3_longrope_f32", &keys)?;
        for load in [Load::Quantized, Load::Dequantized] {
            let err = match load.model(&path) {
                Ok(_) => panic!("{keys:?} {load:?}: loaded"),
                Err(e) => format!("{e:#}"),
            };
            assert!(err.contains(want), "{keys:?} {load:?}: {err}");
        }
    }
    Ok(())
}

/// The prompt at `start` and 8 cached greedy steps fed `reference`'s ids (`at<start>` calls of a
/// `_beyond` fixture): the logits of the prompt and of the steps, and the greedy ids.
fn greedy_from(
    model: &mut LlamaFamily,
    t: &HashMap<String, Tensor>,
    start: u32,
) -> Result<(Tensor, Tensor, Vec<u32>)> {
    let call = |what: &str| &t[&format!("at{start}.{what}")];
    model.clear_cache();
    let prefill = model.forward(call("input_ids"), call("position_ids"), None)?;
    let mut ids = vec![argmax(&prefill)?[11]];
    let (inputs, positions) = (call("decode_input_ids"), call("decode_position_ids"));
    let mut steps = vec![];
    for s in 0..inputs.dim(1)? {
        let logits = model.forward(
            &inputs.i((.., s..s + 1))?,
            &positions.i((.., s..s + 1))?,
            None,
        )?;
        ids.push(argmax(&logits)?[0]);
        steps.push(logits);
    }
    Ok((prefill, Tensor::cat(&steps, 1)?, ids))
}

/// Llama 3.1 from its GGUF file at positions 100,000 and 200,000 (past the file's
/// `context_length`, 131,072): the llama3 rope reaches there. Ours are shift-invariant (within
/// `TOL` of ours at 0), so they are held within `TOL` + transformers' own drift from its logits
/// at 0 (its f32 angles: 4e-3 and 1e-2 in F32; in Q8_0 some of its roundings move with them,
/// 0.08 to 0.16); greedy ids equal transformers' at every step.
#[test]
fn llama31_gguf_runs_past_its_context() -> Result<()> {
    let dir = pe_testkit::fixture("gguf");
    for (name, file) in BEYOND {
        let t = reference(name)?;
        let mut model =
            LlamaFamily::from_gguf(dir.join(format!("{file}.gguf")), DType::F32, &Device::Cpu)?;
        let (ours0, ours0_steps, _) = greedy_from(&mut model, &t, 0)?;
        for start in [0u32, 100_000, 200_000] {
            let (prefill, steps, ids) = greedy_from(&mut model, &t, start)?;
            let want = t[&format!("at{start}.generated_ids")]
                .flatten_all()?
                .to_dtype(DType::U32)?
                .to_vec1::<u32>()?;
            assert_eq!(ids, want, "{name} at {start}: greedy ids");
            for (what, ours, ours0) in [
                ("logits", &prefill, &ours0),
                ("decode_logits", &steps, &ours0_steps),
            ] {
                let tf = &t[&format!("at{start}.{what}")];
                let drift = max_diff(tf, &t[&format!("at0.{what}")])?;
                let d = max_diff(ours, tf)?;
                let shift = max_diff(ours, ours0)?;
                println!(
                    "{name:>24} at {start:>6} {what:>13}: {d:.3e} (ours vs ours at 0: {shift:.3e}; transformers' drift {drift:.3e})"
                );
                assert!(
                    shift <= TOL,
                    "{name} at {start} {what}: ours moved by {shift}"
                );
                assert!(
                    d <= TOL + drift,
                    "{name} at {start} {what}: {d} > {TOL} + {drift}"
                );
            }
        }
    }
    Ok(())
}

/// The first `n` greedy ids transformers recorded (`decode.generated_ids`), as the generate
/// command line prints them: `ids: a b c`.
fn recorded_ids(t: &HashMap<String, Tensor>, n: usize) -> Result<String> {
    let ids = t["decode.generated_ids"]
        .to_dtype(DType::I64)?
        .to_vec2::<i64>()?;
    let ids: Vec<String> = ids[0].iter().take(n).map(|i| i.to_string()).collect();
    Ok(format!("ids: {}", ids.join(" ")))
}

/// The `ids:` line `generate --model gguf` prints for the fixtures' 12-token prompt at
/// `offset`, `new` tokens.
fn generate_ids(gguf: &std::path::Path, offset: &str, new: &str) -> Result<String> {
    let argv = [
        "generate",
        "--model",
        gguf.to_str().unwrap(),
        "--prompt-ids",
        "1,87,14,101,33,59,120,7,76,45,98,23",
        "--max-new",
        new,
        "--position-offset",
        offset,
    ];
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let code = pe_models::generate_cli::main_with(argv, gguf, &mut out, &mut err);
    assert_eq!(
        code,
        std::process::ExitCode::SUCCESS,
        "{}",
        String::from_utf8_lossy(&err)
    );
    let out = String::from_utf8(out)?;
    Ok(out
        .lines()
        .find(|l| l.starts_with("ids:"))
        .unwrap_or("")
        .to_string())
}

/// `generate --model llama31.gguf --position-offset 100000` (and 200,000, past the context):
/// transformers' greedy ids.
#[test]
fn generate_runs_llama31_past_its_context() -> Result<()> {
    let dir = pe_testkit::fixture("gguf");
    for (name, file) in BEYOND {
        let t = reference(name)?;
        let gguf = dir.join(format!("{file}.gguf"));
        for start in ["100000", "200000"] {
            let want: Vec<String> = t[&format!("at{start}.generated_ids")]
                .to_dtype(DType::I64)?
                .flatten_all()?
                .to_vec1::<i64>()?
                .iter()
                .map(|i| i.to_string())
                .collect();
            assert_eq!(
                generate_ids(&gguf, start, "9")?,
                format!("ids: {}", want.join(" ")),
                "{name} at {start}"
            );
        }
    }
    Ok(())
}

/// `generate --model x.gguf`: the same `ids:` line as transformers' greedy ids, at position 0
/// (the 8 cached steps after the prompt) and at 20,000 (the first id after the prompt); for
/// Q8_0 files, transformers' with rounded activations (see `gguf_decoders_match_transformers_q8_0`).
#[test]
fn generate_takes_a_gguf_file() -> Result<()> {
    let dir = pe_testkit::fixture("gguf");
    for model in CASES {
        for weights in ["f32", "q8_0"] {
            let case = format!("{model}_{weights}");
            // Q8_0's ids are those of transformers with the same rounded activations.
            let t = match weights {
                "q8_0" => reference(&format!("{case}_act"))?,
                _ => reference(&case)?,
            };
            let gguf = dir.join(format!("{case}.gguf"));
            let ids_line = |offset: &str, new: &str| generate_ids(&gguf, offset, new);
            assert_eq!(ids_line("0", "8")?, recorded_ids(&t, 8)?, "{case}");
            let far = &t["far20000.logits"];
            let first = far
                .i((.., far.dim(1)? - 1.., ..))?
                .argmax(2)?
                .flatten_all()?
                .to_vec1::<u32>()?;
            assert_eq!(
                ids_line("20000", "1")?,
                format!("ids: {}", first[0]),
                "{case} at 20000"
            );
        }
    }
    Ok(())
}

/// Decode tokens/s on the Q8_0 Llama 3.1 fixture, `from_gguf` (`QMatMul`) and its dequantized
/// twin interleaved in one run (5 rounds of 256 cached greedy steps after the prompt; the
/// median round). Run with `cargo test --release -p pe-models --test gguf -- --ignored
/// --nocapture decode_speed`.
#[test]
#[ignore]
fn decode_speed_q8_0() -> Result<()> {
    let path = pe_testkit::fixture("gguf").join("llama31_q8_0.gguf");
    let mut models = [Load::Quantized, Load::Dequantized].map(|load| (load, load.model(&path)));
    let prompt = Tensor::new(
        &[[1u32, 87, 14, 101, 33, 59, 120, 7, 76, 45, 98, 23]],
        &Device::Cpu,
    )?;
    let steps = 256;
    let mut rates: [Vec<f64>; 2] = [vec![], vec![]];
    for _round in 0..5 {
        for (i, (_, model)) in models.iter_mut().enumerate() {
            let model = model.as_mut().map_err(|e| anyhow::anyhow!("{e}"))?;
            model.clear_cache();
            let pos = Tensor::arange(0u32, 12, &Device::Cpu)?.unsqueeze(0)?;
            let logits = model.forward(&prompt, &pos, None)?;
            let mut id = argmax(&logits)?[11];
            let start = std::time::Instant::now();
            for s in 0..steps {
                let ids = Tensor::new(&[[id]], &Device::Cpu)?;
                let pos = Tensor::new(&[[12 + s as u32]], &Device::Cpu)?;
                id = argmax(&model.forward(&ids, &pos, None)?)?[0];
            }
            rates[i].push(steps as f64 / start.elapsed().as_secs_f64());
        }
    }
    for (i, (load, _)) in models.iter().enumerate() {
        rates[i].sort_by(f64::total_cmp);
        println!(
            "{load:?}: {:.0} tokens/s (median of {:?})",
            rates[i][2], rates[i]
        );
    }
    Ok(())
}
