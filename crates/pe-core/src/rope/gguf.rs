//! [`GgufRope`]: a model's rotary embedding read from the metadata and rope tensors of a GGUF
//! file (llama.cpp's format, as candle's `gguf_file::Content` holds it), in the same
//! [`RopeConfig`]s `from_hf_config` gives, and the pair layout of its Q and K weights.
//!
//! Keys are llama.cpp's, prefixed with `general.architecture` (`llama.rope.freq_base`); a
//! missing key takes llama.cpp's default, and so does a key whose 0 llama.cpp's converter writes
//! and llama.cpp reads as none (`context_length`, `rope.scaling.original_context_length`,
//! `rope.scaling.factor`, `attention.sliding_window`). Read:
//!
//! - `rope.dimension_count` (default: the head), `rope.freq_base` (default 10000),
//!   `rope.dimension_count_swa` and `rope.freq_base_swa` (sliding-window layers; Gemma 3's
//!   default base 10000), `context_length` (0: unknown), `attention.head_count`,
//!   `attention.key_length`, `embedding_length` (the head is `key_length`, or
//!   `embedding_length / head_count`), `attention.sliding_window` (0: no window);
//! - `rope.scaling.type` (`none`, `linear`, `yarn`, `longrope`; llama.cpp's default is linear,
//!   which without a factor is no scaling), `rope.scaling.factor` (0: none; the legacy
//!   `rope.scale_linear` when it is absent), `rope.scaling.attn_factor`,
//!   `rope.scaling.original_context_length` (default, and for 0, `context_length`),
//!   `rope.scaling.finetuned` (reported only);
//! - YaRN's `rope.scaling.yarn_beta_fast` (32), `yarn_beta_slow` (1), `yarn_attn_factor`
//!   (transformers' `attention_factor`), `yarn_log_multiplier` and `yarn_ext_factor` (only 1,
//!   transformers' YaRN, is accepted);
//! - `rope.scaling.alpha` (HunYuan's NTK alpha: the base times `alpha^(d/(d-2))`) and
//!   `rope.dimension_sections` (M-RoPE);
//! - `attention.temperature_scale` and `attention.temperature_length` (the query temperature of
//!   mistral3 and deepseek2 files, [`QueryScale::Llama4Scaling`]: refused by name on any other
//!   architecture, which llama.cpp does not scale), and `attention.key_length_swa` (refused when
//!   it differs from the head);
//! - the tensors `rope_freqs` (one divisor per pair), `rope_factors_long` and
//!   `rope_factors_short` (LongRoPE).
//!
//! Family quirks:
//!
//! - **Pair layout** follows llama.cpp's `llama_model_rope_type`: llama.cpp's converter permutes
//!   the Q and K rows of NORM architectures (llama, mistral3, deepseek2, glm4, granite, ...) so
//!   that rotating adjacent pairs ([`PairLayout::Interleaved`], candle's `rope_i`) reproduces
//!   transformers' `rotate_half`; NEOX architectures (qwen2/3, phi3, gemma 1-3, ...) rotate the
//!   two halves ([`PairLayout::Halves`], candle's `rope`); qwen2vl (M-RoPE) and qwen3vl
//!   (interleaved M-RoPE) rotate halves with `mrope_section` from `rope.dimension_sections`.
//! - **DeepSeek-2** files store `yarn_log_multiplier` as `0.1 * mscale_all_dim` (its converter
//!   multiplies, llama.cpp divides back) and use `mscale = mscale_all_dim`; elsewhere the value
//!   is `mscale_all_dim` as is, with `mscale = 1`. DeepSeek-2's rope is its `qk_rope` part: the
//!   head is `rope.dimension_count`.
//! - **Gemma 3**: global layers take `rope.freq_base` and the linear scaling; sliding layers
//!   (every layer but each sixth, or `attention.sliding_window_pattern`) take
//!   `rope.freq_base_swa` (default 10000) and no scaling.
//! - **No window**: a file whose `attention.sliding_window` is 0 (what the converter writes for
//!   a model without one) has no sliding layers, as llama.cpp reads it: every layer takes the
//!   one rope of `rope.freq_base` and the scaling, Gemma 3 included.
//!
//! Exactness: float keys are f32 in GGUF. A float key is read as the shortest decimal that
//! rounds to its f32 (what a `config.json` holds: `1000000.0`, `0.1`), so the tables are those of
//! the config. `rope_freqs` that equal, bit for bit, what llama.cpp's converter writes for a
//! llama3 parameter set (Llama 3.1: factor 8, low 1, high 4, original 8192; Llama 3.2: factor
//! 32; or the file's `rope.scaling.factor` and `original_context_length`) are read as
//! [`RopeType::Llama3`] with those parameters, the exact formula; other divisors are used as
//! stored, as a LongRoPE whose short and long factors are both the divisors and whose attention
//! factor is 1, and [`FreqFactors::Stored`] reports the frequency error their f32 rounding
//! implies. LongRoPE factors are used as stored (f32).
//!
//! ```
//! use std::collections::HashMap;
//! use candle_core::quantized::gguf_file::{Content, Value, VersionedMagic};
//! use candle_pe_core::{GgufRope, PairLayout, RopeConfig};
//!
//! let mut metadata = HashMap::new();
//! metadata.insert("general.architecture".into(), Value::String("qwen2".into()));
//! metadata.insert("qwen2.embedding_length".into(), Value::U32(896));
//! metadata.insert("qwen2.attention.head_count".into(), Value::U32(14));
//! metadata.insert("qwen2.rope.freq_base".into(), Value::F32(1_000_000.0));
//! let content = Content {
//!     magic: VersionedMagic::GgufV3,
//!     metadata,
//!     tensor_infos: HashMap::new(),
//!     tensor_data_offset: 0,
//! };
//! let mut no_tensors = std::io::Cursor::new(Vec::<u8>::new());
//! let rope = GgufRope::from_gguf(&content, &mut no_tensors)?;
//! assert_eq!(rope.layout, PairLayout::Halves);
//! let config = rope.configs.single().expect("one rope");
//! assert_eq!((config.head_dim, config.rope_theta), (64, 1e6));
//! assert_eq!(RopeConfig::from_gguf(&content, &mut no_tensors)?, *config);
//! # Ok::<(), candle_pe_core::Error>(())
//! ```

use std::collections::BTreeMap;
use std::io::{Read, Seek};

use candle_core::quantized::gguf_file::{Content, Value};
use candle_core::Device;

use super::config::{pattern_layer_types, RopeConfig, RopeConfigs, DEFAULT_ROPE_THETA};
use super::query_scale::QueryScale;
use super::types::{LinearScaling, Llama3, Longrope, RopeType, Yarn};
use crate::{Error, Result};

