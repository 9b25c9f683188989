//! [`SinusoidalEmbeddingConfig`]: how a checkpoint's embedding block is built, with defaults.
//! `candle-pe-formats` reads one from the fields of an HF `config.json` (its `FromHfConfig`);
//! this crate reads no file.
//!
//! ```
//! use candle_pe_nn::{EmbeddingScale, PositionMode, Preset, SinusoidalEmbeddingConfig};
//!
//! // M2M100 / NLLB: fairseq frequencies, padding-aware positions from pad 1, sqrt(width).
//! let cfg = SinusoidalEmbeddingConfig {
//!     max_positions: Some(1024),
//!     ..SinusoidalEmbeddingConfig::for_preset(Preset::Fairseq)
//! };
//! assert_eq!(cfg.embedding_scale, EmbeddingScale::SqrtD);
//! assert_eq!((cfg.positions, cfg.padding_idx), (PositionMode::PaddingAware, Some(1)));
//! assert_eq!(cfg.spec(1024).width, 1024);
//! ```

use candle_pe_core::{ColumnLayout, Frequencies, OddWidth, PeSpec, Preset};
use serde::{Deserialize, Deserializer};

/// What multiplies the token embedding before the encoding is added.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub enum EmbeddingScale {
    /// No scaling (Marian's default).
    #[default]
    None,
    /// `sqrt(width)` (fairseq, M2M100 `scale_embedding`, the paper's `sqrt(d) X + PE`).
    SqrtD,
    /// Any factor.
    Value(f64),
}

impl EmbeddingScale {
    /// The factor for `width`.
    pub fn factor(self, width: usize) -> f64 {
        match self {
            EmbeddingScale::None => 1.0,
            EmbeddingScale::SqrtD => (width as f64).sqrt(),
            EmbeddingScale::Value(v) => v,
        }
    }
}

/// Reads `true`/`false` (HF `scale_embedding`), a number, `"none"` or `"sqrt-d"`.
impl<'de> Deserialize<'de> for EmbeddingScale {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Repr {
            Flag(bool),
            Value(f64),
            Name(String),
        }
        match Repr::deserialize(deserializer)? {
            Repr::Flag(true) => Ok(EmbeddingScale::SqrtD),
            Repr::Flag(false) => Ok(EmbeddingScale::None),
            Repr::Value(v) => Ok(EmbeddingScale::Value(v)),
            Repr::Name(name) => match name.as_str() {
                "none" => Ok(EmbeddingScale::None),
                "sqrt-d" | "sqrt_d" => Ok(EmbeddingScale::SqrtD),
                other => Err(serde::de::Error::custom(format!(
                    "unknown embedding scale {other:?}; expected true, false, a number, \"none\" or \"sqrt-d\""
                ))),
            },
        }
    }
}

/// Which positions the tokens of a batch get.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PositionMode {
    /// Token `s` of every sequence is at `offset + s`.
    #[default]
    Plain,
    /// fairseq / HF M2M100: non-pad tokens count from `padding_idx + offset + 1`, pad tokens get
    /// `padding_idx` and an all-zero encoding. Needs `padding_idx`.
    PaddingAware,
}

/// What to do with a positional table stored in the checkpoint (HF Marian and Pegasus keep
/// `model.encoder.embed_positions.weight`, Whisper keeps `positional_embedding`).
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum StoredTable {
    /// Generate the table; whatever the checkpoint stores is not read.
    #[default]
    Ignore,
    /// Read the tensor `name` (a full name, from the checkpoint's root), compare it with the
    /// generated table when the block is built, fail naming the tensor and the largest
    /// difference if it is further than `tolerance` (default: 1e-3 for f32 and f64 checkpoints,
    /// which absorbs tables computed in f32 up to position 10^4; 2e-3 for f16; 8e-3 for bf16),
    /// then generate as usual.
    Check {
        /// The tensor's full name.
        name: String,
        /// The largest difference accepted; a default by dtype when `None`.
        #[serde(default)]
        tolerance: Option<f64>,
    },
    /// Use the tensor `name` as the table instead of generating one.
    Load {
        /// The tensor's full name.
        name: String,
    },
}

