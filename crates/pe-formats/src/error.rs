//! The error type of pe-formats: the engine's errors ([`candle_pe_core::Error`], carried as
//! [`Error::Core`]: a rope parameter out of range, a field of the wrong type) and what only a
//! reader of a format can get wrong (a field missing or given twice, a GGUF key, Qwen-VL's
//! vision tokens).
//!
//! Like the engine's, it converts into [`candle_core::Error`] and back:
//!
//! ```
//! use candle_pe_formats::{ConfigFields, Error};
//!
//! let json = serde_json::json!({"width": 512, "d_model": 1024});
//! let root = ConfigFields::new(&json)?;
//! let err = root.either::<usize>("width", &root, "d_model").unwrap_err();
//! let carried: candle_core::Error = err.into();
//! assert!(matches!(Error::from_candle(&carried), Some(Error::ConfigConflict { .. })));
//! # Ok::<(), Error>(())
//! ```

/// What went wrong while reading a checkpoint's positional encodings.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An error of the engine: a parameter the engine refuses, a field of the wrong type
    /// ([`candle_pe_core::Error::Config`]), or one of candle's.
    #[error(transparent)]
    Core(#[from] candle_pe_core::Error),

    /// A run of Qwen-VL vision tokens whose length is not the token count of its grid.
    #[error("sequence {sequence}: {kind} {index} has {tokens} tokens in the input ids, but its grid (t, h, w) = {grid:?} gives {expected} (t * h * w / spatial_merge_size^2)")]
    VisionTokens {
        /// The sequence of the batch.
        sequence: usize,
        /// `image`, `video` or `video frame` (Qwen3-VL gives each frame its own run).
        kind: &'static str,
        /// Which one, counting across the batch from 0.
        index: usize,
        /// The tokens of the run.
        tokens: usize,
        /// Its grid.
        grid: [usize; 3],
        /// The tokens the grid gives.
        expected: usize,
    },

    /// More or fewer runs of Qwen-VL vision tokens than the grids describe.
    #[error("the input ids hold {runs} runs of {kind} tokens, but the grids give {grids}")]
    VisionGrids {
        /// `image`, `video` or `video frame`.
        kind: &'static str,
        /// The runs of that kind in the input ids (attended tokens only).
        runs: usize,
        /// The runs the grids describe.
        grids: usize,
    },

    /// A config without a field that must be given.
    #[error("missing field {field}")]
    MissingField {
        /// The field, as a path from the config's root (`rope_scaling.low_freq_factor`).
        field: String,
    },

    /// A config giving one value twice, with two different values: in the rope dict and at
    /// the top level (`rope_parameters.rope_theta` and `rope_theta`), or under two names.
    #[error("config fields {field} = {value} and {other} = {other_value} disagree; give one of them, or the same value")]
    ConfigConflict {
        /// One field, as a path from the config's root.
        field: String,
        /// Its value, as the config writes it.
        value: String,
        /// The other field.
        other: String,
        /// Its value.
        other_value: String,
    },

    /// A GGUF metadata key (`llama.rope.freq_base`) or tensor (`rope_freqs.weight`) whose value
    /// cannot be read, or which says something no rope type of this crate can express.
    #[error("GGUF {key}: {message}")]
    GgufKey {
        /// The key or tensor name, as the file spells it.
        key: String,
        /// What is wrong with it.
        message: String,
    },

    /// A GGUF file without a key or tensor that must be given.
    #[error("GGUF {key} is missing; {needed_by}")]
    GgufMissing {
        /// The key or tensor name.
        key: String,
        /// What needs it.
        needed_by: &'static str,
    },

    /// A field of a rope override ([`RopeOverride`](crate::RopeOverride): `rope_scale`,
    /// `yarn_beta_fast`, ...) that cannot be applied: a value out of range, or a field the rope
    /// type in use gives no meaning to.
    #[error("rope override {field}: {message}")]
    Override {
        /// The field, as llama.cpp's flag in snake case (`rope_scale` is `--rope-scale`).
        field: &'static str,
        /// What is wrong with it.
        message: String,
    },

    /// Two GGUF keys (or a key and a tensor) that contradict each other.
    #[error("GGUF {key} = {value} contradicts {other} = {other_value}: {why}")]
    GgufConflict {
        /// One key or tensor.
        key: String,
        /// Its value, as read.
        value: String,
        /// The other key or tensor.
        other: String,
        /// Its value.
        other_value: String,
        /// Why they cannot both hold.
        why: &'static str,
    },
}

/// pe-formats' result type.
pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    /// The engine's error this one carries, if it is one.
    pub fn core(&self) -> Option<&candle_pe_core::Error> {
        match self {
            Error::Core(err) => Some(err),
            _ => None,
        }
    }

    /// The pe-formats error inside `err`, when `err` is one (converted by `?` in candle
    /// code), looking through candle's context, path and backtrace wrappers. An engine error
    /// that a pe-formats error carried travels as the engine's:
    /// [`candle_pe_core::Error::from_candle`] gets it back.
    pub fn from_candle(err: &candle_core::Error) -> Option<&Error> {
        candle_pe_core::error_in(err)
    }
}

/// An error of candle's, as the engine carries it.
impl From<candle_core::Error> for Error {
    fn from(err: candle_core::Error) -> Self {
        Error::Core(err.into())
    }
}

/// A pe-formats error as a candle error that keeps it as data, as the engine's does: an engine
/// error goes as the engine's ([`candle_pe_core::Error::from_candle`] gets it back), a format
/// error in candle's `Io` variant ([`Error::from_candle`] gets it back).
impl From<Error> for candle_core::Error {
    fn from(err: Error) -> Self {
        match err {
            Error::Core(core) => core.into(),
            other => candle_core::Error::Io(std::io::Error::other(other)),
        }
    }
}
