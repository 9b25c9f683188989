//! [`At`]: where the tokens of a rotary call sit, the one position argument of
//! [`Rope::at`](super::Rope::at), [`Rope::at_shift`](super::Rope::at_shift) and the rotary
//! blocks. Three places ([`Place`]): consecutive positions from an offset (a decoder's KV cache
//! length), one position per token (a ragged batch, continuous batching, a cache that keeps its
//! own positions), or M-RoPE's `(3, ...)` rows (temporal, height, width). Each may carry the
//! length whose frequencies it uses ([`At::with_tracked_len`]: dynamic NTK's state kept by the
//! caller, longrope's factors chosen by a length), otherwise the frequencies are those of a
//! sequence reaching the largest position.
//!
//! An offset converts from a `usize`, per-token positions from a `&Tensor` or a
//! `&`[`Positions`]; M-RoPE positions say so with [`At::mrope`].
//!
//! ```
//! use candle_core::{Device, Tensor};
//! use candle_pe_core::{At, Place};
//!
//! let positions = Tensor::new(&[[0i64, 1], [0, 4], [0, 2]], &Device::Cpu)?;
//! assert!(matches!(At::from(1000).place(), Place::Offset(1000)));
//! assert!(matches!(At::from(&positions).place(), Place::Positions(_)));
//! let at = At::mrope(&positions).with_tracked_len(8192);
//! assert!(matches!(at.place(), Place::Mrope(_)));
//! assert_eq!(at.tracked_len(), Some(8192));
//! # Ok::<(), candle_pe_core::Error>(())
//! ```

use std::fmt;

use candle_core::Tensor;

use crate::describe::positions::{Positions, ToPositions};
use crate::{Error, Result};

/// Where the tokens of a call sit, and optionally the length whose frequencies they use.
#[derive(Clone, Copy, Debug)]
pub struct At<'a> {
    place: Place<'a>,
    tracked_len: Option<usize>,
}

/// The three ways to place tokens.
#[derive(Clone, Copy)]
pub enum Place<'a> {
    /// Token `s` of the sequence axis (or the token axis) at `offset + s`: `offset` is the
    /// number of tokens already in the KV cache.
    Offset(usize),
    /// One position per token (a tensor, checked on the way in, or checked [`Positions`]):
    /// `(batch, seq)` or `(tokens,)` for a block, any shape for the tables.
    Positions(&'a dyn ToPositions),
    /// M-RoPE's positions, `(3, batch, seq)` for a block, `(3, ...)` for the tables: rows
    /// temporal, height, width.
    Mrope(&'a dyn ToPositions),
}

impl fmt::Debug for Place<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Place::Offset(offset) => write!(f, "Offset({offset})"),
            Place::Positions(p) => write!(f, "Positions({:?})", p.dims()),
            Place::Mrope(p) => write!(f, "Mrope({:?})", p.dims()),
        }
    }
}

impl<'a> At<'a> {
    /// Consecutive positions from `offset`.
    pub fn offset(offset: usize) -> Self {
        Place::Offset(offset).into()
    }

    /// One position per token.
    pub fn positions(positions: &'a impl ToPositions) -> Self {
        Place::Positions(positions).into()
    }

    /// M-RoPE's `(3, ...)` positions (rows temporal, height, width).
    pub fn mrope(positions: &'a impl ToPositions) -> Self {
        Place::Mrope(positions).into()
    }

    /// The same positions with the frequencies of a sequence of `len` positions, whatever the
    /// positions: what a caller keeping dynamic NTK's tracked length passes
    /// ([`Rope::next_tracked_len`](super::Rope::next_tracked_len)), or a length choosing
    /// longrope's factors.
    pub fn with_tracked_len(self, len: usize) -> Self {
        Self {
            tracked_len: Some(len),
            ..self
        }
    }

    /// Where the tokens sit.
    pub fn place(&self) -> Place<'a> {
        self.place
    }

    /// The length whose frequencies the call uses, when given
    /// ([`with_tracked_len`](Self::with_tracked_len)).
    pub fn tracked_len(&self) -> Option<usize> {
        self.tracked_len
    }

    /// The per-token or M-RoPE positions a table takes; an offset is refused (a table of
    /// consecutive positions is [`Rope::range`](super::Rope::range), which takes the count).
    pub(crate) fn explicit(&self) -> Result<&'a dyn ToPositions> {
        match self.place {
            Place::Positions(p) | Place::Mrope(p) => Ok(p),
            Place::Offset(offset) => Err(Error::InvalidParameter {
                name: "the positions of a table",
                expected: "per-token or M-RoPE positions (an offset with a count is Rope::range)",
                value: offset as f64,
            }),
        }
    }
}

impl<'a> From<Place<'a>> for At<'a> {
    fn from(place: Place<'a>) -> Self {
        Self {
            place,
            tracked_len: None,
        }
    }
}

impl From<usize> for At<'_> {
    fn from(offset: usize) -> Self {
        Self::offset(offset)
    }
}

impl<'a> From<&'a Tensor> for At<'a> {
    fn from(positions: &'a Tensor) -> Self {
        Self::positions(positions)
    }
}

impl<'a> From<&'a Positions> for At<'a> {
    fn from(positions: &'a Positions) -> Self {
        Self::positions(positions)
    }
}
