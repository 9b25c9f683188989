//! What the GGUF tests share: small GGUF files written in memory with candle's writer.

use std::io::Cursor;

use candle_core::quantized::gguf_file::{self, Content, Value};
use candle_core::quantized::{GgmlDType, QTensor};
use candle_core::{Device, Tensor};
use candle_pe_formats::{FromGguf, GgufRope};

/// A GGUF in memory with these keys (the architecture first) and f32 tensors.
pub fn file(
    arch: &str,
    keys: &[(&str, Value)],
    tensors: &[(&str, Vec<f32>)],
) -> (Content, Cursor<Vec<u8>>) {
    let mut metadata: Vec<(String, Value)> =
        vec![("general.architecture".into(), Value::String(arch.into()))];
    for (k, v) in keys {
        let key = if k.starts_with("general.") {
            k.to_string()
        } else {
            format!("{arch}.{k}")
        };
        metadata.push((key, v.clone()));
    }
    let qtensors: Vec<(String, QTensor)> = tensors
        .iter()
        .map(|(name, v)| {
            let t = Tensor::new(v.as_slice(), &Device::Cpu).unwrap();
            (
                name.to_string(),
                QTensor::quantize(&t, GgmlDType::F32).unwrap(),
            )
        })
        .collect();
    let mut bytes = Cursor::new(Vec::new());
    let meta_refs: Vec<(&str, &Value)> = metadata.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let tensor_refs: Vec<(&str, &QTensor)> =
        qtensors.iter().map(|(k, v)| (k.as_str(), v)).collect();
    gguf_file::write(&mut bytes, &meta_refs, &tensor_refs).unwrap();
    bytes.set_position(0);
    let content = Content::read(&mut bytes).unwrap();
    (content, bytes)
}

/// The rope of such a file.
pub fn read(
    arch: &str,
    keys: &[(&str, Value)],
    tensors: &[(&str, Vec<f32>)],
) -> candle_pe_formats::Result<GgufRope> {
    let (content, mut reader) = file(arch, keys, tensors);
    GgufRope::from_gguf(&content, &mut reader)
}

/// The keys every file needs: the width and the number of heads.
pub fn head(embedding: u32, heads: u32) -> Vec<(&'static str, Value)> {
    vec![
        ("embedding_length", Value::U32(embedding)),
        ("attention.head_count", Value::U32(heads)),
    ]
}
