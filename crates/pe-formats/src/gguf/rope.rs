//! [`GgufRope`]: a model's rotary embedding read from the metadata and rope tensors of a GGUF
//! file (llama.cpp's format, as candle's `gguf_file::Content` holds it), in the same
//! [`RopeConfig`]s `from_hf_config` gives, and the pair layout of its Q and K weights.
//!
//! Keys are llama.cpp's, prefixed with `general.architecture` (`llama.rope.freq_base`). Which
//! keys and tensors it reads, their llama.cpp defaults (a 0 the converter writes for "none" is
//! none), what it refuses by name, and how float keys and `rope_freqs` stay exact: the guide,
//! `docs/gguf.md` (the facade's `gguf` page), written once there. What one architecture does
//! differently is a field of its row, written once in the field docs of `arch.rs`; this file
//! reads the row, never the architecture's name.
//!
//! ```
//! use std::collections::HashMap;
//! use candle_core::quantized::gguf_file::{Content, Value, VersionedMagic};
//! use candle_pe_core::{PairLayout, RopeConfig};
//! use candle_pe_formats::{FromGguf, GgufRope};
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
//! # Ok::<(), candle_pe_formats::Error>(())
//! ```

use std::collections::HashMap;
use std::io::{Read, Seek};

use candle_core::quantized::gguf_file::{Content, Value};
use candle_core::Device;

use candle_pe_core::{
    LinearScaling, Llama3, Longrope, MropeSlots, PairLayout, Proportional, QueryScale, RopeConfig,
    RopeConfigs, RopeType, Yarn, DEFAULT_ROPE_THETA, MAX_LAYERS,
};

use super::arch::{
    Arch, FullLayers, Head, LogMultiplier, NopeLayers, RopeKind, Sliding, TemperatureLength,
};
use super::converter::{f32_relative_error, is_converter_llama3, llama3_candidates, tenfold};
use super::meta::{decimal, GgufMeta};
use crate::hf::pattern_layer_types;
use crate::{Error, Result, ValueSource};

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
    /// Ones, then `1e30`s: the converter's form of Gemma 4's proportional rope (the `1e30`
    /// pairs do not rotate), read as [`RopeType::Proportional`] on the full-attention layers.
    Proportional {
        /// The pairs whose divisor is 1: the rotated ones.
        rotated_pairs: usize,
    },
}

/// A model's rotary embeddings read from a GGUF file, with the pair layout of its weights and
/// where each value came from (see the module docs for the keys read).
#[derive(Clone, Debug, PartialEq)]
pub struct GgufRope {
    /// `general.architecture`.
    pub architecture: String,
    /// The ropes per layer, as [`from_hf_config`](crate::FromHfConfig::from_hf_config) gives them.
    pub configs: RopeConfigs,
    /// The pair layout of the file's Q and K weights.
    pub layout: PairLayout,
    /// What `rope_freqs` was, when the file has it.
    pub freq_factors: Option<FreqFactors>,
    /// Where each value came from.
    pub sources: Vec<ValueSource>,
}

/// A value read from a GGUF file, as llama.cpp reads it. Import it to call `from_gguf` on
/// [`RopeConfig`], [`RopeConfigs`] and [`GgufRope`].
pub trait FromGguf: Sized {
    /// The value of the file whose metadata is `content`, with its tensors read through
    /// `reader` (the file `content` was read from); a missing key, or one whose value cannot be
    /// honoured, is an error naming the key.
    fn from_gguf<R: Read + Seek>(content: &Content, reader: &mut R) -> Result<Self>;
}

impl FromGguf for RopeConfigs {
    /// The rotary embeddings of a GGUF file: its metadata, and its rope tensors read through
    /// `reader` (the file `content` was read from). See [`GgufRope`].
    fn from_gguf<R: Read + Seek>(content: &Content, reader: &mut R) -> Result<Self> {
        Ok(GgufRope::from_gguf(content, reader)?.configs)
    }
}

impl FromGguf for PairLayout {
    /// How a GGUF file's Q and K weights pair the channels that turn together, by its
    /// `general.architecture` (its row's `rope`; no tensor is read).
    fn from_gguf<R: Read + Seek>(content: &Content, _reader: &mut R) -> Result<Self> {
        Ok(Arch::of(architecture(content)?)?.rope.layout())
    }
}

impl FromGguf for RopeConfig {
    /// The rotary embedding of a GGUF file whose layers share one rope; a file with one rope per
    /// layer type (Gemma 3) is an error naming the key that makes it so.
    fn from_gguf<R: Read + Seek>(content: &Content, reader: &mut R) -> Result<Self> {
        let rope = GgufRope::from_gguf(content, reader)?;
        let nope = rope.configs.nope_layers().unwrap_or_default();
        if let Some(layer) = nope.iter().position(|&n| n) {
            return Err(Error::GgufKey {
                key: "general.architecture".into(),
                message: format!(
                    "{}: layer {layer} has no rotary embedding (NoPE, set by llama.cpp's \
                     loader): read the file with RopeConfigs::from_gguf, then for_layer",
                    rope.architecture
                ),
            });
        }
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

/// `general.architecture`, which prefixes every key.
fn architecture(content: &Content) -> Result<&str> {
    const KEY: &str = "general.architecture";
    GgufMeta::new(content)
        .string(KEY)?
        .ok_or_else(|| Error::GgufMissing {
            key: KEY.into(),
            needed_by: "every key is prefixed with it",
        })
}

/// The metadata of one file, read by key suffix through its architecture's row, recording where
/// each value came from.
struct Meta<'a> {
    content: &'a Content,
    meta: GgufMeta<'a>,
    arch: &'static Arch,
    sources: Vec<ValueSource>,
}

impl<'a> Meta<'a> {
    fn new(content: &'a Content, overlay: Option<&'a Overlay>) -> Result<Self> {
        let meta = GgufMeta::new(content);
        Ok(Self {
            content,
            meta: match overlay {
                Some(overlay) => meta.with_overlay(overlay),
                None => meta,
            },
            arch: Arch::of(architecture(content)?)?,
            sources: Vec::new(),
        })
    }

    fn key(&self, suffix: &str) -> String {
        format!("{}.{suffix}", self.arch.name)
    }

    fn raw(&self, suffix: &str) -> Option<&'a Value> {
        self.meta.value(&self.key(suffix))
    }

