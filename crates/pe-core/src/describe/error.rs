//! The error type of pe-core: every variant names the parameter at fault and its value.
//!
//! Errors convert into [`candle_core::Error`], so they compose with `?` in candle code:
//!
//! ```
//! use candle_pe_core::{PeSpec, SinusoidalEncoding};
//!
//! fn table() -> candle_core::Result<candle_core::Tensor> {
//!     let pe = SinusoidalEncoding::new(PeSpec::whisper(7))?; // odd width: rejected
//!     Ok(pe.range(0, 4, candle_core::DType::F32, &candle_core::Device::Cpu)?)
//! }
//! let err = table().unwrap_err();
//! assert!(err.to_string().contains("width 7"));
//! // Still pe-core's error, as data.
//! assert!(matches!(
//!     candle_pe_core::Error::from_candle(&err),
//!     Some(candle_pe_core::Error::OddWidthRejected { width: 7 })
//! ));
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
    #[error("frequencies {scheme} divide by {} for width {width}; {hint}", Readable(*.denominator))]
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

    /// A parameter that must be a finite number (and positive, for the base) is not.
    #[error("{name} must be {expected}, got {}", Readable(*.value))]
    InvalidParameter {
        /// The parameter, as its config field is named (`base`, `scale`, `rope_theta`, `factor`, ...).
        name: &'static str,
        /// What it must be.
        expected: &'static str,
        /// What it is.
        value: f64,
    },

    /// A frequency that is not finite or exceeds [`MAX_ANGLE`](crate::MAX_ANGLE) (a base below 1,
    /// or a large scale or rotary factor, makes frequencies grow).
    #[error("frequency {index} is {frequency:e}, above the largest angle computed exactly, 2^40 = 1099511627776 (a base below 1, or a large scale, makes frequencies grow)")]
    FrequencyOutOfRange {
        /// The index of the frequency (the sin/cos pair).
        index: usize,
        /// Its value.
        frequency: f64,
    },

    /// A position whose angle `|position| * frequency` exceeds [`MAX_ANGLE`](crate::MAX_ANGLE).
    #[error("position {} times the largest frequency {frequency:e} exceeds the largest angle computed exactly, 2^40 = 1099511627776; with this spec positions must stay within {} in magnitude", Readable(*.position), Readable(*.limit))]
    AngleOutOfRange {
        /// The position of largest magnitude asked for.
        position: f64,
        /// The largest frequency of the spec.
        frequency: f64,
        /// The largest position magnitude this spec accepts.
        limit: f64,
    },

    /// A position (offset + length, one of a tensor of positions, or a padding-aware position)
    /// outside `0 .. 2^31`.
    #[error("{name} {value} is outside the supported positions 0 ..= 2147483647 (2^31 - 1)")]
    PositionOutOfRange {
        /// What was out of range.
        name: &'static str,
        /// Its value.
        value: i128,
    },

    /// A multi-axis rotary position (which may be negative) outside
    /// `-(2^31 - 1) ..= 2^31 - 1`.
    #[error(
        "axis position {value} is outside the supported positions -2147483647 ..= 2147483647 (|position| < 2^31)"
    )]
    AxisPositionOutOfRange {
        /// The position.
        value: i128,
    },

    /// Positions or token ids of a dtype that is not an integer.
    #[error("{name} must be an integer tensor (u8, u32, i16, i32 or i64), got dtype {dtype:?}")]
    NotInteger {
        /// The argument: `positions` or `tokens`.
        name: &'static str,
        /// Its dtype.
        dtype: DType,
    },

    /// A timestep that is NaN, infinite, or not below 2^31 in magnitude.
    #[error("timesteps must be finite and below 2^31 = 2147483648 in magnitude, got {} at flat index {index}", Readable(*.value))]
    TimestepOutOfRange {
        /// The first timestep out of range.
        value: f64,
        /// Its index in the flattened tensor.
        index: usize,
    },

    /// A multi-axis coordinate that is NaN, infinite, or not below 2^31 in magnitude.
    #[error("coordinates must be finite and below 2^31 = 2147483648 in magnitude, got {value} at flat index {index}")]
    CoordinateOutOfRange {
        /// The first coordinate out of range.
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

    /// A tensor argument of the wrong shape.
    #[error("{name} must have shape {expected}, got shape {shape:?}")]
    ShapeMismatch {
        /// The argument.
        name: &'static str,
        /// The shape it must have.
        expected: String,
        /// Its shape.
        shape: Vec<usize>,
    },

    /// A token id outside the vocabulary.
    #[error("token id {token} is outside the vocabulary of {vocab} tokens (ids 0 .. {vocab})")]
    TokenOutOfRange {
        /// The token id.
        token: i64,
        /// The vocabulary size.
        vocab: usize,
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

    /// A rotary config without a field its rope type needs.
    #[error("rotary config: {name} is missing; {needed_by}")]
    MissingParameter {
        /// The config field.
        name: &'static str,
        /// What needs it.
        needed_by: &'static str,
    },

    /// A config (an HF `config.json`) whose field could not be read: wrong type, unknown
    /// `rope_type`, or a value out of its range.
    #[error("config field {field}: {message}")]
    Config {
        /// The field, as a path from the config's root (`rope_scaling.factor`).
        field: String,
        /// What is wrong with it.
        message: String,
    },

    /// An output dtype other than f32, f16, bf16 or f64.
    #[error("dtype {0:?} is not supported for positional encodings; use f32, f16, bf16 or f64")]
    UnsupportedDtype(DType),

    /// The CPU backend was asked for on another device.
    #[error(
        "backend Cpu needs the CPU device, got device {0:?}; use TableBackend::Auto or TableBackend::Generic"
    )]
    CpuBackendOnDevice(candle_core::DeviceLocation),

    /// [`TableBackend::Kernel`](crate::TableBackend::Kernel) where no kernel runs: a device
    /// other than CUDA, or the CPU without the kernels' host build.
    #[error(
        "backend Kernel needs a CUDA device, or on the CPU the host-kernels feature; got device {0:?}; use TableBackend::Auto"
    )]
    KernelsUnavailable(candle_core::DeviceLocation),

    /// An error from candle itself (a device or allocation failure).
    #[error(transparent)]
    Candle(#[from] candle_core::Error),
}