/// How a model's Q and K weights pair the channels that rotate together.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PairLayout {
    /// Adjacent channels `(2i, 2i + 1)`: llama.cpp's NORM rope, candle's `rope_i`
    /// (`RotaryEmbedding::with_interleaved(true)` in candle-pe-nn).
    Interleaved,
    /// Channels `i` and `i + rotary_dim / 2`: llama.cpp's NEOX rope (and M-RoPE), transformers'
    /// `rotate_half`, candle's `rope`.
    Halves,
}

impl PairLayout {
    /// Whether the pairs are adjacent channels (candle's `rope_i`).
    pub fn is_interleaved(self) -> bool {
        self == PairLayout::Interleaved
    }

    /// The layout of a GGUF's Q and K weights, by its `general.architecture`.
    pub fn from_gguf(content: &Content) -> Result<Self> {
        let arch = architecture(content)?;
        Ok(rope_kind(&arch)?.layout())
    }
}

/// What a GGUF's `rope_freqs` tensor turned out to be.
#[derive(Clone, Debug, PartialEq)]
pub enum FreqFactors {
    /// Bit for bit what llama.cpp's converter writes for these llama3 parameters: the tables use
    /// the exact llama3 formula.
    Llama3(Llama3),
    /// Divisors used as stored; `max_relative_error` bounds the relative error of each
    /// frequency that their f32 rounding implies (half an ulp over the value).
    Stored {
        /// The largest `ulp(f) / 2 / f` over the stored divisors `f`.
        max_relative_error: f64,
    },
}

/// Where one value of a resolved rope came from.
#[derive(Clone, Debug, PartialEq)]
pub struct ValueSource {
    /// The layer type it applies to (`full_attention`, `sliding_attention`), `None` for all.
    pub layer_type: Option<String>,
    /// The value, in the words of [`RopeConfig`] (`rope_theta`, `rotary_dim`, `factor`, ...).
    pub value: &'static str,
    /// The key or tensor it was read from, or `default (...)` when none was given.
    pub source: String,
}

/// A model's rotary embeddings read from a GGUF file, with the pair layout of its weights and
/// where each value came from (see the module docs for the keys read).
#[derive(Clone, Debug, PartialEq)]
pub struct GgufRope {
    /// `general.architecture`.
    pub architecture: String,
    /// The ropes per layer, as [`RopeConfigs::from_hf_config`] gives them.
    pub configs: RopeConfigs,
    /// The pair layout of the file's Q and K weights.
    pub layout: PairLayout,
    /// What `rope_freqs` was, when the file has it.
    pub freq_factors: Option<FreqFactors>,
    /// Where each value came from.
    pub sources: Vec<ValueSource>,
}

impl RopeConfigs {
    /// The rotary embeddings of a GGUF file: its metadata, and its rope tensors read through
    /// `reader` (the file `content` was read from). See [`GgufRope`].
    pub fn from_gguf<R: Read + Seek>(content: &Content, reader: &mut R) -> Result<Self> {
        Ok(GgufRope::from_gguf(content, reader)?.configs)
    }
}

impl RopeConfig {
    /// The rotary embedding of a GGUF file whose layers share one rope; a file with one rope per
    /// layer type (Gemma 3) is an error naming the key that makes it so.
    pub fn from_gguf<R: Read + Seek>(content: &Content, reader: &mut R) -> Result<Self> {
        let rope = GgufRope::from_gguf(content, reader)?;
        match rope.configs.single() {
            Some(config) => Ok(config.clone()),
            None => Err(Error::GgufKey {
                key: format!("{}.rope.freq_base_swa", rope.architecture),
                message: "the file sets one rope per layer type: read it with \
                          RopeConfigs::from_gguf, then for_layer_type or for_layer"
                    .into(),
            }),
        }
    }
}

/// llama.cpp's rope types (`llama_model_rope_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum RopeKind {
    Norm,
    Neox,
    Mrope,
    Imrope,
}

impl RopeKind {
    fn layout(self) -> PairLayout {
        match self {
            RopeKind::Norm => PairLayout::Interleaved,
            _ => PairLayout::Halves,
        }
    }
}

/// Architectures whose converter permutes Q and K for adjacent-pair rotation (llama.cpp NORM).
/// Mistral and Mixtral checkpoints convert as `llama`.
const NORM: &[&str] = &[
    "llama",
    "llama4",
    "deci",
    "mistral3",
    "baichuan",
    "starcoder",
    "internlm2",
    "minicpm",
    "xverse",
    "command-r",
    "cohere2",
    "olmo",
    "arctic",
    "deepseek",
    "deepseek2",
    "plm",
    "chatglm",
    "glm4",
    "granite",
    "granitemoe",
    "chameleon",
    "bailingmoe",
    "smollm3",
    "arcee",
    "ernie4_5",
    "ernie4_5-moe",
];

/// Architectures that rotate the two halves of the rotated part (llama.cpp NEOX).
const NEOX: &[&str] = &[
    "falcon",
    "grok",
    "dbrx",
    "bert",
    "nomic-bert",
    "stablelm",
    "bitnet",
    "qwen",
    "qwen2",
    "qwen2moe",
    "qwen3",
    "qwen3moe",
    "olmo2",
    "olmoe",
    "phi2",
    "phi3",
    "phimoe",
    "plamo",
    "gemma",
    "gemma2",
    "gemma3",
    "gemma3n",
    "starcoder2",
    "openelm",
    "gptneox",
    "codeshell",
    "orion",
    "nemotron",
    "exaone",
    "exaone4",
    "minicpm3",
    "dots1",
    "hunyuan-moe",
    "hunyuan-dense",
    "glm4moe",
    "gpt-oss",
    "seed_oss",
];

/// The rope type llama.cpp gives `arch`; `glm4` is M-RoPE when it has dimension sections (see
/// [`read`]).
fn rope_kind(arch: &str) -> Result<RopeKind> {
    match arch {
        "qwen2vl" => Ok(RopeKind::Mrope),
        "qwen3vl" | "qwen3vlmoe" => Ok(RopeKind::Imrope),
        a if NORM.contains(&a) => Ok(RopeKind::Norm),
        a if NEOX.contains(&a) => Ok(RopeKind::Neox),
        _ => Err(Error::GgufKey {
            key: "general.architecture".into(),
            message: format!(
                "architecture {arch:?} is not one whose rope layout this crate knows \
                 (llama.cpp's NORM: {}; NEOX: {}; M-RoPE: qwen2vl, qwen3vl, qwen3vlmoe)",
                NORM.join(", "),
                NEOX.join(", ")
            ),
        }),
    }
}