    fn has(&self, suffix: &str) -> bool {
        self.meta.has(&self.key(suffix))
    }

    fn invalid(&self, suffix: &str, message: String) -> Error {
        Error::GgufKey {
            key: self.key(suffix),
            message,
        }
    }

    fn missing(&self, suffix: &str, needed_by: &'static str) -> Error {
        Error::GgufMissing {
            key: self.key(suffix),
            needed_by,
        }
    }

    /// Whether the file gives `attention.sliding_window = 0`: the converter's "no window",
    /// which llama.cpp reads as none.
    fn windowless(&self) -> bool {
        matches!(self.count("attention.sliding_window"), Ok(Some(0)))
    }

    /// A number key, as f64 (an f32 as its shortest decimal).
    fn float(&self, suffix: &str) -> Result<Option<f64>> {
        self.meta.float(&self.key(suffix))
    }

    /// The f32 a float key holds, bit for bit (for comparing with what a converter computed).
    fn f32(&self, suffix: &str) -> Result<Option<f32>> {
        Ok(self.meta.f64(&self.key(suffix))?.map(|x| x as f32))
    }

    /// A count key (see [`GgufMeta::count`]).
    fn count(&self, suffix: &str) -> Result<Option<usize>> {
        self.meta.count(&self.key(suffix))
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

    fn string(&self, suffix: &str) -> Result<Option<&'a str>> {
        self.meta.string(&self.key(suffix))
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

    /// Records `value` as the full layers' from their source for every layer, and the sliding
    /// layers' from `sliding_source`.
    fn note_per_type(&mut self, value: &'static str, sliding_source: String) {
        for s in self.sources.iter_mut() {
            if s.layer_type.is_none() && s.value == value {
                s.layer_type = Some("full_attention".into());
            }
        }
        self.note(Some("sliding_attention"), value, sliding_source);
    }

    /// The source of `value` for every layer (before the sliding layers have their own).
    fn source_for_all(&self, value: &str) -> String {
        self.sources
            .iter()
            .find(|s| s.layer_type.is_none() && s.value == value)
            .map(|s| s.source.clone())
            .unwrap_or_default()
    }
}

/// A per-pair tensor of the file, by its name with or without `.weight`, as f32 values: one
/// per rotated pair (`rotary_dim / 2`, from `dim_key`), finite and positive. Its shape is
/// checked before it is read.
fn pair_tensor<R: Read + Seek>(
    content: &Content,
    reader: &mut R,
    name: &str,
    rotary_dim: usize,
    dim_key: &str,
) -> Result<Option<(String, Vec<f32>)>> {
    let full = format!("{name}.weight");
    let (key, info) = match (
        content.tensor_infos.get(&full),
        content.tensor_infos.get(name),
    ) {
        (Some(info), _) => (full, info),
        (None, Some(info)) => (name.to_string(), info),
        (None, None) => return Ok(None),
    };
    let dims = info.shape.dims();
    let len = dims.iter().try_fold(1usize, |n, &d| n.checked_mul(d));
    if len != Some(rotary_dim / 2) {
        return Err(Error::GgufConflict {
            key,
            value: match len {
                Some(n) => format!("{n} numbers"),
                None => format!("shape {dims:?}"),
            },
            other: dim_key.to_string(),
            other_value: rotary_dim.to_string(),
            why: "it needs one number per rotated pair, rotary_dim / 2",
        });
    }
    let mut read = || -> candle_core::Result<Vec<f32>> {
        content
            .tensor(reader, &key, &Device::Cpu)?
            .dequantize(&Device::Cpu)?
            .flatten_all()?
            .to_vec1::<f32>()
    };
    let values = read().map_err(|e| Error::GgufKey {
        key: key.clone(),
        message: format!("cannot be read: {e}"),
    })?;
    if let Some((i, v)) = values
        .iter()
        .enumerate()
        .find(|(_, v)| !(v.is_finite() && **v > 0.0))
    {
        return Err(Error::GgufKey {
            key,
            message: format!("element {i} must be finite and > 0, got {v}"),
        });
    }
    Ok(Some((key, values)))
}

impl FromGguf for GgufRope {
    /// Reads the rope of a GGUF file: its metadata from `content`, its rope tensors through
    /// `reader` (the file `content` was read from).
    fn from_gguf<R: Read + Seek>(content: &Content, reader: &mut R) -> Result<Self> {
        read(content, reader, None)
    }
}

/// The scaling of the full-attention (or only) layers, before the rope tensors are seen.
enum Scaling {
    None,
    Linear(f64),
    Yarn,
    Longrope,
}

/// The lengths and factor the scalings read: `rope.scaling.factor`,
/// `rope.scaling.original_context_length` and `context_length` (each `None` when absent or 0).
struct Lengths {
    factor: Option<f64>,
    original: Option<usize>,
    context: Option<usize>,
}

const DIM: &str = "rope.dimension_count";
const ORIGINAL: &str = "rope.scaling.original_context_length";

/// Metadata values laid over a file's, by full key (`llama.rope.freq_base`): `None` removes one.
pub(crate) type Overlay = HashMap<String, Option<Value>>;

/// The rope of a GGUF file as llama.cpp reads it with `overlay`'s values in place of the
/// file's (a rope override's context parameters).
pub(crate) fn read_overlaid<R: Read + Seek>(
    content: &Content,
    reader: &mut R,
    overlay: &Overlay,
) -> Result<GgufRope> {
    read(content, reader, Some(overlay))
}

/// The rope of a GGUF file: its metadata keys (or the overlay's), and the rope tensors
/// `reader` holds.
fn read<R: Read + Seek>(
    content: &Content,
    reader: &mut R,
    overlay: Option<&Overlay>,
) -> Result<GgufRope> {
    let mut m = Meta::new(content, overlay)?;
    let (head_dim, rotary_dim) = read_head(&mut m)?;
    let theta = read_theta(&mut m, head_dim)?;
    // llama.cpp reads a context_length of 0 as unknown (the user's context must be given).
    let context = m.count_or_none("context_length")?;
    m.record_count_or("max_position_embeddings", "context_length", "none");
    if let Some(b) = m.meta.bool(&m.key("rope.scaling.finetuned"))? {
        let switch = m.arch.nope.map(|n| n.layers) == Some(NopeLayers::UnlessFinetuned);
        let how = match switch {
            true => "Granite's rope switch in llama.cpp",
            false => "reported only",
        };
        let source = format!("{} = {b} ({how})", m.key("rope.scaling.finetuned"));
        m.note(None, "finetuned", source);
    }
    let (kind, mrope_section) = read_sections(&mut m, rotary_dim)?;
    read_attention_layers(&mut m)?;

    // The scaling. The sources noted from here on are the scaling's.
    let scaling_sources = m.sources.len();
    let (rope_type, freq_factors, lengths) =
        read_scaling(&mut m, reader, rotary_dim, theta, context)?;
    let rotated = match freq_factors {
        // Proportional rope reads the rotated fraction of the whole head.
        Some(FreqFactors::Proportional { rotated_pairs }) => 2 * rotated_pairs,
        _ => rotary_dim,
    };
    let full = RopeConfig {
        head_dim,
        rope_theta: theta,
        max_position_embeddings: context,
        rope_type,
        mrope_section,
        mrope_slots: match kind {
            RopeKind::Imrope => MropeSlots::Alternating,
            _ => MropeSlots::Sections,
        },
        query_scale: read_query_temperature(&mut m, &lengths)?,
        // The pair layout of a GGUF file's weights is its own (`GgufRope::layout`), and
        // llama.cpp's converter does not write DeepSeek's rope_interleave.
        ..RopeConfig::new(head_dim, theta)
    }
    .with_rotary_dim(rotated);
    let configs = read_layers(&mut m, full, rotary_dim, scaling_sources)?;
    let configs = read_nope(&mut m, configs)?;
    Ok(GgufRope {
        architecture: m.arch.name.to_string(),
        configs,
        layout: kind.layout(),
        freq_factors,
        sources: m.sources,
    })
}

/// The rope type, with the frequency factors it reads, and the lengths it was read with.
fn read_scaling<R: Read + Seek>(
    m: &mut Meta,
    reader: &mut R,
    rotary_dim: usize,
    theta: f64,
    context: Option<usize>,
) -> Result<(RopeType, Option<FreqFactors>, Lengths)> {
    let factor = read_factor(m)?;
    let scaling = read_scaling_type(m, factor)?;
    // llama.cpp reads 0 as none: its YaRN and LongRoPE fall back to context_length.
    let original = m.count_or_none(ORIGINAL)?;
    let lengths = Lengths {
        factor,
        original,
        context,
    };
    let rope_type = match scaling {
        Scaling::None => RopeType::Default,
        Scaling::Linear(1.0) => RopeType::Default,
        Scaling::Linear(f) => RopeType::Linear(LinearScaling { factor: f }),
        Scaling::Yarn => read_yarn(m, &lengths)?,
        Scaling::Longrope => read_longrope(m, reader, rotary_dim, &lengths)?,
    };
    let (rope_type, freq_factors) = read_freqs(m, reader, rope_type, &lengths, theta, rotary_dim)?;
    Ok((rope_type, freq_factors, lengths))
}

/// The head and its rotated part: `(head_dim, rotary_dim)`.
fn read_head(m: &mut Meta) -> Result<(usize, usize)> {
    let rotary_given = m.count(DIM)?;
    let head_dim = match m.arch.head {
        // The rope covers a part of the head (DeepSeek's qk_rope), the whole of its rotated head.
        Head::RotaryPart { needed_by } => {
            m.note(None, "head_dim", m.key(DIM));
            rotary_given.ok_or_else(|| m.missing(DIM, needed_by))?
        }
        Head::KeyLength => read_head_dim(m)?,
    };
    let rotary_dim = rotary_given.unwrap_or(head_dim);
    m.record_key_or("rotary_dim", DIM, "the head");
    check_rotary(m, DIM, rotary_dim, head_dim)?;
    // A head of their own on the sliding layers is read where the row says so (Gemma 4).
    if let Some(swa_head) = m.count("attention.key_length_swa")? {
        if swa_head != head_dim && !m.arch.swa_head {
            return Err(m.invalid(
                "attention.key_length_swa",
                format!(
                    "{swa_head} differs from the head ({head_dim}): llama.cpp gives the sliding \
                     layers a head of their own only on {}, not on {:?}",
                    Arch::names_with(|a| a.swa_head),
                    m.arch.name
                ),
            ));
        }
    }
    Ok((head_dim, rotary_dim))
}

/// The head: `attention.key_length`, else `embedding_length / attention.head_count`.
fn read_head_dim(m: &mut Meta) -> Result<usize> {
    if let Some(k) = m.count("attention.key_length")? {
        m.note(None, "head_dim", m.key("attention.key_length"));
        return Ok(k);
    }
    const WHY: &str =
        "the head width is embedding_length / head_count when attention.key_length is absent";
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
            Ok(e / h)
        }
        (Some(_), Some(_)) => Err(m.invalid("attention.head_count", "must be >= 1, got 0".into())),
        (None, _) => Err(m.missing("embedding_length", WHY)),
        (_, None) => Err(m.missing("attention.head_count", WHY)),
    }
}

