//! [`GgufMeta`]: the reader of GGUF metadata values (llama.cpp's keys, as candle's
//! `gguf_file::Content` holds them) behind every GGUF reader of the workspace: the rope of
//! [`GgufRope`](crate::GgufRope), and pe-models' decoder sizes and tokenizer.
//!
//! A key is read as what it means, whatever GGUF type the writer chose: an integer of any of
//! GGUF's eight integer types (U8 to I64), a number (those, F32 or F64), a string, a bool, an
//! array. An absent key is `None`; a key of the wrong type, an integer out of the range asked
//! for (negative for a count, above `u32::MAX` for a `u32`) or a float that is not finite is an
//! error naming the key and its value (`Error::GgufKey`), and one element of an array is named by
//! its index. An F32 read as an f64 is the shortest decimal that rounds to it (`0.1`, not
//! `0.10000000149011612`): the number a `config.json` held.
//!
//! ```
//! use std::collections::HashMap;
//! use candle_core::quantized::gguf_file::{Content, Value, VersionedMagic};
//! use candle_pe_formats::Error;
//! use candle_pe_formats::GgufMeta;
//!
//! let metadata = HashMap::from([
//!     ("llama.block_count".to_string(), Value::U16(32)),
//!     ("llama.attention.head_count".into(), Value::Array(vec![Value::I32(32); 4])),
//!     ("llama.rope.freq_base".into(), Value::F32(500_000.0)),
//!     ("llama.attention.layer_norm_rms_epsilon".into(), Value::F32(1e-5)),
//!     ("tokenizer.ggml.eos_token_id".into(), Value::I64(-1)),
//! ]);
//! let content = Content {
//!     magic: VersionedMagic::GgufV3,
//!     metadata,
//!     tensor_infos: HashMap::new(),
//!     tensor_data_offset: 0,
//! };
//! let meta = GgufMeta::new(&content);
//! assert_eq!(meta.count("llama.block_count")?, Some(32));
//! // A per-layer array of equal counts is that count.
//! assert_eq!(meta.count("llama.attention.head_count")?, Some(32));
//! assert_eq!(meta.integers::<u32>("llama.attention.head_count")?, Some(vec![32; 4]));
//! assert_eq!(meta.float("llama.attention.layer_norm_rms_epsilon")?, Some(1e-5));
//! assert_eq!(meta.f64("llama.attention.layer_norm_rms_epsilon")?, Some(1e-5f32 as f64));
//! assert_eq!(meta.string("general.name")?, None);
//! // A negative id is an error naming the key and the value.
//! let err = meta.integer::<u32>("tokenizer.ggml.eos_token_id").unwrap_err();
//! assert!(matches!(err, Error::GgufKey { ref key, .. } if key == "tokenizer.ggml.eos_token_id"));
//! assert!(err.to_string().contains("I64(-1)"));
//! # Ok::<(), Error>(())
//! ```

use std::collections::HashMap;

use candle_core::quantized::gguf_file::{Content, Value};

use crate::{Error, Result};

/// The metadata of one GGUF file, read by key; errors name the key and its value.
#[derive(Clone, Copy, Debug)]
pub struct GgufMeta<'a> {
    metadata: &'a HashMap<String, Value>,
    /// Values laid over the file's (a rope override): `None` removes a key.
    overlay: Option<&'a HashMap<String, Option<Value>>>,
}

impl<'a> GgufMeta<'a> {
    /// The metadata of `content`.
    pub fn new(content: &'a Content) -> Self {
        Self {
            metadata: &content.metadata,
            overlay: None,
        }
    }

    /// The same metadata with `overlay`'s values in place of the file's (`None` removes the
    /// key), as llama.cpp's context parameters replace a file's values.
    pub(crate) fn with_overlay(self, overlay: &'a HashMap<String, Option<Value>>) -> Self {
        Self {
            overlay: Some(overlay),
            ..self
        }
    }