fn architecture(content: &Content) -> Result<String> {
    const KEY: &str = "general.architecture";
    match content.metadata.get(KEY) {
        Some(Value::String(s)) => Ok(s.clone()),
        Some(other) => Err(Error::GgufKey {
            key: KEY.into(),
            message: format!("must be a string, got {other:?}"),
        }),
        None => Err(Error::GgufMissing {
            key: KEY.into(),
            needed_by: "every key is prefixed with it",
        }),
    }
}

/// The shortest decimal that rounds to `v`: the number a `config.json` most likely held.
fn decimal(v: f32) -> f64 {
    format!("{v}").parse().unwrap_or(v as f64)
}

/// The shortest decimal `m` whose `0.1 * m` (in f64, as DeepSeek-2's converter computes it)
/// rounds to the stored `v`: the decimal of `v` with its point moved one place, when that
/// holds; else `v / 0.1` in f32, as llama.cpp divides it.
fn tenfold(v: f32) -> f64 {
    let text = format!("{v}");
    let shifted = match text.split_once('.') {
        Some((int, frac)) => {
            let (first, rest) = frac.split_at(frac.len().min(1));
            format!("{int}{first:0<1}.{rest}0")
        }
        None => format!("{text}0"),
    };
    match shifted.parse::<f64>() {
        Ok(m) if ((0.1 * m) as f32).to_bits() == v.to_bits() => m,
        _ => decimal(v / 0.1f32),
    }
}

/// The metadata of one file, read by key suffix, recording where each value came from.
struct Meta<'a> {
    content: &'a Content,
    arch: String,
    sources: Vec<ValueSource>,
}

impl Meta<'_> {
    fn key(&self, suffix: &str) -> String {
        format!("{}.{suffix}", self.arch)
    }

    fn raw(&self, suffix: &str) -> Option<&Value> {
        self.content.metadata.get(&self.key(suffix))
    }

    fn has(&self, suffix: &str) -> bool {
        self.raw(suffix).is_some()
    }

    fn invalid(&self, suffix: &str, message: String) -> Error {
        Error::GgufKey {
            key: self.key(suffix),
            message,
        }
    }

    /// A number key, as f64 (an f32 as its shortest decimal).
    fn float(&self, suffix: &str) -> Result<Option<f64>> {
        let Some(v) = self.raw(suffix) else {
            return Ok(None);
        };
        let x = match v {
            Value::F32(x) => decimal(*x),
            Value::F64(x) => *x,
            Value::U8(x) => *x as f64,
            Value::I8(x) => *x as f64,
            Value::U16(x) => *x as f64,
            Value::I16(x) => *x as f64,
            Value::U32(x) => *x as f64,
            Value::I32(x) => *x as f64,
            Value::U64(x) => *x as f64,
            Value::I64(x) => *x as f64,
            other => return Err(self.invalid(suffix, format!("must be a number, got {other:?}"))),
        };
        if !x.is_finite() {
            return Err(self.invalid(suffix, format!("must be finite, got {x}")));
        }
        Ok(Some(x))
    }

    /// The f32 a float key holds, bit for bit (for comparing with what a converter computed).
    fn float_bits(&self, suffix: &str) -> Option<f32> {
        match self.raw(suffix) {
            Some(Value::F32(x)) => Some(*x),
            Some(Value::F64(x)) => Some(*x as f32),
            _ => None,
        }
    }

    /// A count key: a non-negative integer (an array of equal ones, as per-layer head counts are
    /// written, is that integer).
    fn count(&self, suffix: &str) -> Result<Option<usize>> {
        let Some(v) = self.raw(suffix) else {
            return Ok(None);
        };
        let one = |v: &Value| -> Option<usize> {
            match v {
                Value::U8(x) => Some(*x as usize),
                Value::U16(x) => Some(*x as usize),
                Value::U32(x) => Some(*x as usize),
                Value::U64(x) => usize::try_from(*x).ok(),
                Value::I8(x) => usize::try_from(*x).ok(),
                Value::I16(x) => usize::try_from(*x).ok(),
                Value::I32(x) => usize::try_from(*x).ok(),
                Value::I64(x) => usize::try_from(*x).ok(),
                _ => None,
            }
        };
        let n = match v {
            Value::Array(items) => {
                let counts: Option<Vec<usize>> = items.iter().map(one).collect();
                match counts.as_deref() {
                    Some([first, rest @ ..]) if rest.iter().all(|x| x == first) => Some(*first),
                    _ => None,
                }
            }
            v => one(v),
        };
        n.map(Some).ok_or_else(|| {
            self.invalid(
                suffix,
                format!("must be a non-negative integer (or an array of equal ones), got {v:?}"),
            )
        })
    }

    /// A count key whose 0 llama.cpp's converter writes, and llama.cpp reads, as none: `None`
    /// when absent or 0.
    fn count_or_none(&self, suffix: &str) -> Result<Option<usize>> {
        Ok(self.count(suffix)?.filter(|&n| n > 0))
    }

    /// `default (what)`, saying so when the key is there as 0 (none, see [`Self::count_or_none`]).
    fn default_source(&self, suffix: &str, what: &str) -> String {
        match self.count(suffix) {
            Ok(Some(0)) => format!("default ({what}; {} = 0 is none)", self.key(suffix)),
            _ => format!("default ({what})"),
        }
    }

    fn string(&self, suffix: &str) -> Result<Option<String>> {
        match self.raw(suffix) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(other) => Err(self.invalid(suffix, format!("must be a string, got {other:?}"))),
        }
    }

    fn note(&mut self, layer_type: Option<&str>, value: &'static str, source: String) {
        self.sources.push(ValueSource {
            layer_type: layer_type.map(str::to_string),
            value,
            source,
        });
    }

    /// Records `value` as read from `suffix`, or as `default` when the key is absent.
    fn record_key_or(&mut self, value: &'static str, suffix: &str, default: &str) {
        let source = if self.has(suffix) {
            self.key(suffix)
        } else {
            format!("default ({default})")
        };
        self.note(None, value, source);
    }

    /// Records `value` as read from the count key `suffix`, or as `default` when it is absent or
    /// 0 (see [`Self::count_or_none`]).
    fn record_count_or(&mut self, value: &'static str, suffix: &str, default: &str) {
        let source = match self.count_or_none(suffix) {
            Ok(Some(_)) => self.key(suffix),
            _ => self.default_source(suffix, default),
        };
        self.note(None, value, source);
    }
}