/// pe-core's result type.
pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    /// The pe-core error inside `err`, when `err` is one (converted by `?` in candle code, as
    /// pe-nn's blocks return them), looking through candle's context, path and backtrace
    /// wrappers.
    ///
    /// ```
    /// use candle_core::{Device, Tensor};
    /// use candle_pe_core::{Error, Positions};
    ///
    /// fn check(t: &Tensor) -> candle_core::Result<Positions> {
    ///     Ok(Positions::new(t)?)
    /// }
    /// let err = check(&Tensor::new(&[1i64 << 31], &Device::Cpu)?).unwrap_err();
    /// let err = err.context("layer 3");
    /// assert!(matches!(
    ///     Error::from_candle(&err),
    ///     Some(Error::PositionOutOfRange { value: 2147483648, .. })
    /// ));
    /// # Ok::<(), candle_core::Error>(())
    /// ```
    pub fn from_candle(err: &candle_core::Error) -> Option<&Error> {
        error_in(err)
    }
}

/// The error of type `E` that `err` carries, looking through candle's context, path and
/// backtrace wrappers: how [`Error::from_candle`] finds the engine's errors, and a crate with
/// its own error type (pe-formats) finds its own.
pub fn error_in<E: std::error::Error + 'static>(err: &candle_core::Error) -> Option<&E> {
    use candle_core::Error as C;
    match err {
        C::Io(io) => io.get_ref()?.downcast_ref(),
        C::WrappedContext { wrapped, .. } => wrapped.downcast_ref(),
        C::Context { inner, .. } | C::WithPath { inner, .. } | C::WithBacktrace { inner, .. } => {
            error_in(inner)
        }
        _ => None,
    }
}

/// A pe-core error as a candle error that keeps it as data: [`Error::from_candle`] gets it back,
/// and its message is pe-core's. (candle's `Error::wrap` keeps only the message, so the error
/// travels in the variant of candle's that keeps a `std::error::Error` and prints it as it is:
/// an `Io` error of kind `Other`.) A candle error that pe-core carried is returned as it was.
impl From<Error> for candle_core::Error {
    fn from(err: Error) -> Self {
        match err {
            Error::Candle(inner) => inner,
            other => candle_core::Error::Io(std::io::Error::other(other)),
        }
    }
}

/// A number as a message shows it: as written for integers and moderate magnitudes (`-1`,
/// `0.5`, `1099511627776`), in scientific notation otherwise (`1e-300`, not 300 digits).
pub(crate) struct Readable(pub f64);

impl std::fmt::Display for Readable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let v = self.0;
        let moderate = v == 0.0 || (1e-4..1e16).contains(&v.abs());
        match moderate || !v.is_finite() {
            true => write!(f, "{v}"),
            false => write!(f, "{v:e}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Readable;

    #[test]
    fn numbers_read_in_messages() {
        let shown = |v: f64| Readable(v).to_string();
        assert_eq!(shown(-1.0), "-1");
        assert_eq!(shown(0.5), "0.5");
        assert_eq!(shown(1099511627776.0), "1099511627776");
        assert_eq!(shown(1e-300), "1e-300");
        assert_eq!(shown(3.2e299), "3.2e299");
        assert_eq!(shown(-2e16), "-2e16");
        assert_eq!(shown(f64::NAN), "NaN");
        assert_eq!(shown(f64::NEG_INFINITY), "-inf");
    }
}