    /// The value of `key`, as stored (or as overlaid).
    pub fn value(&self, key: &str) -> Option<&'a Value> {
        match self.overlay.and_then(|o| o.get(key)) {
            Some(laid) => laid.as_ref(),
            None => self.metadata.get(key),
        }
    }

    /// Whether the file has `key`.
    pub fn has(&self, key: &str) -> bool {
        self.value(key).is_some()
    }

    /// A string key.
    pub fn string(&self, key: &str) -> Result<Option<&'a str>> {
        self.read(key, |v| match v {
            Value::String(s) => Some(s.as_str()),
            _ => None,
        })
        .map_err(|v| invalid(key, format!("must be a string, got {v:?}")))
    }

    /// A bool key.
    pub fn bool(&self, key: &str) -> Result<Option<bool>> {
        self.read(key, |v| match v {
            Value::Bool(b) => Some(*b),
            _ => None,
        })
        .map_err(|v| invalid(key, format!("must be a bool, got {v:?}")))
    }

    /// A number key (any integer type, F32, F64) as a finite f64; an F32 as the shortest
    /// decimal that rounds to it (`0.1`): the number a `config.json` held.
    pub fn float(&self, key: &str) -> Result<Option<f64>> {
        self.finite(key, number)
    }

    /// A number key as a finite f64 holding exactly what is stored (an F32 widened, `0.1f32` as
    /// `0.10000000149011612`): for using an F32 as llama.cpp does, or comparing its bits.
    pub fn f64(&self, key: &str) -> Result<Option<f64>> {
        self.finite(key, |v| match v {
            Value::F32(x) => Some(*x as f64),
            v => number(v),
        })
    }

    /// An integer key (any of GGUF's integer types) as a `T`; a value out of `T`'s range
    /// (negative for an unsigned `T`) is an error naming it.
    pub fn integer<T: TryFrom<i128>>(&self, key: &str) -> Result<Option<T>> {
        self.read(key, |v| integer(v).and_then(|n| T::try_from(n).ok()))
            .map_err(|v| invalid(key, must_fit::<T>(v)))
    }

    /// A count key: a non-negative integer, or an array of equal ones (a per-layer key whose
    /// layers agree, as llama.cpp writes head counts).
    pub fn count(&self, key: &str) -> Result<Option<usize>> {
        let one = |v: &Value| integer(v).and_then(|n| usize::try_from(n).ok());
        self.read(key, |v| match v {
            Value::Array(items) => {
                let counts: Option<Vec<usize>> = items.iter().map(one).collect();
                match counts.as_deref() {
                    Some([first, rest @ ..]) if rest.iter().all(|x| x == first) => Some(*first),
                    _ => None,
                }
            }
            v => one(v),
        })
        .map_err(|v| {
            invalid(
                key,
                format!("must be a non-negative integer (or an array of equal ones), got {v:?}"),
            )
        })
    }

    /// An array key, its elements as stored.
    pub fn array(&self, key: &str) -> Result<Option<&'a [Value]>> {
        self.read(key, |v| match v {
            Value::Array(items) => Some(items.as_slice()),
            _ => None,
        })
        .map_err(|v| invalid(key, format!("must be an array, got {}", short(v))))
    }

    /// An array of integers (a per-layer key), each a `T`.
    pub fn integers<T: TryFrom<i128>>(&self, key: &str) -> Result<Option<Vec<T>>> {
        self.elements(
            key,
            |v| integer(v).and_then(|n| T::try_from(n).ok()),
            must_fit::<T>,
        )
    }

    /// An array of numbers, each as an f32 (an F32 as stored, an F64 or an integer rounded).
    pub fn f32s(&self, key: &str) -> Result<Option<Vec<f32>>> {
        let one = |v: &Value| match v {
            Value::F32(x) => Some(*x),
            Value::F64(x) => Some(*x as f32),
            v => integer(v).map(|n| n as f32),
        };
        self.elements(key, one, |v| format!("must be a number, got {v:?}"))
    }

    /// An array of strings.
    pub fn strings(&self, key: &str) -> Result<Option<Vec<&'a str>>> {
        let one = |v: &'a Value| match v {
            Value::String(s) => Some(s.as_str()),
            _ => None,
        };
        self.elements(key, one, |v| format!("must be a string, got {v:?}"))
    }

    /// An array of bools.
    pub fn bools(&self, key: &str) -> Result<Option<Vec<bool>>> {
        let one = |v: &Value| match v {
            Value::Bool(b) => Some(*b),
            _ => None,
        };
        self.elements(key, one, |v| format!("must be a bool, got {v:?}"))
    }

    /// A number key through `read`, which must give a finite value.
    fn finite(&self, key: &str, read: impl FnOnce(&Value) -> Option<f64>) -> Result<Option<f64>> {
        let x = self
            .read(key, read)
            .map_err(|v| invalid(key, format!("must be a number, got {v:?}")))?;
        match x {
            Some(x) if !x.is_finite() => Err(invalid(key, format!("must be finite, got {x}"))),
            x => Ok(x),
        }
    }

    /// `key`'s value through `read`, `Err(value)` when `read` refuses it.
    fn read<T>(
        &self,
        key: &str,
        read: impl FnOnce(&'a Value) -> Option<T>,
    ) -> std::result::Result<Option<T>, &'a Value> {
        match self.value(key) {
            None => Ok(None),
            Some(v) => read(v).map(Some).ok_or(v),
        }
    }

    /// Each element of the array `key` through `read`; the first it refuses is an error naming
    /// the key, the element's index and `why(element)`.
    fn elements<T>(
        &self,
        key: &str,
        read: impl Fn(&'a Value) -> Option<T>,
        why: impl Fn(&Value) -> String,
    ) -> Result<Option<Vec<T>>> {
        let Some(items) = self.array(key)? else {
            return Ok(None);
        };
        let one = |(i, v): (usize, &'a Value)| {
            read(v).ok_or_else(|| invalid(key, format!("element {i}: {}", why(v))))
        };
        items
            .iter()
            .enumerate()
            .map(one)
            .collect::<Result<_>>()
            .map(Some)
    }
}

