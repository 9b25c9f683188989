//! `GgufMeta`, the one reader of GGUF metadata values: every integer type GGUF has, floats,
//! strings, bools and arrays, and errors that name the key and the value.

use std::collections::HashMap;

use candle_core::quantized::gguf_file::{Content, Value, VersionedMagic};
use candle_pe_formats::{Error, GgufMeta};

fn content(keys: Vec<(&str, Value)>) -> Content {
    Content {
        magic: VersionedMagic::GgufV3,
        metadata: keys.into_iter().map(|(k, v)| (k.to_string(), v)).collect(),
        tensor_infos: HashMap::new(),
        tensor_data_offset: 0,
    }
}

/// The key an error names, and its message.
fn named(err: Error) -> (String, String) {
    let message = err.to_string();
    match err {
        Error::GgufKey { key, .. } => (key, message),
        other => panic!("not a GgufKey error: {other}"),
    }
}

#[test]
fn every_integer_type_is_read() {
    let values = [
        Value::U8(7),
        Value::I8(7),
        Value::U16(7),
        Value::I16(7),
        Value::U32(7),
        Value::I32(7),
        Value::U64(7),
        Value::I64(7),
    ];
    for v in values {
        let c = content(vec![("k", v.clone())]);
        let meta = GgufMeta::new(&c);
        assert_eq!(meta.count("k").unwrap(), Some(7), "{v:?}");
        assert_eq!(meta.integer::<u8>("k").unwrap(), Some(7), "{v:?}");
        assert_eq!(meta.integer::<i64>("k").unwrap(), Some(7), "{v:?}");
        assert_eq!(meta.float("k").unwrap(), Some(7.0), "{v:?}");
        assert_eq!(meta.f64("k").unwrap(), Some(7.0), "{v:?}");
    }
    let c = content(vec![("k", Value::U64(u64::MAX))]);
    assert_eq!(
        GgufMeta::new(&c).integer::<u64>("k").unwrap(),
        Some(u64::MAX)
    );
}

#[test]
fn negative_and_out_of_range_integers_name_the_key_and_the_value() {
    let c = content(vec![
        ("neg", Value::I32(-1)),
        ("big", Value::U64(1 << 40)),
        ("huge", Value::U64(u64::MAX)),
    ]);
    let meta = GgufMeta::new(&c);
    let (key, message) = named(meta.count("neg").unwrap_err());
    assert_eq!(key, "neg");
    assert!(message.contains("I32(-1)"), "{message}");
    let (key, message) = named(meta.integer::<u32>("neg").unwrap_err());
    assert_eq!(key, "neg");
    assert!(
        message.contains("u32") && message.contains("I32(-1)"),
        "{message}"
    );
    let (key, message) = named(meta.integer::<u32>("big").unwrap_err());
    assert_eq!(key, "big");
    assert!(message.contains("U64(1099511627776)"), "{message}");
    // Above i64::MAX: not wrapped to a negative number.
    let (key, message) = named(meta.integer::<i64>("huge").unwrap_err());
    assert_eq!(key, "huge");
    assert!(message.contains("U64(18446744073709551615)"), "{message}");
    assert_eq!(
        meta.integer::<i128>("huge").unwrap(),
        Some(u64::MAX as i128)
    );
}

#[test]
fn floats_strings_bools_and_wrong_types() {
    let c = content(vec![
        ("f32", Value::F32(0.1)),
        ("f64", Value::F64(0.25)),
        ("nan", Value::F32(f32::NAN)),
        ("s", Value::String("llama".into())),
        ("b", Value::Bool(true)),
    ]);
    let meta = GgufMeta::new(&c);
    // An F32 as the shortest decimal, or widened exactly.
    assert_eq!(meta.float("f32").unwrap(), Some(0.1));
    assert_eq!(meta.f64("f32").unwrap(), Some(0.1f32 as f64));
    assert_eq!(meta.float("f64").unwrap(), Some(0.25));
    assert_eq!(meta.string("s").unwrap(), Some("llama"));
    assert_eq!(meta.bool("b").unwrap(), Some(true));
    assert_eq!(meta.string("absent").unwrap(), None);
    assert!(!meta.has("absent") && meta.has("s"));
    for (key, err) in [
        ("nan", meta.float("nan").unwrap_err()),
        ("nan", meta.f64("nan").unwrap_err()),
        ("s", meta.float("s").unwrap_err()),
        ("s", meta.count("s").unwrap_err()),
        ("b", meta.string("b").unwrap_err()),
        ("s", meta.bool("s").unwrap_err()),
        ("s", meta.array("s").unwrap_err()),
    ] {
        let (named_key, message) = named(err);
        assert_eq!(named_key, key, "{message}");
    }
}

#[test]
fn arrays_are_read_per_element_and_name_the_element() {
    let c = content(vec![
        ("heads", Value::Array(vec![Value::U32(8), Value::I16(8)])),
        ("mixed", Value::Array(vec![Value::U32(8), Value::U32(4)])),
        (
            "flags",
            Value::Array(vec![Value::Bool(true), Value::Bool(false)]),
        ),
        ("names", Value::Array(vec![Value::String("a".into())])),
        (
            "scores",
            Value::Array(vec![Value::F32(-1.5), Value::F64(2.0)]),
        ),
        ("bad", Value::Array(vec![Value::U8(1), Value::I8(-3)])),
    ]);
    let meta = GgufMeta::new(&c);
    // A per-layer array of equal counts is that count; unequal ones are not one count.
    assert_eq!(meta.count("heads").unwrap(), Some(8));
    assert_eq!(meta.integers::<usize>("mixed").unwrap(), Some(vec![8, 4]));
    assert_eq!(named(meta.count("mixed").unwrap_err()).0, "mixed");
    assert_eq!(meta.bools("flags").unwrap(), Some(vec![true, false]));
    assert_eq!(meta.strings("names").unwrap(), Some(vec!["a"]));
    assert_eq!(meta.f32s("scores").unwrap(), Some(vec![-1.5, 2.0]));
    assert_eq!(meta.array("flags").unwrap().map(<[Value]>::len), Some(2));
    let (key, message) = named(meta.integers::<u32>("bad").unwrap_err());
    assert_eq!(key, "bad");
    assert!(
        message.contains("element 1") && message.contains("I8(-3)"),
        "{message}"
    );
    assert_eq!(named(meta.strings("flags").unwrap_err()).0, "flags");
    assert_eq!(meta.integers::<i8>("bad").unwrap(), Some(vec![1, -3]));
}