/// A tensor of the file, by its name with or without `.weight`, as f32 values.
fn tensor<R: Read + Seek>(
    content: &Content,
    reader: &mut R,
    name: &str,
) -> Result<Option<(String, Vec<f32>)>> {
    let full = format!("{name}.weight");
    let key = if content.tensor_infos.contains_key(&full) {
        full
    } else if content.tensor_infos.contains_key(name) {
        name.to_string()
    } else {
        return Ok(None);
    };
    let mut read = || -> candle_core::Result<Vec<f32>> {
        content
            .tensor(reader, &key, &Device::Cpu)?
            .dequantize(&Device::Cpu)?
            .flatten_all()?
            .to_vec1::<f32>()
    };
    match read() {
        Ok(values) => Ok(Some((key, values))),
        Err(e) => Err(Error::GgufKey {
            key,
            message: format!("cannot be read: {e}"),
        }),
    }
}

/// Checks a per-pair tensor's length and values.
fn check_factors(name: &str, values: &[f32], rotary_dim: usize, dim_key: &str) -> Result<()> {
    if values.len() != rotary_dim / 2 {
        return Err(Error::GgufConflict {
            key: name.to_string(),
            value: format!("{} numbers", values.len()),
            other: dim_key.to_string(),
            other_value: rotary_dim.to_string(),
            why: "it needs one number per rotated pair, rotary_dim / 2",
        });
    }
    if let Some((i, v)) = values
        .iter()
        .enumerate()
        .find(|(_, v)| !(v.is_finite() && **v > 0.0))
    {
        return Err(Error::GgufKey {
            key: name.to_string(),
            message: format!("element {i} must be finite and > 0, got {v}"),
        });
    }
    Ok(())
}

/// The two f32 values around `x` (one when `x` is an f32): the results a faithfully rounded f32
/// power may give.
fn f32_neighbors(x: f64) -> [f32; 2] {
    let f = x as f32;
    let step = |f: f32, up: bool| {
        let bits = f.to_bits();
        f32::from_bits(if up { bits + 1 } else { bits - 1 })
    };
    match (f as f64).partial_cmp(&x) {
        Some(std::cmp::Ordering::Less) => [f, step(f, true)],
        Some(std::cmp::Ordering::Greater) => [step(f, false), f],
        _ => [f, f],
    }
}

/// The divisor llama.cpp's converter writes for pair `i` of a llama3 rope, given its f32 power
/// `base^(2i/head_dim)`: the converter's own f32 arithmetic (torch f32 tensors, Python scalars
/// rounded to f32), step for step.
fn converter_llama3_divisor(power: f32, p: &Llama3) -> f32 {
    let original = p.original_max_position_embeddings as f64;
    let high_wavelen = (original / p.high_freq_factor) as f32;
    let low_wavelen = (original / p.low_freq_factor) as f32;
    let freq = 1.0f32 / power;
    // Python's `2 * math.pi / freq` on a tensor is `freq.reciprocal() * (2 pi)`.
    let wavelen = (1.0f32 / freq) * (2.0 * std::f64::consts::PI) as f32;
    if wavelen < high_wavelen {
        1.0
    } else if wavelen > low_wavelen {
        p.factor as f32
    } else {
        let smooth = ((1.0f32 / wavelen) * original as f32 - p.low_freq_factor as f32)
            / (p.high_freq_factor - p.low_freq_factor) as f32;
        1.0f32 / ((1.0f32 - smooth) / p.factor as f32 + smooth)
    }
}

/// Whether `stored` is, bit for bit, what llama.cpp's converter writes for the llama3
/// parameters `p`, heads of `head_dim` and base `base`. Its f32 power (torch's) is within an ulp
/// of the exact one: either neighbor is accepted, pair by pair.
fn is_converter_llama3(stored: &[f32], base: f64, head_dim: usize, p: &Llama3) -> bool {
    if head_dim < 2 || stored.len() != head_dim / 2 || p.high_freq_factor <= p.low_freq_factor {
        return false;
    }
    stored.iter().enumerate().all(|(i, s)| {
        let exponent = (2 * i) as f32 / head_dim as f32;
        f32_neighbors(base.powf(exponent as f64))
            .iter()
            .any(|&power| converter_llama3_divisor(power, p).to_bits() == s.to_bits())
    })
}

/// The largest relative error (half an ulp over the value) of f32 numbers.
fn f32_relative_error(values: &[f32]) -> f64 {
    values
        .iter()
        .map(|&v| {
            let next = f32::from_bits(v.to_bits() + 1);
            (next as f64 - v as f64) / 2.0 / v as f64
        })
        .fold(0.0, f64::max)
}

/// The llama3 parameter sets `rope_freqs` is tried against: the file's own factor and original
/// context when it gives them, then Llama 3.1's and Llama 3.2's.
fn llama3_candidates(factor: Option<f64>, original: Option<usize>) -> Vec<Llama3> {
    let set = |factor: f64, original: usize| Llama3 {
        factor,
        low_freq_factor: 1.0,
        high_freq_factor: 4.0,
        original_max_position_embeddings: original,
    };
    let mut candidates = Vec::new();
    if factor.is_some() || original.is_some() {
        candidates.push(set(factor.unwrap_or(8.0), original.unwrap_or(8192)));
    }
    candidates.extend([set(8.0, 8192), set(32.0, 8192)]);
    candidates
}

impl GgufRope {
    /// Reads the rope of a GGUF file: its metadata from `content`, its rope tensors through
    /// `reader` (the file `content` was read from).
    pub fn from_gguf<R: Read + Seek>(content: &Content, reader: &mut R) -> Result<Self> {
        read(content, reader)
    }
}

/// The scaling of the full-attention (or only) layers, before the rope tensors are seen.
enum Scaling {
    None,
    Linear(f64),
    Yarn,
    Longrope,
}

