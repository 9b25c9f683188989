//! The error type of pe-core: every variant names the parameter at fault and its value.
//!
//! Errors convert into [`candle_core::Error`], so they compose with `?` in candle code:
//!
//! ```
//! use pe_core::{PeSpec, SinusoidalEncoding};
//!
//! fn table() -> candle_core::Result<candle_core::Tensor> {
//!     let pe = SinusoidalEncoding::new(PeSpec::whisper(7))?; // odd width: rejected
//!     Ok(pe.range(0, 4, candle_core::DType::F32, &candle_core::Device::Cpu)?)
//! }
//! let err = table().unwrap_err();
//! assert!(err.to_string().contains("width 7"));
//! ```

use candle_core::DType;

/// What went wrong while describing or building a positional encoding.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The width (d_model) is zero or larger than [`MAX_WIDTH`](crate::MAX_WIDTH).
    #[error("width must be in 1 ..= {max}, got width {width}")]
    InvalidWidth {
        /// The width asked for.
        width: usize,
        /// The largest width supported.
        max: usize,
    },

    /// An odd width with [`OddWidth::Reject`](crate::OddWidth::Reject).
    #[error("width {width} is odd and this spec rejects odd widths (odd_width = Reject); use OddWidth::Split or OddWidth::ZeroPad, or an even width")]
    OddWidthRejected {
        /// The odd width.
        width: usize,
    },

    /// The frequency formula divides by zero or by a negative number for this width.
    #[error("frequencies {scheme} divide by {denominator} for width {width}; {hint}")]
    DegenerateFrequencies {
        /// `h-1` or `h-shift`.
        scheme: &'static str,
        /// The width of the spec.
        width: usize,
        /// The denominator of the exponent, zero or negative.
        denominator: f64,
        /// What to change.
        hint: &'static str,
    },

    /// A parameter of the spec that must be a finite number (and positive, for the base) is not.
    #[error("{name} must be {expected}, got {value}")]
    InvalidParameter {
        /// The parameter: `base`, `scale` or `frequencies shift`.
        name: &'static str,
        /// What it must be.
        expected: &'static str,
        /// What it is.
        value: f64,
    },

    /// A position (offset + length, a position id, or a padding-aware position) outside `0 .. 2^31`.
    #[error("{name} {value} is outside the supported positions 0 ..= 2147483647 (2^31 - 1)")]
    PositionOutOfRange {
        /// What was out of range.
        name: &'static str,
        /// Its value.
        value: i128,
    },

    /// Position ids or token ids of a dtype that is not an integer.
    #[error("{name} must be an integer tensor (u8, u32, i16, i32 or i64), got dtype {dtype:?}")]
    NotInteger {
        /// The argument: `position ids` or `tokens`.
        name: &'static str,
        /// Its dtype.
        dtype: DType,
    },

    /// A timestep that is NaN or infinite.
    #[error("timesteps must be finite, got {value} at flat index {index}")]
    NonFiniteTimestep {
        /// The first non-finite value.
        value: f64,
        /// Its index in the flattened tensor.
        index: usize,
    },

    /// A tensor argument of the wrong rank.
    #[error("{name} must have rank {expected}, got shape {shape:?}")]
    WrongRank {
        /// The argument.
        name: &'static str,
        /// The ranks it may have.
        expected: &'static str,
        /// Its shape.
        shape: Vec<usize>,
    },

    /// The requested table would not fit in memory; checked before anything is allocated.
    #[error("a table of {rows} rows x width {width} in {dtype:?} needs {bytes} bytes to build, but {why}; ask for fewer rows")]
    TooLarge {
        /// Rows asked for.
        rows: usize,
        /// The width of the table.
        width: usize,
        /// The output dtype.
        dtype: DType,
        /// Bytes needed to build it (the table plus the generator's working memory).
        bytes: u128,
        /// Why that cannot be had.
        why: String,
    },

    /// A rotary config without a parameter its variant needs.
    #[error("rotary config: {name} is missing")]
    MissingParameter {
        /// The config field.
        name: &'static str,
    },

    /// A `rope_scaling.rope_type` this library does not know.
    #[error("rotary config: rope_type {0:?} is not supported; use default, linear, dynamic, llama3 or yarn")]
    UnknownRopeType(String),

    /// An output dtype other than f32, f16, bf16 or f64.
    #[error("dtype {0:?} is not supported for positional encodings; use f32, f16, bf16 or f64")]
    UnsupportedDtype(DType),

    /// The CPU backend was asked for on another device.
    #[error(
        "backend Cpu needs the CPU device, got device {0:?}; use Backend::Auto or Backend::Generic"
    )]
    CpuBackendOnDevice(candle_core::DeviceLocation),

    /// An error from candle itself (a device or allocation failure).
    #[error(transparent)]
    Candle(#[from] candle_core::Error),
}

/// pe-core's result type.
pub type Result<T> = std::result::Result<T, Error>;

impl From<Error> for candle_core::Error {
    fn from(err: Error) -> Self {
        match err {
            Error::Candle(inner) => inner,
            other => candle_core::Error::wrap(other),
        }
    }
}
