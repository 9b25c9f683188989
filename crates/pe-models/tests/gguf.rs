//! The reference decoder read from GGUF files (`LlamaFamily::from_gguf`) against transformers'
//! logits on the same dequantized weights (fixtures written by `scripts/fixtures/gguf.py`):
//! Llama 3.1 (llama3 rope recovered from `rope_freqs`, Q/K permuted by the converter), Qwen2.5
//! YaRN and Phi-3 LongRoPE (f32 factors), each in F32 and Q8_0.
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

fn run(case: &str) -> Result<()> {
    let dir = pe_testkit::fixture("gguf");
    let t: HashMap<String, Tensor> =
        candle_core::safetensors::load(dir.join(format!("{case}.safetensors")), &Device::Cpu)?;
    let mut model =
        LlamaFamily::from_gguf(dir.join(format!("{case}.gguf")), DType::F32, &Device::Cpu)?;

    let prefill = model.forward(&t["prefill.input_ids"], &t["prefill.position_ids"], None)?;
    let d = max_diff(&prefill, &t["prefill.logits"])?;
    println!("{case:>20} prefill  max |diff| {d:.3e}");
    assert!(d <= TOL, "{case} prefill: {d}");
    assert_eq!(argmax(&prefill)?, argmax(&t["prefill.logits"])?, "{case}");

    let inputs = t["decode.input_ids"].to_dtype(DType::I64)?;
    let positions = t["decode.position_ids"].to_dtype(DType::I64)?;
    let want_ids = t["decode.generated_ids"]
        .to_dtype(DType::I64)?
        .to_vec2::<i64>()?;
    let mut worst = 0f32;
    for s in 0..inputs.dim(1)? {
        let logits = model.forward(
            &inputs.i((.., s..s + 1))?,
            &positions.i((.., s..s + 1))?,
            None,
        )?;
        worst = worst.max(max_diff(
            &logits,
            &t["decode.logits"].i((.., s..s + 1, ..))?,
        )?);
        let id = argmax(&logits)?[0] as i64;
        assert_eq!(id, want_ids[0][s + 1], "{case} decode step {s}");
    }
    println!("{case:>20} decode   max |diff| {worst:.3e}");
    assert!(worst <= TOL, "{case} decode: {worst}");

    model.clear_cache();
    let far = model.forward(&t["prefill.input_ids"], &t["far20000.position_ids"], None)?;
    let d = max_diff(&far, &t["far20000.logits"])?;
    let bound = if case.starts_with("phi3") {
        FAR_LONGROPE_BOUND
    } else {
        // Ours are shift-invariant: within TOL of transformers' prefill, and transformers' far
        // logits drift from its prefill by its f32 angles.
        assert!(
            max_diff(&far, &t["prefill.logits"])? <= TOL,
            "{case} far vs prefill"
        );
        TOL + max_diff(&t["far20000.logits"], &t["prefill.logits"])?
    };
    println!("{case:>20} far20000 max |diff| {d:.3e} (bound {bound:.1e})");
    assert!(d <= bound, "{case} far20000: {d} > {bound}");
    assert_eq!(
        argmax(&far)?,
        argmax(&t["far20000.logits"])?,
        "{case} far20000 greedy ids"
    );
    Ok(())
}

#[test]
fn gguf_decoders_match_transformers() -> Result<()> {
    for model in ["llama31", "qwen25_yarn", "phi3_longrope"] {
        for weights in ["f32", "q8_0"] {
            run(&format!("{model}_{weights}"))?;
        }
    }
    Ok(())
}

/// `generate --model x.gguf`: the same `ids:` line as transformers' greedy ids, at position 0
/// (the 8 cached steps after the prompt) and at 20,000 (the first id after the prompt).
#[test]
fn generate_takes_a_gguf_file() -> Result<()> {
    let dir = pe_testkit::fixture("gguf");
    let prompt = "1,87,14,101,33,59,120,7,76,45,98,23";
    for model in ["llama31", "qwen25_yarn", "phi3_longrope"] {
        for weights in ["f32", "q8_0"] {
            let case = format!("{model}_{weights}");
            let t: HashMap<String, Tensor> = candle_core::safetensors::load(
                dir.join(format!("{case}.safetensors")),
                &Device::Cpu,
            )?;
            let gguf = dir.join(format!("{case}.gguf"));
            let ids_line = |offset: &str, new: &str| -> Result<String> {
                let (mut out, mut err) = (Vec::new(), Vec::new());
                let argv = [
                    "generate",
                    "--model",
                    gguf.to_str().unwrap(),
                    "--prompt-ids",
                    prompt,
                    "--max-new",
                    new,
                    "--position-offset",
                    offset,
                ];
                let code = pe_models::generate_cli::main_with(argv, &gguf, &mut out, &mut err);
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
            };
            let want: Vec<String> = t["decode.generated_ids"]
                .to_dtype(DType::I64)?
                .to_vec2::<i64>()?[0]
                .iter()
                .take(8)
                .map(|i| i.to_string())
                .collect();
            assert_eq!(
                ids_line("0", "8")?,
                format!("ids: {}", want.join(" ")),
                "{case}"
            );
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
