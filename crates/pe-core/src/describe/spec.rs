//! The description of one sinusoidal encoding: frequencies, layout, odd-width policy, and the
//! named presets that real checkpoints use.
//!
//! Every framework's "sinusoidal positional encoding" differs in four choices (see
//! `docs/conventions.md`). A [`PeSpec`] names all of them; a [`Preset`] is a ready [`PeSpec`]
//! that can be tweaked like any other value. Each choice prints as its formula.
//!
//! ```
//! use candle_pe_core::{Frequencies, ColumnLayout, OddWidth, PeSpec, Preset};
//!
//! let fairseq = PeSpec::fairseq(512);
//! assert_eq!(fairseq.frequencies, Frequencies::HalfMinusOne { guarded: false });
//! assert_eq!(fairseq.frequencies.to_string(), "base^(-i/(h-1))");
//! assert_eq!(fairseq.layout, ColumnLayout::SinCos);
//! assert_eq!(fairseq.odd_width, OddWidth::ZeroPad);
//!
//! // Presets are plain values: start from one and change what your checkpoint does differently.
//! let custom = Preset::Vaswani.spec(64).with_base(100.0).with_layout(ColumnLayout::SinCos);
//! assert_eq!(custom.base, 100.0);
//! assert_eq!("stable-diffusion".parse::<Preset>().unwrap(), Preset::StableDiffusion);
//! ```

use serde::{Deserialize, Serialize};

/// How the angular frequency `w_i` of pair `i` is computed (`h = d / 2`, integer division).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Frequencies {
    /// `w_i = base^(-2i/d)`: the paper's `d`-denominator form (Vaswani, Marian, XLM, burn).
    Paper,
    /// `w_i = base^(-i/(h-1))`: the tensor2tensor lineage (fairseq, Whisper, M2M100, MusicGen).
    /// `guarded` divides by `max(h-1, 1)` as tensor2tensor does; unguarded, widths 2 and 3 are
    /// an error (fairseq and Whisper divide by zero there).
    HalfMinusOne {
        /// Divide by `max(h-1, 1)` (tensor2tensor) instead of `h-1`.
        guarded: bool,
    },
    /// `w_i = base^(-i/(h-shift))`: diffusers' `downscale_freq_shift`. `shift = 1` equals the
    /// unguarded `h-1` form; `shift = 0` gives `base^(-i/h)`.
    HalfShift {
        /// diffusers' `downscale_freq_shift`.
        shift: f64,
    },
}

/// Where the `sin` and `cos` columns go in a row of width `d`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ColumnLayout {
    /// Column `2i` is `sin(p w_i)`, column `2i+1` is `cos(p w_i)`.
    Interleaved,
    /// All sines, then all cosines.
    SinCos,
    /// All cosines, then all sines (MusicGen, diffusers `flip_sin_to_cos`).
    CosSin,
}

/// What an odd width `d` means.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum OddWidth {
    /// `ceil(d/2)` sine columns and `floor(d/2)` cosine columns; frequencies use the odd `d`.
    Split,
    /// The table of width `d - 1`, then one column of zeros.
    ZeroPad,
    /// An odd width is an error.
    Reject,
}

/// The formula: `base^(-2i/d)`, `base^(-i/(h-1))`, `base^(-i/max(h-1,1))`, `base^(-i/(h-S))`.
impl std::fmt::Display for Frequencies {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Frequencies::Paper => f.write_str("base^(-2i/d)"),
            Frequencies::HalfMinusOne { guarded: false } => f.write_str("base^(-i/(h-1))"),
            Frequencies::HalfMinusOne { guarded: true } => f.write_str("base^(-i/max(h-1,1))"),
            Frequencies::HalfShift { shift } if *shift == 0.0 => f.write_str("base^(-i/h)"),
            Frequencies::HalfShift { shift } => write!(f, "base^(-i/(h-{shift}))"),
        }
    }
}

/// `interleaved`, `sin|cos` or `cos|sin`.
impl std::fmt::Display for ColumnLayout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ColumnLayout::Interleaved => "interleaved",
            ColumnLayout::SinCos => "sin|cos",
            ColumnLayout::CosSin => "cos|sin",
        })
    }
}

/// `split`, `zero-pad` or `reject`.
impl std::fmt::Display for OddWidth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            OddWidth::Split => "split",
            OddWidth::ZeroPad => "zero-pad",
            OddWidth::Reject => "reject",
        })
    }
}