/// The base: `rope.freq_base`, times HunYuan's NTK `rope.scaling.alpha^(d/(d-2))`, `d` the
/// head, on the rows whose llama.cpp loader applies it (0, llama.cpp's default, is none).
fn read_theta(m: &mut Meta, head_dim: usize) -> Result<f64> {
    let theta = m.float("rope.freq_base")?.unwrap_or(DEFAULT_ROPE_THETA);
    m.record_key_or("rope_theta", "rope.freq_base", "10000");
    if theta <= 0.0 {
        return Err(m.invalid("rope.freq_base", format!("must be > 0, got {theta}")));
    }
    let alpha = match m.float("rope.scaling.alpha")? {
        None | Some(0.0) | Some(1.0) => return Ok(theta),
        Some(alpha) if !m.arch.ntk_alpha => {
            return Err(m.invalid(
                "rope.scaling.alpha",
                format!(
                    "{alpha}: llama.cpp scales the base by it only on {}, not on {:?}",
                    Arch::names_with(|a| a.ntk_alpha),
                    m.arch.name
                ),
            ))
        }
        Some(alpha) if alpha < 0.0 => {
            return Err(m.invalid("rope.scaling.alpha", format!("must be > 0, got {alpha}")))
        }
        Some(alpha) => alpha,
    };
    if head_dim <= 2 {
        return Err(m.invalid(
            "rope.scaling.alpha",
            format!("needs a head above 2, got {head_dim}"),
        ));
    }
    let d = head_dim as f64;
    // One source for the value: the product replaces the plain base's.
    m.sources.retain(|s| s.value != "rope_theta");
    let source = format!(
        "{} * {}^(d/(d-2)) (HunYuan NTK alpha)",
        m.key("rope.freq_base"),
        m.key("rope.scaling.alpha")
    );
    m.note(None, "rope_theta", source);
    Ok(theta * alpha.powf(d / (d - 2.0)))
}