fn read<R: Read + Seek>(content: &Content, reader: &mut R) -> Result<GgufRope> {
    let arch = architecture(content)?;
    let mut kind = rope_kind(&arch)?;
    let mut m = Meta {
        content,
        arch: arch.clone(),
        sources: Vec::new(),
    };
    let dim_key = m.key("rope.dimension_count");

    // The head, and its rotated part.
    let rotary_given = m.count("rope.dimension_count")?;
    let head_dim = if arch == "deepseek2" {
        // The rope covers DeepSeek's qk_rope part, which is the whole of its rotated head.
        m.note(None, "head_dim", dim_key.clone());
        rotary_given.ok_or_else(|| Error::GgufMissing {
            key: dim_key.clone(),
            needed_by: "DeepSeek-2's rope covers its qk_rope part, whose width it gives",
        })?
    } else if let Some(k) = m.count("attention.key_length")? {
        m.note(None, "head_dim", m.key("attention.key_length"));
        k
    } else {
        let embedding = m.count("embedding_length")?;
        let heads = m.count("attention.head_count")?;
        match (embedding, heads) {
            (Some(e), Some(h)) if h > 0 => {
                let source = format!(
                    "{} / {}",
                    m.key("embedding_length"),
                    m.key("attention.head_count")
                );
                m.note(None, "head_dim", source);
                e / h
            }
            (Some(_), Some(_)) => {
                return Err(m.invalid("attention.head_count", "must be >= 1, got 0".into()))
            }
            (None, _) => {
                return Err(Error::GgufMissing {
                    key: m.key("embedding_length"),
                    needed_by: "the head width is embedding_length / head_count when \
                                attention.key_length is absent",
                })
            }
            (_, None) => {
                return Err(Error::GgufMissing {
                    key: m.key("attention.head_count"),
                    needed_by: "the head width is embedding_length / head_count when \
                                attention.key_length is absent",
                })
            }
        }
    };
    let rotary_dim = rotary_given.unwrap_or(head_dim);
    m.record_key_or("rotary_dim", "rope.dimension_count", "the head");
    check_rotary(&m, "rope.dimension_count", rotary_dim, head_dim)?;
    // A head of their own on the sliding layers is not one these configs hold.
    if let Some(swa_head) = m.count("attention.key_length_swa")? {
        if swa_head != head_dim {
            return Err(m.invalid(
                "attention.key_length_swa",
                format!(
                    "{swa_head} differs from the head ({head_dim}): a head width of its own on \
                     the sliding layers is not read here"
                ),
            ));
        }
    }

    // The base.
    let mut theta = m.float("rope.freq_base")?.unwrap_or(DEFAULT_ROPE_THETA);
    m.record_key_or("rope_theta", "rope.freq_base", "10000");
    if theta <= 0.0 {
        return Err(m.invalid("rope.freq_base", format!("must be > 0, got {theta}")));
    }
    if let Some(alpha) = m.float("rope.scaling.alpha")? {
        if alpha <= 0.0 {
            return Err(m.invalid("rope.scaling.alpha", format!("must be > 0, got {alpha}")));
        }
        if alpha != 1.0 {
            let d = rotary_dim as f64;
            if rotary_dim <= 2 {
                return Err(m.invalid(
                    "rope.scaling.alpha",
                    format!("needs a rotary dim above 2, got {rotary_dim}"),
                ));
            }
            theta *= alpha.powf(d / (d - 2.0));
            // One source for the value: the product replaces the plain base's.
            m.sources.retain(|s| s.value != "rope_theta");
            let source = format!(
                "{} * {}^(d/(d-2)) (HunYuan NTK alpha)",
                m.key("rope.freq_base"),
                m.key("rope.scaling.alpha")
            );
            m.note(None, "rope_theta", source);
        }
    }
    // llama.cpp reads a context_length of 0 as unknown (the user's context must be given).
    let context = m.count_or_none("context_length")?;
    m.record_count_or("max_position_embeddings", "context_length", "none");
    if let Some(Value::Bool(b)) = m.raw("rope.scaling.finetuned") {
        let source = format!("{} = {b} (reported only)", m.key("rope.scaling.finetuned"));
        m.note(None, "finetuned", source);
    }

    // M-RoPE sections.
    let mut mrope_section = None;
    if let Some(v) = m.raw("rope.dimension_sections") {
        let key = m.key("rope.dimension_sections");
        let sections: Option<Vec<usize>> = match v {
            Value::Array(items) => items
                .iter()
                .map(|x| match x {
                    Value::U32(x) => Some(*x as usize),
                    Value::I32(x) => usize::try_from(*x).ok(),
                    Value::U64(x) => usize::try_from(*x).ok(),
                    Value::I64(x) => usize::try_from(*x).ok(),
                    _ => None,
                })
                .collect(),
            _ => None,
        };
        let Some(mut sections) = sections else {
            return Err(Error::GgufKey {
                key,
                message: format!("must be an array of non-negative integers, got {v:?}"),
            });
        };
        let used = sections.iter().any(|&s| s > 0);
        if arch == "glm4" && used {
            kind = RopeKind::Mrope;
        }
        if matches!(kind, RopeKind::Mrope | RopeKind::Imrope) {
            if sections.len() == 4 && sections[3] != 0 {
                return Err(Error::GgufKey {
                    key,
                    message: format!(
                        "a fourth section ({}) is for vision positions, which text M-RoPE does \
                         not take",
                        sections[3]
                    ),
                });
            }
            sections.truncate(3);
            let sum: usize = sections.iter().sum();
            if sections.len() != 3 || sum != rotary_dim / 2 {
                return Err(Error::GgufConflict {
                    key,
                    value: format!("{sections:?}"),
                    other: dim_key.clone(),
                    other_value: rotary_dim.to_string(),
                    why: "the t, h and w sections must add up to rotary_dim / 2",
                });
            }
            m.note(None, "mrope_section", m.key("rope.dimension_sections"));
            mrope_section = Some(sections);
        }
    }
    if matches!(kind, RopeKind::Mrope | RopeKind::Imrope) && mrope_section.is_none() {
        return Err(Error::GgufMissing {
            key: m.key("rope.dimension_sections"),
            needed_by: "M-RoPE architectures (qwen2vl, qwen3vl) split the pairs by it",
        });
    }

    // The scaling: type and factor. The sources noted from here on are the scaling's.
    let scaling_sources = m.sources.len();
    let factor = match (
        m.float("rope.scaling.factor")?,
        m.float("rope.scale_linear")?,
    ) {
        (Some(a), Some(b)) if a != 0.0 && b != 0.0 && a != b => {
            return Err(Error::GgufConflict {
                key: m.key("rope.scaling.factor"),
                value: a.to_string(),
                other: m.key("rope.scale_linear"),
                other_value: b.to_string(),
                why: "both give the scaling factor",
            })
        }
        (Some(a), _) if a != 0.0 => {
            m.note(None, "factor", m.key("rope.scaling.factor"));
            Some(a)
        }
        // llama.cpp reads the legacy key only when rope.scaling.factor is absent.
        (None, Some(b)) if b != 0.0 => {
            m.note(None, "factor", m.key("rope.scale_linear"));
            Some(b)
        }
        // llama.cpp reads a factor of 0 as no factor.
        _ => None,
    };
    if let Some(f) = factor {
        if f <= 0.0 {
            return Err(m.invalid("rope.scaling.factor", format!("must be > 0, got {f}")));
        }
    }
    let has_long = content
        .tensor_infos
        .contains_key("rope_factors_long.weight")
        || content.tensor_infos.contains_key("rope_factors_long");
    let scaling = match m.string("rope.scaling.type")?.as_deref() {
        Some("none") => Scaling::None,
        Some("linear") => Scaling::Linear(factor.unwrap_or(1.0)),
        Some("yarn") => Scaling::Yarn,
        Some("longrope") => Scaling::Longrope,
        Some(other) => {
            return Err(m.invalid(
                "rope.scaling.type",
                format!("{other:?} is not one of none, linear, yarn, longrope"),
            ))
        }
        // llama.cpp's default type is linear; Phi-3 files mark LongRoPE by its tensors alone.
        None if has_long => Scaling::Longrope,
        None => Scaling::Linear(factor.unwrap_or(1.0)),
    };
    let type_source = if m.has("rope.scaling.type") {
        m.key("rope.scaling.type")
    } else if has_long {
        "tensor rope_factors_long".to_string()
    } else {
        "default (llama.cpp: linear, no scaling without a factor)".to_string()
    };
    m.note(None, "rope_type", type_source);

    let original_key = "rope.scaling.original_context_length";
    // llama.cpp reads 0 as none: its YaRN and LongRoPE fall back to context_length.
    let original = m.count_or_none(original_key)?;

    let mut freq_factors = None;
    let rope_type = match scaling {
        Scaling::None => RopeType::Default,
        Scaling::Linear(1.0) => RopeType::Default,
        Scaling::Linear(f) => RopeType::Linear(LinearScaling { factor: f }),
        Scaling::Yarn => read_yarn(&mut m, factor, original, context)?,
        Scaling::Longrope => {
            read_longrope(&mut m, reader, rotary_dim, &dim_key, original, context)?
        }
    };

    // rope_freqs: llama3 divisors, or any stored divisors.
    let rope_type = match tensor(content, reader, "rope_freqs")? {
        None => rope_type,
        Some((name, values)) => {
            if rope_type != RopeType::Default {
                return Err(Error::GgufConflict {
                    key: name,
                    value: format!("{} divisors", values.len()),
                    other: m.key("rope.scaling.type"),
                    other_value: rope_type.name().to_string(),
                    why: "per-pair divisors on top of another scaling are not a transformers \
                          rope type",
                });
            }
            check_factors(&name, &values, rotary_dim, &dim_key)?;
            // The tensor, not the (absent) scaling type, gives the rope type.
            m.sources.retain(|s| s.value != "rope_type");
            let candidates = llama3_candidates(factor, original);
            match candidates
                .into_iter()
                .find(|p| is_converter_llama3(&values, theta, rotary_dim, p))
            {
                Some(p) => {
                    m.note(
                        None,
                        "rope_type",
                        format!(
                            "tensor {name}: bit for bit llama.cpp's converter output for llama3 \
                             factor {}, low {}, high {}, original {}",
                            p.factor,
                            p.low_freq_factor,
                            p.high_freq_factor,
                            p.original_max_position_embeddings
                        ),
                    );
                    freq_factors = Some(FreqFactors::Llama3(p));
                    RopeType::Llama3(p)
                }
                None => {
                    let max_relative_error = f32_relative_error(&values);
                    m.note(
                        None,
                        "rope_type",
                        format!(
                            "tensor {name}: divisors used as stored (relative frequency error \
                             <= {max_relative_error:.2e})"
                        ),
                    );
                    freq_factors = Some(FreqFactors::Stored { max_relative_error });
                    let divisors: Vec<f64> = values.iter().map(|&v| v as f64).collect();
                    RopeType::Longrope(Longrope {
                        short_factor: divisors.clone(),
                        long_factor: divisors,
                        factor: Some(1.0),
                        original_max_position_embeddings: Some(context.unwrap_or(1).max(1)),
                        attention_factor: Some(1.0),
                        short_mscale: None,
                        long_mscale: None,
                    })
                }
            }
        }
    };

    let full = RopeConfig {
        head_dim,
        rope_theta: theta,
        partial_rotary_factor: rotary_factor(rotary_dim, head_dim),
        max_position_embeddings: context,
        rope_type,
        mrope_section,
        mrope_interleaved: kind == RopeKind::Imrope,
        query_scale: read_query_temperature(&mut m)?,
        // The pair layout of a GGUF file's weights is its own (`PairLayout`), and llama.cpp's
        // converter does not write DeepSeek's rope_interleave.
        ..RopeConfig::new(head_dim, theta)
    };

    // Sliding-window layers with their own rope. llama.cpp's converter writes a window of 0 for
    // a model without one, and llama.cpp reads it so: no sliding layers, one rope for all.
    let is_gemma3 = arch == "gemma3";
    let swa_keys = m.has("rope.freq_base_swa") || m.has("rope.dimension_count_swa");
    let windowless = matches!(m.count("attention.sliding_window"), Ok(Some(0)));
    if windowless && (is_gemma3 || swa_keys) {
        let source = format!(
            "{} = 0: no sliding layers, one rope for every layer (as llama.cpp reads it)",
            m.key("attention.sliding_window")
        );
        m.note(None, "layer_types", source);
    }
    let configs = if (is_gemma3 || swa_keys) && !windowless {
        let layer_types = read_layer_types(&m, is_gemma3)?;
        let swa_theta =
            m.float("rope.freq_base_swa")?
                .unwrap_or(if is_gemma3 { 10_000.0 } else { theta });
        if swa_theta <= 0.0 {
            return Err(m.invalid(
                "rope.freq_base_swa",
                format!("must be > 0, got {swa_theta}"),
            ));
        }
        let swa_rotary = m.count("rope.dimension_count_swa")?.unwrap_or(rotary_dim);
        check_rotary(&m, "rope.dimension_count_swa", swa_rotary, head_dim)?;
        // Each value once per layer type: what the sliding layers take otherwise (their base,
        // their width, and on Gemma 3 the whole scaling) is the full layers' own, and the
        // sliding layers name only keys the file has.
        let full_source = |value: &str| {
            m.sources
                .iter()
                .find(|s| s.layer_type.is_none() && s.value == value)
                .map(|s| s.source.clone())
                .unwrap_or_default()
        };
        let base_source = if m.has("rope.freq_base_swa") {
            m.key("rope.freq_base_swa")
        } else if is_gemma3 {
            "default (Gemma 3: 10000)".into()
        } else {
            full_source("rope_theta")
        };
        let dim_source = if m.has("rope.dimension_count_swa") {
            m.key("rope.dimension_count_swa")
        } else {
            full_source("rotary_dim")
        };
        for (i, s) in m.sources.iter_mut().enumerate() {
            let own = matches!(s.value, "rope_theta" | "rotary_dim")
                || (is_gemma3 && i >= scaling_sources);
            if s.layer_type.is_none() && own {
                s.layer_type = Some("full_attention".into());
            }
        }
        let sliding = Some("sliding_attention");
        m.note(sliding, "rope_theta", base_source);
        m.note(sliding, "rotary_dim", dim_source);
        let sliding_type = if is_gemma3 {
            m.note(
                sliding,
                "rope_type",
                "default (unscaled: Gemma 3's sliding layers)".into(),
            );
            RopeType::Default
        } else {
            full.rope_type.clone()
        };
        let sliding_config = RopeConfig {
            rope_theta: swa_theta,
            partial_rotary_factor: rotary_factor(swa_rotary, head_dim),
            rope_type: sliding_type,
            ..full.clone()
        };
        let configs = BTreeMap::from([
            ("full_attention".to_string(), full),
            ("sliding_attention".to_string(), sliding_config),
        ]);
        let field = if m.has("rope.freq_base_swa") {
            m.key("rope.freq_base_swa")
        } else {
            "general.architecture".to_string()
        };
        RopeConfigs::per_layer_type(field, configs, layer_types)
    } else {
        RopeConfigs::for_all_layers(full, None)
    };
    Ok(GgufRope {
        architecture: arch,
        configs,
        layout: kind.layout(),
        freq_factors,
        sources: m.sources,
    })
}