/// The error of a key whose value cannot be read.
fn invalid(key: &str, message: String) -> Error {
    Error::GgufKey {
        key: key.to_string(),
        message,
    }
}

/// What an integer read as a `T` must be.
fn must_fit<T>(v: &Value) -> String {
    format!(
        "must be an integer that fits {}, got {v:?}",
        std::any::type_name::<T>()
    )
}

/// A value for an error message: an array by its length and first element, not in full.
fn short(v: &Value) -> String {
    match v {
        Value::Array(items) if items.len() > 4 => {
            format!("an array of {} ({:?}, ...)", items.len(), items[0])
        }
        v => format!("{v:?}"),
    }
}

/// The integer a value holds, whatever its integer type; `None` for any other type.
fn integer(v: &Value) -> Option<i128> {
    Some(match v {
        Value::U8(x) => *x as i128,
        Value::I8(x) => *x as i128,
        Value::U16(x) => *x as i128,
        Value::I16(x) => *x as i128,
        Value::U32(x) => *x as i128,
        Value::I32(x) => *x as i128,
        Value::U64(x) => *x as i128,
        Value::I64(x) => *x as i128,
        _ => return None,
    })
}

/// The number a value holds, as f64 (an F32 as its shortest decimal); `None` for a non-number.
fn number(v: &Value) -> Option<f64> {
    match v {
        Value::F32(x) => Some(decimal(*x)),
        Value::F64(x) => Some(*x),
        v => integer(v).map(|n| n as f64),
    }
}

/// The shortest decimal that rounds to `v`: the number a `config.json` most likely held.
pub(crate) fn decimal(v: f32) -> f64 {
    format!("{v}").parse().unwrap_or(v as f64)
}