/// One sinusoidal encoding, fully described.
///
/// Build it from a preset ([`PeSpec::fairseq`], [`Preset::spec`], ...) and adjust it with the
/// `with_*` methods. [`SinusoidalEncoding::new`](crate::SinusoidalEncoding::new) checks it.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct PeSpec {
    /// Number of output columns (`d_model`).
    pub width: usize,
    /// The base of the frequencies (a.k.a. max period, max timescale). Default 10000.
    pub base: f64,
    /// Multiplies every angle: `sin(angle_scale * p * w_i)` (diffusers' `scale`). Default 1.
    pub angle_scale: f64,
    /// The frequency formula.
    pub frequencies: Frequencies,
    /// The column layout.
    pub layout: ColumnLayout,
    /// What an odd width means.
    pub odd_width: OddWidth,
}

/// The base every preset uses.
pub const DEFAULT_BASE: f64 = 10_000.0;

impl PeSpec {
    fn preset(
        width: usize,
        frequencies: Frequencies,
        layout: ColumnLayout,
        odd_width: OddWidth,
    ) -> Self {
        Self {
            width,
            base: DEFAULT_BASE,
            angle_scale: 1.0,
            frequencies,
            layout,
            odd_width,
        }
    }

    /// The paper's encoding: `d`-denominator frequencies, interleaved, odd widths split.
    /// Used by XLM, DistilBERT (sinusoidal option), keras-hub `SinePositionEncoding`, the PyTorch
    /// tutorial, burn `PositionalEncoding` and the old TensorFlow tutorial.
    pub fn vaswani(width: usize) -> Self {
        Self::preset(
            width,
            Frequencies::Paper,
            ColumnLayout::Interleaved,
            OddWidth::Split,
        )
    }

    /// `d`-denominator frequencies, sin|cos, odd widths split: HF Marian, Pegasus, RoFormer.
    pub fn marian(width: usize) -> Self {
        Self::preset(
            width,
            Frequencies::Paper,
            ColumnLayout::SinCos,
            OddWidth::Split,
        )
    }

    /// Guarded `h-1` frequencies, sin|cos, odd widths zero-padded: tensor2tensor.
    pub fn tensor2tensor(width: usize) -> Self {
        let freqs = Frequencies::HalfMinusOne { guarded: true };
        Self::preset(width, freqs, ColumnLayout::SinCos, OddWidth::ZeroPad)
    }

    /// `h-1` frequencies, sin|cos, odd widths zero-padded; used with padding-aware positions.
    /// fairseq, HF M2M100, NLLB, XGLM, Speech2Text, FSMT.
    pub fn fairseq(width: usize) -> Self {
        let freqs = Frequencies::HalfMinusOne { guarded: false };
        Self::preset(width, freqs, ColumnLayout::SinCos, OddWidth::ZeroPad)
    }

    /// `h-1` frequencies, sin|cos, odd widths rejected: OpenAI Whisper, HF Whisper encoder.
    pub fn whisper(width: usize) -> Self {
        let freqs = Frequencies::HalfMinusOne { guarded: false };
        Self::preset(width, freqs, ColumnLayout::SinCos, OddWidth::Reject)
    }

    /// `h-1` frequencies, cos|sin, odd widths zero-padded: HF MusicGen.
    pub fn musicgen(width: usize) -> Self {
        let freqs = Frequencies::HalfMinusOne { guarded: false };
        Self::preset(width, freqs, ColumnLayout::CosSin, OddWidth::ZeroPad)
    }

    /// diffusers `get_timestep_embedding` defaults: `h-shift` with shift 1, sin|cos, zero-pad.
    /// Set [`PeSpec::angle_scale`] for its `scale` and [`ColumnLayout::CosSin`] for `flip_sin_to_cos`.
    pub fn diffusers(width: usize) -> Self {
        let freqs = Frequencies::HalfShift { shift: 1.0 };
        Self::preset(width, freqs, ColumnLayout::SinCos, OddWidth::ZeroPad)
    }

    /// diffusers UNet2DCondition timesteps (Stable Diffusion): shift 0, cos|sin, zero-pad.
    pub fn stable_diffusion(width: usize) -> Self {
        let freqs = Frequencies::HalfShift { shift: 0.0 };
        Self::preset(width, freqs, ColumnLayout::CosSin, OddWidth::ZeroPad)
    }