/// The file's rope type and M-RoPE's sections, from the row and `rope.dimension_sections`.
fn read_sections(m: &mut Meta, rotary_dim: usize) -> Result<(RopeKind, Option<Vec<usize>>)> {
    const SECTIONS: &str = "rope.dimension_sections";
    let key = m.key(SECTIONS);
    let sections = m.meta.integers::<usize>(&key)?;
    // llama.cpp's `use_mrope`: the first two sections are non-zero.
    let used = sections
        .as_ref()
        .is_some_and(|s| s.len() >= 2 && s[0] > 0 && s[1] > 0);
    let kind = match m.arch.rope {
        _ if m.arch.mrope_with_sections && used => RopeKind::Mrope,
        kind => kind,
    };
    if !kind.is_mrope() {
        return Ok((kind, None));
    }
    let Some(mut sections) = sections else {
        return Err(m.missing(
            SECTIONS,
            "M-RoPE architectures (qwen2vl, qwen3vl, qwen35) split the pairs by it",
        ));
    };
    if sections.len() == 4 && sections[3] != 0 {
        return Err(m.invalid(
            SECTIONS,
            format!(
                "a fourth section ({}) is for vision positions, which text M-RoPE does not take",
                sections[3]
            ),
        ));
    }
    sections.truncate(3);
    let sum = sections
        .iter()
        .try_fold(0usize, |sum, &n| sum.checked_add(n));
    if sections.len() != 3 || sum != Some(rotary_dim / 2) {
        return Err(Error::GgufConflict {
            key,
            value: format!("{sections:?}"),
            other: m.key(DIM),
            other_value: rotary_dim.to_string(),
            why: "the t, h and w sections must add up to rotary_dim / 2",
        });
    }
    m.note(None, "mrope_section", key);
    Ok((kind, Some(sections)))
}

/// Keys of llama.cpp's that no row's loader reads, refused by name when a file has them.
const UNREAD: [&str; 1] = [
    // DeepSeek-4's compressed attention (llama-arch.cpp after b97ebdc); deepseek4 is no row.
    "attention.compress_rope_freq_base",
];

/// `full_attention_interval` (Qwen3-Next, Qwen3.5: every n-th layer is attention, the others
/// recurrent, without rope), reported; and the keys in [`UNREAD`], refused by name.
fn read_attention_layers(m: &mut Meta) -> Result<()> {
    if let Some(suffix) = UNREAD.into_iter().find(|s| m.has(s)) {
        return Err(m.invalid(
            suffix,
            format!(
                "no architecture with a row reads it ({:?} has none)",
                m.arch.name
            ),
        ));
    }
    const INTERVAL: &str = "full_attention_interval";
    if let Some(n) = m.count(INTERVAL)? {
        let source = format!(
            "{} = {n} (reported only: every {n}th layer is attention, the others recurrent \
             without rope)",
            m.key(INTERVAL)
        );
        m.note(None, "attention_layers", source);
    }
    Ok(())
}

/// The scaling factor: `rope.scaling.factor`, or the legacy `rope.scale_linear`; 0 is none.
fn read_factor(m: &mut Meta) -> Result<Option<f64>> {
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
    match factor {
        Some(f) if f <= 0.0 => {
            Err(m.invalid("rope.scaling.factor", format!("must be > 0, got {f}")))
        }
        factor => Ok(factor),
    }
}