/// The architectures whose llama.cpp graph scales the queries by the keys
/// `attention.temperature_scale` and `attention.temperature_length` (with no position offset):
/// `1 + scale ln(1 + floor(p / length))`, transformers' `llama_4_scaling_beta` for Ministral 3.
const QUERY_TEMPERATURE: &[&str] = &["mistral3", "deepseek2"];

/// The query temperature of the file, as [`QueryScale::Llama4Scaling`]; a scale of 0 (llama.cpp's
/// default) is none. On an architecture llama.cpp does not scale, the keys are refused by name.
fn read_query_temperature(m: &mut Meta) -> Result<Option<QueryScale>> {
    let (scale_key, length_key) = (
        "attention.temperature_scale",
        "attention.temperature_length",
    );
    let (scale, length) = (m.float(scale_key)?, m.count(length_key)?);
    if scale.is_none() && length.is_none() {
        return Ok(None);
    }
    if !QUERY_TEMPERATURE.contains(&m.arch.as_str()) {
        let key = if scale.is_some() {
            scale_key
        } else {
            length_key
        };
        return Err(m.invalid(
            key,
            format!(
                "llama.cpp scales the queries by it only on {}, not on {:?}",
                QUERY_TEMPERATURE.join(" and "),
                m.arch
            ),
        ));
    }
    let (beta, length) = match (scale, length) {
        (None, _) => return Ok(None),
        (Some(0.0), _) => return Ok(None),
        (Some(s), Some(l)) => (s, l),
        (Some(_), None) => {
            return Err(Error::GgufMissing {
                key: m.key(length_key),
                needed_by: "the query temperature that attention.temperature_scale sets",
            })
        }
    };
    let scale = QueryScale::Llama4Scaling {
        beta,
        original_max_position_embeddings: length,
    };
    scale
        .check()
        .map_err(|e| m.invalid(length_key, e.to_string()))?;
    let source = format!("{} and {}", m.key(scale_key), m.key(length_key));
    m.note(None, "query_scale", source);
    Ok(Some(scale))
}