/// How [`SinusoidalEmbedding`](crate::SinusoidalEmbedding) is built. `Default` is the paper's
/// encoding, no scaling, plain positions, no position limit, no stored table. Read from an HF
/// `config.json` with `candle-pe-formats`' `FromHfConfig`, whose field reader also reads
/// [`EmbeddingScale`], [`PositionMode`] and [`StoredTable`] through their `Deserialize`.
#[derive(Clone, Debug, PartialEq)]
pub struct SinusoidalEmbeddingConfig {
    /// The encoding convention. Default [`Preset::Vaswani`].
    pub preset: Preset,
    /// Replaces the preset's base (max period) when set.
    pub base: Option<f64>,
    /// Replaces the preset's frequency formula when set.
    pub frequencies: Option<Frequencies>,
    /// Replaces the preset's layout when set.
    pub layout: Option<ColumnLayout>,
    /// Replaces the preset's odd-width policy when set.
    pub odd_width: Option<OddWidth>,
    /// Replaces the preset's angle scale (diffusers' `scale`) when set.
    pub angle_scale: Option<f64>,
    /// The factor on token embeddings; HF `scale_embedding`. Default none.
    pub embedding_scale: EmbeddingScale,
    /// The padding token; HF `pad_token_id`.
    pub padding_idx: Option<u32>,
    /// Plain or padding-aware positions. Default plain.
    pub positions: PositionMode,
    /// Positions must stay below this (plus `padding_idx + 1` for padding-aware positions,
    /// as in fairseq's tables); HF `max_position_embeddings`. Default: only the 2^31 limit.
    pub max_positions: Option<usize>,
    /// The width, checked against the constructor's `width` when set; HF `d_model`.
    pub width: Option<usize>,
    /// The vocabulary size, checked against the constructor's when set; HF `vocab_size`.
    pub vocab: Option<usize>,
    /// What to do with a table stored in the checkpoint. Default: ignore it.
    pub stored_table: StoredTable,
}

impl Default for SinusoidalEmbeddingConfig {
    fn default() -> Self {
        Self {
            preset: Preset::Vaswani,
            base: None,
            frequencies: None,
            layout: None,
            odd_width: None,
            angle_scale: None,
            embedding_scale: EmbeddingScale::None,
            padding_idx: None,
            positions: PositionMode::Plain,
            max_positions: None,
            width: None,
            vocab: None,
            stored_table: StoredTable::Ignore,
        }
    }
}

impl SinusoidalEmbeddingConfig {
    /// The defaults for `preset`: the fairseq preset gets padding-aware positions with
    /// `padding_idx = 1` and `sqrt(width)` scaling, as fairseq and HF M2M100 build them.
    pub fn for_preset(preset: Preset) -> Self {
        let fairseq = preset == Preset::Fairseq;
        Self {
            preset,
            embedding_scale: if fairseq {
                EmbeddingScale::SqrtD
            } else {
                EmbeddingScale::None
            },
            padding_idx: fairseq.then_some(1),
            positions: if fairseq {
                PositionMode::PaddingAware
            } else {
                PositionMode::Plain
            },
            ..Self::default()
        }
    }

    /// The encoding spec at `width`: the preset with the overrides applied.
    pub fn spec(&self, width: usize) -> PeSpec {
        let preset = self.preset.spec(width);
        PeSpec {
            base: self.base.unwrap_or(preset.base),
            angle_scale: self.angle_scale.unwrap_or(preset.angle_scale),
            frequencies: self.frequencies.unwrap_or(preset.frequencies),
            layout: self.layout.unwrap_or(preset.layout),
            odd_width: self.odd_width.unwrap_or(preset.odd_width),
            width,
        }
    }
}
