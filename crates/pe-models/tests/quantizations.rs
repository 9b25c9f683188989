//! Every quantization candle's `QMatMul` reads, through the GGUF decoder: a small random Llama
//! (rows of 256, as the K-quants' blocks need) written once in F32 and once per type by candle's
//! own quantizer and GGUF writer. Each file's decoder (`from_gguf`: quantized projections on
//! `QMatMul`, Q and K in the converter's adjacent-pair order) is held to its dense twin
//! (`from_gguf_dequantized`: the same rounded weights, dense, Q and K in transformers' order).
//! They differ by what `QMatMul` does besides the weights: it rounds its inputs to 8-bit
//! blocks for the quantized types.

use anyhow::Result;
use candle_core::quantized::gguf_file::{self, Value};
use candle_core::quantized::{GgmlDType, QTensor};
use candle_core::{DType, Device, Tensor};
use pe_models::LlamaFamily;

const HIDDEN: usize = 256;
const HEADS: usize = 4;
const KV_HEADS: usize = 2;
const FFN: usize = 256;
const LAYERS: usize = 2;
const VOCAB: usize = 96;

/// The model's tensors (GGUF names, candle shapes), seeded.
fn weights() -> Result<Vec<(String, Tensor)>> {
    let dev = Device::Cpu;
    let head = HIDDEN / HEADS;
    let mut shapes = vec![
        ("token_embd.weight".to_string(), vec![VOCAB, HIDDEN]),
        ("output_norm.weight".to_string(), vec![HIDDEN]),
        ("output.weight".to_string(), vec![VOCAB, HIDDEN]),
    ];
    for l in 0..LAYERS {
        for (name, shape) in [
            ("attn_norm", vec![HIDDEN]),
            ("ffn_norm", vec![HIDDEN]),
            ("attn_q", vec![HEADS * head, HIDDEN]),
            ("attn_k", vec![KV_HEADS * head, HIDDEN]),
            ("attn_v", vec![KV_HEADS * head, HIDDEN]),
            ("attn_output", vec![HIDDEN, HEADS * head]),
            ("ffn_gate", vec![FFN, HIDDEN]),
            ("ffn_up", vec![FFN, HIDDEN]),
            ("ffn_down", vec![HIDDEN, FFN]),
        ] {
            shapes.push((format!("blk.{l}.{name}.weight"), shape));
        }
    }
    // A small linear congruential generator: the same weights on every machine.
    let mut state = 0x2545_f491_u64;
    let mut next = move || {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        ((state >> 33) as f32 / (1u64 << 31) as f32) - 0.5
    };
    shapes
        .into_iter()
        .map(|(name, shape)| {
            let n: usize = shape.iter().product();
            let values: Vec<f32> = match shape.len() {
                // Norms near 1.
                1 => (0..n).map(|_| 1.0 + 0.2 * next()).collect(),
                _ => (0..n).map(|_| 0.25 * next()).collect(),
            };
            Ok((name, Tensor::from_vec(values, shape, &dev)?))
        })
        .collect()
}

/// The model as a GGUF file in `dir`, its matrices quantized to `dtype`.
fn write(dir: &std::path::Path, dtype: GgmlDType) -> Result<std::path::PathBuf> {
    let path = dir.join(format!("{dtype:?}.gguf"));
    let tensors = weights()?
        .into_iter()
        .map(|(name, t)| {
            let q = match t.rank() {
                1 => QTensor::quantize(&t, GgmlDType::F32)?,
                _ => QTensor::quantize(&t, dtype)?,
            };
            Ok((name, q))
        })
        .collect::<Result<Vec<_>>>()?;
    let u32s = [
        ("llama.embedding_length", HIDDEN),
        ("llama.feed_forward_length", FFN),
        ("llama.block_count", LAYERS),
        ("llama.attention.head_count", HEADS),
        ("llama.attention.head_count_kv", KV_HEADS),
        ("llama.context_length", 4096),
    ]
    .map(|(k, v)| (k, Value::U32(v as u32)));
    let mut metadata: Vec<(&str, Value)> = vec![
        ("general.architecture", Value::String("llama".into())),
        ("llama.rope.freq_base", Value::F32(10_000.0)),
        ("llama.attention.layer_norm_rms_epsilon", Value::F32(1e-5)),
    ];
    metadata.extend(u32s);
    let metadata: Vec<(&str, &Value)> = metadata.iter().map(|(k, v)| (*k, v)).collect();
    let tensors: Vec<(&str, &QTensor)> = tensors.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let mut file = std::fs::File::create(&path)?;
    gguf_file::write(&mut file, &metadata, &tensors)?;
    Ok(path)
}

/// Logits of both decoders of the file for a 7-token prompt at position 1000.
fn logits(path: &std::path::Path) -> Result<(Tensor, Tensor)> {
    let dev = Device::Cpu;
    let ids = Tensor::new(&[[3u32, 17, 42, 8, 91, 5, 60]], &dev)?;
    let pos = Tensor::new(&[[1000u32, 1001, 1002, 1003, 1004, 1005, 1006]], &dev)?;
    let mut q = LlamaFamily::from_gguf(path, DType::F32, &dev)?;
    let mut d = LlamaFamily::from_gguf_dequantized(path, DType::F32, &dev)?;
    Ok((q.forward(&ids, &pos, None)?, d.forward(&ids, &pos, None)?))
}

fn max_abs(t: &Tensor) -> Result<f32> {
    Ok(t.abs()?.flatten_all()?.max(0)?.to_scalar::<f32>()?)
}

#[test]
fn every_qmatmul_type_runs_and_holds_to_its_dense_twin() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let (_, reference) = logits(&write(dir.path(), GgmlDType::F32)?)?;
    let scale = max_abs(&reference)?;
    // (type, bound on |quantized - twin| / max |logit|): float types are dense in both (measured
    // up to 1.0e-6); the quantized ones round their inputs to Q8 blocks (Q8_K for the K-quants;
    // measured 1.5e-2 to 3.4e-2, where the types' own rounding moves the logits by 5e-2 to
    // 0.76). Q8_K is a matmul input type only: candle's QMatMul does not take it as weights.
    let cases = [
        (GgmlDType::F32, 1e-5),
        (GgmlDType::F16, 1e-5),
        (GgmlDType::BF16, 1e-5),
        (GgmlDType::Q4_0, 0.05),
        (GgmlDType::Q4_1, 0.05),
        (GgmlDType::Q5_0, 0.05),
        (GgmlDType::Q5_1, 0.05),
        (GgmlDType::Q8_0, 0.05),
        (GgmlDType::Q2K, 0.05),
        (GgmlDType::Q3K, 0.05),
        (GgmlDType::Q4K, 0.05),
        (GgmlDType::Q5K, 0.05),
        (GgmlDType::Q6K, 0.05),
    ];
    let mut failures = Vec::new();
    for (dtype, bound) in cases {
        let path = write(dir.path(), dtype)?;
        let (quantized, twin) = logits(&path)?;
        let to_twin = max_abs(&(&quantized - &twin)?)? / scale;
        // How far the type's rounding moved the weights: the twin against the F32 model.
        let rounding = max_abs(&(&twin - &reference)?)? / scale;
        println!("{dtype:?}: |quantized - twin| {to_twin:.2e}, |twin - f32| {rounding:.2e}");
        if to_twin.is_nan() || to_twin > bound {
            failures.push(format!("{dtype:?}: {to_twin:.3e} > {bound:.0e}"));
        }
    }
    assert!(failures.is_empty(), "{failures:?}");
    Ok(())
}