/// `partial_rotary_factor` for a rotated width `rotary_dim` of a head of `head_dim`: the f64
/// ratio, nudged up when rounding would make `head_dim * factor` fall short of `rotary_dim`.
fn rotary_factor(rotary_dim: usize, head_dim: usize) -> f64 {
    let mut factor = rotary_dim as f64 / head_dim as f64;
    while ((head_dim as f64) * factor) < rotary_dim as f64 {
        factor = f64::from_bits(factor.to_bits() + 1);
    }
    factor
}

fn check_rotary(m: &Meta, suffix: &str, rotary_dim: usize, head_dim: usize) -> Result<()> {
    if rotary_dim == 0 || rotary_dim % 2 == 1 {
        return Err(m.invalid(suffix, format!("must be even and >= 2, got {rotary_dim}")));
    }
    if rotary_dim > head_dim {
        let head_key = if m.has("attention.key_length") {
            m.key("attention.key_length")
        } else {
            format!(
                "{} / {}",
                m.key("embedding_length"),
                m.key("attention.head_count")
            )
        };
        return Err(Error::GgufConflict {
            key: m.key(suffix),
            value: rotary_dim.to_string(),
            other: head_key,
            other_value: head_dim.to_string(),
            why: "the rotated width cannot exceed the head",
        });
    }
    Ok(())
}

/// The layer types of a model with sliding-window layers: from
/// `attention.sliding_window_pattern` (a period, or one flag per layer, true for sliding) and
/// `block_count`; Gemma 3's period is 6 when the key is absent.
fn read_layer_types(m: &Meta, is_gemma3: bool) -> Result<Option<Vec<String>>> {
    let suffix = "attention.sliding_window_pattern";
    let name = |sliding: bool| {
        if sliding {
            "sliding_attention"
        } else {
            "full_attention"
        }
        .to_string()
    };
    if let Some(Value::Array(flags)) = m.raw(suffix) {
        return flags
            .iter()
            .map(|f| match f {
                Value::Bool(b) => Ok(name(*b)),
                other => Err(m.invalid(
                    suffix,
                    format!("must be a period or one bool per layer, got {other:?}"),
                )),
            })
            .collect::<Result<Vec<_>>>()
            .map(Some);
    }
    let period = match m.count(suffix)? {
        Some(p) => Some(p),
        None if is_gemma3 => Some(6),
        None => None,
    };
    match (period, m.count("block_count")?) {
        (Some(p), Some(layers)) => Ok(Some(pattern_layer_types(layers, p, false))),
        _ => Ok(None),
    }
}