    /// The same spec with another width.
    pub fn with_width(mut self, width: usize) -> Self {
        self.width = width;
        self
    }

    /// The same spec with another base (max period).
    pub fn with_base(mut self, base: f64) -> Self {
        self.base = base;
        self
    }

    /// The same spec with another angle scale.
    pub fn with_angle_scale(mut self, angle_scale: f64) -> Self {
        self.angle_scale = angle_scale;
        self
    }

    /// The same spec with another frequency formula.
    pub fn with_frequencies(mut self, frequencies: Frequencies) -> Self {
        self.frequencies = frequencies;
        self
    }

    /// The same spec with another layout.
    pub fn with_layout(mut self, layout: ColumnLayout) -> Self {
        self.layout = layout;
        self
    }

    /// The same spec with another odd-width policy.
    pub fn with_odd_width(mut self, odd_width: OddWidth) -> Self {
        self.odd_width = odd_width;
        self
    }
}

/// The named conventions of `docs/conventions.md`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Preset {
    /// [`PeSpec::vaswani`].
    Vaswani,
    /// [`PeSpec::marian`].
    Marian,
    /// [`PeSpec::tensor2tensor`].
    Tensor2tensor,
    /// [`PeSpec::fairseq`].
    Fairseq,
    /// [`PeSpec::whisper`].
    Whisper,
    /// [`PeSpec::musicgen`].
    Musicgen,
    /// [`PeSpec::diffusers`].
    Diffusers,
    /// [`PeSpec::stable_diffusion`].
    StableDiffusion,
}

impl Preset {
    /// Every preset, in the order of `docs/conventions.md`.
    pub const ALL: [Preset; 8] = [
        Preset::Vaswani,
        Preset::Marian,
        Preset::Tensor2tensor,
        Preset::Fairseq,
        Preset::Whisper,
        Preset::Musicgen,
        Preset::Diffusers,
        Preset::StableDiffusion,
    ];

    /// The preset's spec at the given width.
    pub fn spec(self, width: usize) -> PeSpec {
        match self {
            Preset::Vaswani => PeSpec::vaswani(width),
            Preset::Marian => PeSpec::marian(width),
            Preset::Tensor2tensor => PeSpec::tensor2tensor(width),
            Preset::Fairseq => PeSpec::fairseq(width),
            Preset::Whisper => PeSpec::whisper(width),
            Preset::Musicgen => PeSpec::musicgen(width),
            Preset::Diffusers => PeSpec::diffusers(width),
            Preset::StableDiffusion => PeSpec::stable_diffusion(width),
        }
    }

    /// The preset's name, as [`str::parse`] accepts it.
    pub fn name(self) -> &'static str {
        match self {
            Preset::Vaswani => "vaswani",
            Preset::Marian => "marian",
            Preset::Tensor2tensor => "tensor2tensor",
            Preset::Fairseq => "fairseq",
            Preset::Whisper => "whisper",
            Preset::Musicgen => "musicgen",
            Preset::Diffusers => "diffusers",
            Preset::StableDiffusion => "stable-diffusion",
        }
    }

    /// The models and libraries whose checkpoints use this preset.
    pub fn models(self) -> &'static str {
        match self {
            Preset::Vaswani => "paper; XLM, DistilBERT (sinusoidal option), keras-hub SinePositionEncoding, PyTorch tutorial, burn PositionalEncoding, old TF tutorial",
            Preset::Marian => "HF Marian, Pegasus, RoFormer table",
            Preset::Tensor2tensor => "tensor2tensor",
            Preset::Fairseq => "fairseq, HF M2M100, NLLB, XGLM, Speech2Text, FSMT",
            Preset::Whisper => "OpenAI Whisper, HF Whisper encoder",
            Preset::Musicgen => "HF MusicGen",
            Preset::Diffusers => "diffusers get_timestep_embedding",
            Preset::StableDiffusion => "diffusers UNet2DCondition (flip_sin_to_cos=True, freq_shift=0)",
        }
    }
}

impl std::fmt::Display for Preset {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Preset {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<Self, Self::Err> {
        let wanted = s.trim().to_ascii_lowercase().replace('_', "-");
        Preset::ALL
            .into_iter()
            .find(|p| p.name() == wanted)
            .ok_or_else(|| {
                let names: Vec<_> = Preset::ALL.iter().map(|p| p.name()).collect();
                format!("unknown preset {s:?}; expected one of {}", names.join(", "))
            })
    }
}