/// The scaling type: `rope.scaling.type`, else LongRoPE when the file has `rope_factors_long`
/// (Phi-3 files mark it by its tensors alone), else llama.cpp's default, linear.
fn read_scaling_type(m: &mut Meta, factor: Option<f64>) -> Result<Scaling> {
    let tensors = &m.content.tensor_infos;
    let has_long = tensors.contains_key("rope_factors_long.weight")
        || tensors.contains_key("rope_factors_long");
    let scaling = match m.string("rope.scaling.type")? {
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
    Ok(scaling)
}

/// `rope_freqs` over `rope_type` (which must be the default): llama3 divisors, or any stored
/// divisors; and what the tensor turned out to be.
fn read_freqs<R: Read + Seek>(
    m: &mut Meta,
    reader: &mut R,
    rope_type: RopeType,
    lengths: &Lengths,
    theta: f64,
    rotary_dim: usize,
) -> Result<(RopeType, Option<FreqFactors>)> {
    let dim_key = m.key(DIM);
    let Some((name, values)) = pair_tensor(m.content, reader, "rope_freqs", rotary_dim, &dim_key)?
    else {
        return Ok((rope_type, None));
    };
    if let Some(read) = proportional_freqs(m, &name, &values, &rope_type, rotary_dim) {
        return Ok(read);
    }
    if rope_type != RopeType::Default {
        return Err(Error::GgufConflict {
            key: name,
            value: format!("{} divisors", values.len()),
            other: m.key("rope.scaling.type"),
            other_value: rope_type.name().to_string(),
            why: "per-pair divisors on top of another scaling are not a transformers rope type",
        });
    }
    // The tensor, not the (absent) scaling type, gives the rope type.
    m.sources.retain(|s| s.value != "rope_type");
    let llama3 = llama3_candidates(lengths.factor, lengths.original)
        .into_iter()
        .find(|p| is_converter_llama3(&values, theta, rotary_dim, p));
    let Some(p) = llama3 else {
        return Ok(stored_divisors(m, &name, &values, lengths.context));
    };
    let source = format!(
        "tensor {name}: bit for bit llama.cpp's converter output for llama3 factor {}, low {}, \
         high {}, original {}",
        p.factor, p.low_freq_factor, p.high_freq_factor, p.original_max_position_embeddings
    );
    m.note(None, "rope_type", source);
    Ok((RopeType::Llama3(p), Some(FreqFactors::Llama3(p))))
}

/// The divisor the converter writes for a pair that proportional rope does not rotate.
const UNROTATED: f32 = 1e30;

/// `rope_freqs` as Gemma 4's converter writes proportional rope, on a row that says so: ones for
/// the rotated pairs, then `1e30`s, one per pair of the rotated width, over no scaling or a
/// linear one (its factor).
fn proportional_freqs(
    m: &mut Meta,
    name: &str,
    values: &[f32],
    rope_type: &RopeType,
    rotary_dim: usize,
) -> Option<(RopeType, Option<FreqFactors>)> {
    let factor = match rope_type {
        RopeType::Default => 1.0,
        RopeType::Linear(l) => l.factor,
        _ => return None,
    };
    let rotated_pairs = values.iter().take_while(|&&v| v == 1.0).count();
    let rest_unrotated = values[rotated_pairs..].iter().all(|&v| v == UNROTATED);
    let whole = values.len() == rotary_dim / 2;
    if !m.arch.proportional_freqs || rotated_pairs == 0 || !rest_unrotated || !whole {
        return None;
    }
    // The tensor gives the rope type; a linear scaling is its factor.
    m.sources.retain(|s| s.value != "rope_type");
    let source = format!(
        "tensor {name}: {rotated_pairs} pairs of 1 then 1e30 (the converter's proportional rope; \
         the 1e30 pairs do not rotate)"
    );
    m.note(None, "rope_type", source);
    let rope_type = RopeType::Proportional(Proportional { factor });
    Some((rope_type, Some(FreqFactors::Proportional { rotated_pairs })))
}

/// Divisors used as stored: a LongRoPE whose short and long factors are both the divisors and
/// whose attention factor is 1.
fn stored_divisors(
    m: &mut Meta,
    name: &str,
    values: &[f32],
    context: Option<usize>,
) -> (RopeType, Option<FreqFactors>) {
    let max_relative_error = f32_relative_error(values);
    let source = format!(
        "tensor {name}: divisors used as stored (relative frequency error <= \
         {max_relative_error:.2e})"
    );
    m.note(None, "rope_type", source);
    let divisors: Vec<f64> = values.iter().map(|&v| v as f64).collect();
    let rope_type = RopeType::Longrope(Longrope {
        short_factor: divisors.clone(),
        long_factor: divisors,
        factor: Some(1.0),
        original_max_position_embeddings: Some(context.unwrap_or(1).max(1)),
        attention_factor: Some(1.0),
        short_mscale: None,
        long_mscale: None,
    });
    (rope_type, Some(FreqFactors::Stored { max_relative_error }))
}

/// The ropes per layer. Sliding-window layers have a rope of their own when the file has the
/// `_swa` keys or the row has sliding defaults (Gemma 3; olmo2 only in a file that gives a
/// window); llama.cpp's converter writes a window of 0 for a model without one, and llama.cpp
/// reads it so: no sliding layers, one rope for all.
fn read_layers(
    m: &mut Meta,
    full: RopeConfig,
    rotary_dim: usize,
    scaling_sources: usize,
) -> Result<RopeConfigs> {
    let swa_keys = m.has("rope.freq_base_swa") || m.has("rope.dimension_count_swa");
    if m.arch.sliding.is_none() && !swa_keys {
        return Ok(RopeConfigs::new(full));
    }
    if m.arch.sliding.is_some_and(|s| s.windowed) && !m.has("attention.sliding_window") {
        return Ok(RopeConfigs::new(full));
    }
    if m.windowless() {
        let source = format!(
            "{} = 0: no sliding layers, one rope for every layer (as llama.cpp reads it)",
            m.key("attention.sliding_window")
        );
        m.note(None, "layer_types", source);
        return Ok(RopeConfigs::new(full));
    }
    let layer_types = read_layer_types(m)?;
    let sliding = read_sliding(m, &full, rotary_dim, scaling_sources)?;
    let configs = [
        ("full_attention".to_string(), Some(full)),
        ("sliding_attention".to_string(), Some(sliding)),
    ];
    let field = if m.has("rope.freq_base_swa") {
        m.key("rope.freq_base_swa")
    } else {
        "general.architecture".to_string()
    };
    let configs = RopeConfigs::per_layer_type(configs)?.with_field(field);
    Ok(match layer_types {
        Some(layer_types) => configs.with_layer_types(layer_types),
        None => configs,
    })
}

/// The sliding layers' rope: the full layers' with `rope.freq_base_swa` and
/// `rope.dimension_count_swa`, or the row's defaults (Gemma 3: base 10000, no scaling).
fn read_sliding(
    m: &mut Meta,
    full: &RopeConfig,
    rotary_dim: usize,
    scaling_sources: usize,
) -> Result<RopeConfig> {
    let defaults = m.arch.sliding;
    let theta = m.float("rope.freq_base_swa")?;
    let theta = theta.unwrap_or(defaults.and_then(|s| s.theta).unwrap_or(full.rope_theta));
    if theta <= 0.0 {
        return Err(m.invalid("rope.freq_base_swa", format!("must be > 0, got {theta}")));
    }
    let head_dim = read_sliding_head(m, full.head_dim)?;
    let swa_rotary = m.count("rope.dimension_count_swa")?.unwrap_or(rotary_dim);
    check_rotary(m, "rope.dimension_count_swa", swa_rotary, head_dim)?;
    let unscaled = defaults.filter(|s| !s.scaled);
    note_sliding_sources(m, unscaled.is_some(), scaling_sources);
    if head_dim != full.head_dim {
        m.note_per_type("head_dim", m.key("attention.key_length_swa"));
    }
    let rope_type = match unscaled {
        Some(s) => {
            let source = format!("default (unscaled: {}'s sliding layers)", s.label);
            m.note(Some("sliding_attention"), "rope_type", source);
            RopeType::Default
        }
        None => full.rope_type.clone(),
    };
    Ok(RopeConfig {
        head_dim,
        rope_theta: theta,
        rope_type,
        ..full.clone()
    }
    .with_rotary_dim(swa_rotary))
}

/// The sliding layers' head: `attention.key_length_swa` (required) on a row whose sliding layers
/// have a head of their own (Gemma 4), else the full layers'.
fn read_sliding_head(m: &Meta, full_head: usize) -> Result<usize> {
    const KEY: &str = "attention.key_length_swa";
    if !m.arch.swa_head {
        return Ok(full_head);
    }
    match m.count(KEY)? {
        Some(0) => Err(m.invalid(KEY, "must be >= 2, got 0".into())),
        Some(head) => Ok(head),
        None => Err(m.missing(
            KEY,
            "the sliding layers' head is its own (llama.cpp requires it)",
        )),
    }
}

/// Each value once per layer type: what the sliding layers take otherwise (their base, their
/// width, and when `unscaled` the whole scaling, the sources from `scaling_sources` on) is the
/// full layers' own, and the sliding layers name only keys the file has.
fn note_sliding_sources(m: &mut Meta, unscaled: bool, scaling_sources: usize) {
    let base_source = match m.arch.sliding {
        _ if m.has("rope.freq_base_swa") => m.key("rope.freq_base_swa"),
        Some(Sliding {
            label,
            theta: Some(theta),
            ..
        }) => format!("default ({label}: {theta})"),
        _ => m.source_for_all("rope_theta"),
    };
    let dim_source = if m.has("rope.dimension_count_swa") {
        m.key("rope.dimension_count_swa")
    } else {
        m.source_for_all("rotary_dim")
    };
    for (i, s) in m.sources.iter_mut().enumerate() {
        let own =
            matches!(s.value, "rope_theta" | "rotary_dim") || (unscaled && i >= scaling_sources);
        if s.layer_type.is_none() && own {
            s.layer_type = Some("full_attention".into());
        }
    }
    let sliding = Some("sliding_attention");
    m.note(sliding, "rope_theta", base_source);
    m.note(sliding, "rotary_dim", dim_source);
}

/// The query temperature of the file, as [`QueryScale::Llama4Scaling`]: on the architectures
/// whose llama.cpp graph scales the queries by `attention.temperature_scale` (with no position
/// offset), `1 + scale ln(1 + floor(p / length))`, transformers' `llama_4_scaling_beta` for
/// Ministral 3 and Mistral 4. The length is the row's ([`TemperatureLength`]). A scale of 0
/// (llama.cpp's default) is none. On an architecture llama.cpp does not scale, the keys are
/// refused by name.
fn read_query_temperature(m: &mut Meta, lengths: &Lengths) -> Result<Option<QueryScale>> {
    let (scale_key, length_key) = (
        "attention.temperature_scale",
        "attention.temperature_length",
    );
    let (scale, length) = (m.float(scale_key)?, m.count(length_key)?);
    if scale.is_none() && length.is_none() {
        return Ok(None);
    }
    let Some(from) = m.arch.query_temperature else {
        let key = if scale.is_some() {
            scale_key
        } else {
            length_key
        };
        return Err(m.invalid(
            key,
            format!(
                "llama.cpp scales the queries by it only on {}, not on {:?}",
                Arch::names_with(|a| a.query_temperature.is_some()),
                m.arch.name
            ),
        ));
    };
    let beta = match scale {
        None | Some(0.0) => return Ok(None),
        Some(s) => s,
    };
    let (length, length_source) = temperature_length(m, from, length, lengths)?;
    let scale = QueryScale::Llama4Scaling {
        beta,
        original_max_position_embeddings: length,
    };
    scale
        .check()
        .map_err(|e| m.invalid(length_key, e.to_string()))?;
    let source = format!("{} and {length_source}", m.key(scale_key));
    m.note(None, "query_scale", source);
    Ok(Some(scale))
}

/// The query temperature's length and its source: `attention.temperature_length` (required),
/// or the original context (`rope.scaling.original_context_length`, else `context_length`), with
/// a `temperature_length` that llama.cpp would not read refused when it differs.
fn temperature_length(
    m: &Meta,
    from: TemperatureLength,
    key_length: Option<usize>,
    lengths: &Lengths,
) -> Result<(usize, String)> {
    const KEY: &str = "attention.temperature_length";
    if from == TemperatureLength::Key {
        let length = key_length.ok_or_else(|| {
            m.missing(
                KEY,
                "the query temperature that attention.temperature_scale sets",
            )
        })?;
        return Ok((length, m.key(KEY)));
    }
    let (original, source) = match (lengths.original, lengths.context) {
        (Some(o), _) => (o, m.key(ORIGINAL)),
        (None, Some(c)) => (c, m.key("context_length")),
        (None, None) => {
            return Err(m.missing(
                ORIGINAL,
                "llama.cpp takes the query temperature's length from it (or context_length)",
            ))
        }
    };
    match key_length {
        Some(k) if k != original => Err(Error::GgufConflict {
            key: m.key(KEY),
            value: k.to_string(),
            other: source,
            other_value: original.to_string(),
            why: "llama.cpp takes the temperature's length from the original context here",
        }),
        _ => Ok((original, source)),
    }
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
/// `block_count`; the row's period (Gemma 3: 6) when the key is absent.
fn read_layer_types(m: &Meta) -> Result<Option<Vec<String>>> {
    let sliding = m.arch.sliding;
    if !m.has(PATTERN) && sliding.is_some_and(|s| s.period.is_none()) {
        return Err(m.missing(
            PATTERN,
            "llama.cpp requires the sliding pattern of this architecture (one flag per layer)",
        ));
    }
    let default = sliding.and_then(|s| s.period);
    pattern_types(m, default, sliding.is_some_and(|s| s.first_full))
}

/// The sliding pattern's key.
const PATTERN: &str = "attention.sliding_window_pattern";

/// The layer types of `attention.sliding_window_pattern`: one flag per layer (true for
/// sliding), or a period with `block_count`, `default` where the key is absent; every
/// period-th layer full, the first of each period where `first_full`, else the last. `None`
/// without a period or without `block_count`.
fn pattern_types(
    m: &Meta,
    default: Option<usize>,
    first_full: bool,
) -> Result<Option<Vec<String>>> {
    if let Some(Value::Array(_)) = m.raw(PATTERN) {
        let flags = m.meta.bools(&m.key(PATTERN))?.unwrap_or_default();
        let name = |sliding: bool| match sliding {
            true => "sliding_attention".to_string(),
            false => "full_attention".to_string(),
        };
        return Ok(Some(flags.into_iter().map(name).collect()));
    }
    let period = m.count(PATTERN)?.or(default);
    match (period, layer_count(m)?) {
        (Some(p), Some(layers)) => Ok(Some(pattern_layer_types(layers, p, first_full, false))),
        _ => Ok(None),
    }
}

/// `block_count`, which per-layer lists are made from: at most [`MAX_LAYERS`].
fn layer_count(m: &Meta) -> Result<Option<usize>> {
    match m.count("block_count")? {
        Some(n) if n > MAX_LAYERS => {
            let message = format!("{n} layers: at most {MAX_LAYERS} are read");
            Err(m.invalid("block_count", message))
        }
        n => Ok(n),
    }
}

/// The NoPE layers of the row's rule, which llama.cpp sets in code (every fourth layer, the
/// full-attention ones, or every one where Granite's switch is off, of `block_count`, required
/// for them), with the query factor it puts on
/// them; none on a row without one, and none in a llama4 file whose window is 0.
fn read_nope(m: &mut Meta, mut configs: RopeConfigs) -> Result<RopeConfigs> {
    let Some(rule) = m.arch.nope else {
        return Ok(configs);
    };
    if rule.unless_windowless && m.windowless() {
        let source = format!(
            "{} = 0: every layer rotates (llama.cpp's {} loader)",
            m.key("attention.sliding_window"),
            m.arch.name
        );
        m.note(None, "no_rope_layers", source);
        return Ok(configs);
    }
    let layers = || {
        layer_count(m)?.ok_or_else(|| {
            m.missing(
                "block_count",
                "the layers llama.cpp leaves unrotated (NoPE) are counted from it",
            )
        })
    };
    let (nope, which) = match rule.layers {
        NopeLayers::EveryNth(n) => {
            let nope = (0..layers()?).map(|i| (i + 1) % n == 0).collect();
            (nope, format!("every {n}th layer, (i + 1) % {n} == 0"))
        }
        NopeLayers::UnlessFinetuned => {
            let key = m.key("rope.scaling.finetuned");
            if m.meta.bool(&key)? != Some(false) {
                return Ok(configs);
            }
            let which = format!("every layer, {key} = false: the rope switch is off");
            (vec![true; layers()?], which)
        }
        NopeLayers::Full(full) => match full_nope_layers(m, &configs, full, layers()?)? {
            Some(found) => {
                if configs.is_per_layer_type() {
                    // The `_swa` keys made a rope per type, the same one: each layer needs its
                    // type.
                    configs = configs.with_layer_types(found.types);
                }
                (found.nope, found.which)
            }
            None => return Ok(configs),
        },
    };
    let source = format!(
        "default ({}: {which}, set by llama.cpp's {} graph)",
        rule.label, m.arch.name
    );
    m.note(None, "no_rope_layers", source);
    let configs = configs.with_nope_layers(nope);
    match rule.query_scale {
        Some(scale) => {
            let source = format!(
                "default ({}'s NoPE layers, set by llama.cpp's {} loader: {scale:?})",
                rule.label, m.arch.name
            );
            m.note(None, "nope_query_scale", source);
            Ok(configs.with_nope_query_scale(scale)?)
        }
        None => Ok(configs),
    }
}

/// The NoPE layers of a [`NopeLayers::Full`] rule, how they were found, and the layer types.
struct FullNope {
    nope: Vec<bool>,
    which: String,
    types: Vec<String>,
}

/// The full-attention layers of a file whose graph turns only the sliding ones, less the dense
/// lead where the row turns it; `None` where the loader gives a file of this size no sliding
/// layers (every layer turns). The graph turns the sliding layers with
/// the full layers' base and width: `_swa` keys that say otherwise are refused.
fn full_nope_layers(
    m: &mut Meta,
    configs: &RopeConfigs,
    full: FullLayers,
    layers: usize,
) -> Result<Option<FullNope>> {
    if let Some((_, ropes)) = configs.per_type() {
        if ropes.get("sliding_attention") != ropes.get("full_attention") {
            let key = match m.has("rope.freq_base_swa") {
                true => "rope.freq_base_swa",
                false => "rope.dimension_count_swa",
            };
            let message = format!(
                "llama.cpp's {} graph turns the sliding layers with {} and {}, not this key",
                m.arch.name,
                m.key("rope.freq_base"),
                m.key("rope.dimension_count")
            );
            return Err(m.invalid(key, message));
        }
    }
    if let Some(n) = full.only_at_block_count.filter(|&n| n != layers) {
        let source = format!(
            "{} = {layers}: every layer rotates (llama.cpp's {} loader gives sliding layers only \
             to a file of {n} blocks)",
            m.key("block_count"),
            m.arch.name,
        );
        m.note(None, "no_rope_layers", source);
        return Ok(None);
    }
    let types = pattern_types(m, Some(full.period), full.first_full)?.unwrap_or_default();
    let lead = match full.dense_lead {
        true => m.count("leading_dense_block_count")?.ok_or_else(|| {
            m.missing(
                "leading_dense_block_count",
                "llama.cpp turns the dense lead whatever its layers' type",
            )
        })?,
        false => 0,
    };
    let nope = types
        .iter()
        .enumerate()
        .map(|(i, t)| t == "full_attention" && i >= lead)
        .collect();
    let pattern = match m.has(PATTERN) {
        true => m.key(PATTERN),
        false => format!(
            "every {}th layer, the {} of each period",
            full.period,
            if full.first_full { "first" } else { "last" }
        ),
    };
    let lead = match lead {
        0 => String::new(),
        n => format!(
            " but the first {n} ({})",
            m.key("leading_dense_block_count")
        ),
    };
    let which = format!("the full-attention layers of {pattern}{lead}");
    Ok(Some(FullNope { nope, which, types }))
}

/// The original context of a YaRN or LongRoPE: `rope.scaling.original_context_length`, else
/// `context_length`; `needed_by` says why when neither is given.
fn original_context(m: &Meta, lengths: &Lengths, needed_by: &'static str) -> Result<usize> {
    lengths
        .original
        .or(lengths.context)
        .ok_or_else(|| m.missing(ORIGINAL, needed_by))
}

fn read_yarn(m: &mut Meta, lengths: &Lengths) -> Result<RopeType> {
    let factor = lengths.factor.unwrap_or(1.0);
    let original = original_context(
        m,
        lengths,
        "YaRN's ramp is set by it (llama.cpp's default, context_length, is absent or 0 too)",
    )?;
    let source = match lengths.original {
        Some(_) => m.key(ORIGINAL),
        None => m.default_source(ORIGINAL, &m.key("context_length")),
    };
    m.note(None, "original_max_position_embeddings", source);
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
    yarn.attention_factor = read_yarn_attention_factor(m, factor)?;
    read_yarn_mscale(m, &mut yarn)?;
    if yarn.attention_factor.is_none() && yarn.mscale.is_none() {
        m.note(
            None,
            "attention_factor",
            "default (0.1 ln(factor) + 1)".into(),
        );
    }
    Ok(RopeType::Yarn(yarn))
}

/// YaRN's attention factor: transformers' `attention_factor`, written by the converter as
/// `yarn_attn_factor`, or llama.cpp's general `attn_factor`, which the converter writes for some
/// families as transformers' default, `0.1 ln(factor) + 1` in f32 (read as that default).
fn read_yarn_attention_factor(m: &mut Meta, factor: f64) -> Result<Option<f64>> {
    let yarn_attn = m.float("rope.scaling.yarn_attn_factor")?;
    let attn = m.f32("rope.scaling.attn_factor")?;
    let default_attn = if factor > 1.0 {
        0.1 * factor.ln() + 1.0
    } else {
        1.0
    };
    let attn = attn.filter(|a| a.to_bits() != (default_attn as f32).to_bits());
    match (yarn_attn, attn) {
        (Some(a), Some(b)) if a != decimal(b) => Err(Error::GgufConflict {
            key: m.key("rope.scaling.yarn_attn_factor"),
            value: a.to_string(),
            other: m.key("rope.scaling.attn_factor"),
            other_value: b.to_string(),
            why: "both give YaRN's attention factor",
        }),
        (Some(a), _) => {
            let source = m.key("rope.scaling.yarn_attn_factor");
            m.note(None, "attention_factor", source);
            Ok(Some(a))
        }
        (None, Some(b)) => {
            m.note(None, "attention_factor", m.key("rope.scaling.attn_factor"));
            Ok(Some(decimal(b)))
        }
        (None, None) => Ok(None),
    }
}

/// YaRN's `mscale` and `mscale_all_dim` from `rope.scaling.yarn_log_multiplier`, stored as the
/// row says ([`LogMultiplier`]).
fn read_yarn_mscale(m: &mut Meta, yarn: &mut Yarn) -> Result<()> {
    let log_mul = match m.f32("rope.scaling.yarn_log_multiplier")? {
        None | Some(0.0) => return Ok(()),
        Some(v) => v,
    };
    let key = m.key("rope.scaling.yarn_log_multiplier");
    let source = match m.arch.log_multiplier {
        LogMultiplier::TenthOfMscaleAllDim { label } => {
            // The converter writes 0.1 * mscale_all_dim; llama.cpp divides it back in f32 and
            // takes mscale = mscale_all_dim.
            let all = tenfold(log_mul);
            yarn.mscale_all_dim = Some(all);
            yarn.mscale = Some(if all != 1.0 { all } else { 1.0 });
            format!("{key} / 0.1 ({label}), mscale = mscale_all_dim")
        }
        LogMultiplier::MscaleAllDim => {
            yarn.mscale_all_dim = Some(decimal(log_mul));
            yarn.mscale = Some(1.0);
            format!("{key}, mscale = 1")
        }
    };
    m.note(None, "mscale_all_dim", source);
    Ok(())
}

fn read_longrope<R: Read + Seek>(
    m: &mut Meta,
    reader: &mut R,
    rotary_dim: usize,
    lengths: &Lengths,
) -> Result<RopeType> {
    let short_factor = read_longrope_factors(m, reader, "short", rotary_dim)?;
    let long_factor = read_longrope_factors(m, reader, "long", rotary_dim)?;
    let original = original_context(
        m,
        lengths,
        "LongRoPE switches factors and sets its attention factor by it (llama.cpp's default, \
         context_length, is absent or 0 too)",
    )?;
    m.record_count_or(
        "original_max_position_embeddings",
        ORIGINAL,
        "context_length",
    );
    let attention_factor = read_longrope_attention_factor(m, original, lengths.context)?;
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

/// The tensor `rope_factors_{which}` (`short` or `long`), required, one factor per pair.
fn read_longrope_factors<R: Read + Seek>(
    m: &mut Meta,
    reader: &mut R,
    which: &str,
    rotary_dim: usize,
) -> Result<Vec<f64>> {
    let name = format!("rope_factors_{which}");
    let dim_key = m.key(DIM);
    let Some((key, values)) = pair_tensor(m.content, reader, &name, rotary_dim, &dim_key)? else {
        return Err(Error::GgufMissing {
            key: format!("{name}.weight"),
            needed_by: "LongRoPE divides each frequency by its short or long factor",
        });
    };
    let value = if which == "short" {
        "short_factor"
    } else {
        "long_factor"
    };
    let source = format!(
        "tensor {key} (f32; relative error <= {:.2e})",
        f32_relative_error(&values)
    );
    m.note(None, value, source);
    Ok(values.iter().map(|&v| v as f64).collect())
}

/// LongRoPE's attention factor, `rope.scaling.attn_factor`: `None` (the exact formula) when it
/// is absent or the f32 of transformers' default, which the converter writes.
fn read_longrope_attention_factor(
    m: &mut Meta,
    original: usize,
    context: Option<usize>,
) -> Result<Option<f64>> {
    let scale = context.map(|c| c as f64 / original as f64).unwrap_or(1.0);
    let default_attn = if scale > 1.0 {
        (1.0 + scale.ln() / (original as f64).ln()).sqrt()
    } else {
        1.0
    };
    let key = m.key("rope.scaling.attn_factor");
    let (factor, source) = match m.f32("rope.scaling.attn_factor")? {
        Some(a) if a.to_bits() == (default_attn as f32).to_bits() => (
            None,
            format!(
                "{key} (f32 of the default sqrt(1 + ln(factor) / ln(original)): the formula is \
                 used)"
            ),
        ),
        Some(a) => (Some(decimal(a)), key),
        None => (
            None,
            "default (sqrt(1 + ln(factor) / ln(original)))".to_string(),
        ),
    };
    m.note(None, "attention_factor", source);
    Ok(factor)
}