fn read_yarn(
    m: &mut Meta,
    factor: Option<f64>,
    original: Option<usize>,
    context: Option<usize>,
) -> Result<RopeType> {
    let factor = factor.unwrap_or(1.0);
    let original = match (original, context) {
        (Some(o), _) => {
            m.note(
                None,
                "original_max_position_embeddings",
                m.key("rope.scaling.original_context_length"),
            );
            o
        }
        (None, Some(c)) => {
            let source = m.default_source(
                "rope.scaling.original_context_length",
                &m.key("context_length"),
            );
            m.note(None, "original_max_position_embeddings", source);
            c
        }
        (None, None) => {
            return Err(Error::GgufMissing {
                key: m.key("rope.scaling.original_context_length"),
                needed_by: "YaRN's ramp is set by it (llama.cpp's default, context_length, is \
                            absent or 0 too)",
            })
        }
    };
    if let Some(ext) = m.float("rope.scaling.yarn_ext_factor")? {
        if ext != 1.0 {
            return Err(m.invalid(
                "rope.scaling.yarn_ext_factor",
                format!(
                    "llama.cpp's extrapolation mix {ext} is not transformers' YaRN (which is 1)"
                ),
            ));
        }
    }
    let beta_fast = m.float("rope.scaling.yarn_beta_fast")?.unwrap_or(32.0);
    m.record_key_or("beta_fast", "rope.scaling.yarn_beta_fast", "32");
    let beta_slow = m.float("rope.scaling.yarn_beta_slow")?.unwrap_or(1.0);
    m.record_key_or("beta_slow", "rope.scaling.yarn_beta_slow", "1");
    let mut yarn = Yarn {
        factor,
        beta_fast,
        beta_slow,
        ..Yarn::new(factor, original)
    };
    // transformers' `attention_factor`, written by the converter as yarn_attn_factor.
    let yarn_attn = m.float("rope.scaling.yarn_attn_factor")?;
    // llama.cpp's general attention factor; the converter writes it for some families as
    // transformers' default, 0.1 ln(factor) + 1, in f32.
    let attn = m.float_bits("rope.scaling.attn_factor");
    let default_attn = if factor > 1.0 {
        0.1 * factor.ln() + 1.0
    } else {
        1.0
    };
    let attn = attn.filter(|a| a.to_bits() != (default_attn as f32).to_bits());
    match (yarn_attn, attn) {
        (Some(a), Some(b)) if a != decimal(b) => {
            return Err(Error::GgufConflict {
                key: m.key("rope.scaling.yarn_attn_factor"),
                value: a.to_string(),
                other: m.key("rope.scaling.attn_factor"),
                other_value: b.to_string(),
                why: "both give YaRN's attention factor",
            })
        }
        (Some(a), _) => {
            m.note(
                None,
                "attention_factor",
                m.key("rope.scaling.yarn_attn_factor"),
            );
            yarn.attention_factor = Some(a);
        }
        (None, Some(b)) => {
            m.note(None, "attention_factor", m.key("rope.scaling.attn_factor"));
            yarn.attention_factor = Some(decimal(b));
        }
        (None, None) => {}
    }
    if let Some(log_mul) = m.float_bits("rope.scaling.yarn_log_multiplier") {
        if log_mul != 0.0 {
            let key = m.key("rope.scaling.yarn_log_multiplier");
            if m.arch == "deepseek2" {
                // DeepSeek-2's converter writes 0.1 * mscale_all_dim; llama.cpp divides it
                // back in f32 and takes mscale = mscale_all_dim.
                let all = tenfold(log_mul);
                yarn.mscale_all_dim = Some(all);
                yarn.mscale = Some(if all != 1.0 { all } else { 1.0 });
                m.note(
                    None,
                    "mscale_all_dim",
                    format!("{key} / 0.1 (DeepSeek-2), mscale = mscale_all_dim"),
                );
            } else {
                yarn.mscale_all_dim = Some(decimal(log_mul));
                yarn.mscale = Some(1.0);
                m.note(None, "mscale_all_dim", format!("{key}, mscale = 1"));
            }
        }
    }
    if yarn.attention_factor.is_none() && yarn.mscale.is_none() {
        m.note(
            None,
            "attention_factor",
            "default (0.1 ln(factor) + 1)".into(),
        );
    }
    Ok(RopeType::Yarn(yarn))
}

fn read_longrope<R: Read + Seek>(
    m: &mut Meta,
    reader: &mut R,
    rotary_dim: usize,
    dim_key: &str,
    original: Option<usize>,
    context: Option<usize>,
) -> Result<RopeType> {
    let mut lists = Vec::new();
    for name in ["rope_factors_short", "rope_factors_long"] {
        let Some((key, values)) = tensor(m.content, reader, name)? else {
            return Err(Error::GgufMissing {
                key: format!("{name}.weight"),
                needed_by: "LongRoPE divides each frequency by its short or long factor",
            });
        };
        check_factors(&key, &values, rotary_dim, dim_key)?;
        m.note(
            None,
            if name.ends_with("short") {
                "short_factor"
            } else {
                "long_factor"
            },
            format!(
                "tensor {key} (f32; relative error <= {:.2e})",
                f32_relative_error(&values)
            ),
        );
        lists.push(values.iter().map(|&v| v as f64).collect::<Vec<f64>>());
    }
    let long_factor = lists.pop().unwrap_or_default();
    let short_factor = lists.pop().unwrap_or_default();
    let original = match (original, context) {
        (Some(o), _) => o,
        (None, Some(c)) => c,
        (None, None) => {
            return Err(Error::GgufMissing {
                key: m.key("rope.scaling.original_context_length"),
                needed_by: "LongRoPE switches factors and sets its attention factor by it \
                            (llama.cpp's default, context_length, is absent or 0 too)",
            })
        }
    };
    m.record_count_or(
        "original_max_position_embeddings",
        "rope.scaling.original_context_length",
        "context_length",
    );
    // The converter writes transformers' default attention factor in f32: when it is that,
    // the formula is used (the exact f64 value).
    let scale = context.map(|c| c as f64 / original as f64).unwrap_or(1.0);
    let default_attn = if scale > 1.0 {
        (1.0 + scale.ln() / (original as f64).ln()).sqrt()
    } else {
        1.0
    };
    let attention_factor = match m.float_bits("rope.scaling.attn_factor") {
        Some(a) if a.to_bits() == (default_attn as f32).to_bits() => {
            let source = format!(
                "{} (f32 of the default sqrt(1 + ln(factor) / ln(original)): the formula is used)",
                m.key("rope.scaling.attn_factor")
            );
            m.note(None, "attention_factor", source);
            None
        }
        Some(a) => {
            m.note(None, "attention_factor", m.key("rope.scaling.attn_factor"));
            Some(decimal(a))
        }
        None => {
            m.note(
                None,
                "attention_factor",
                "default (sqrt(1 + ln(factor) / ln(original)))".into(),
            );
            None
        }
    };
    Ok(RopeType::Longrope(Longrope {
        short_factor,
        long_factor,
        factor: None,
        original_max_position_embeddings: Some(original),
        attention_factor,
        short_mscale: None,
        long_mscale: None,
    }))
}
