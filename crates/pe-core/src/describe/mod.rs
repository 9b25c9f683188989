//! The description of a table, checked before anything is generated: the sinusoidal
//! conventions ([`spec`]), the frequencies and where each lands in a row (`freq`, computed in
//! double-double by `exact::dd`; its limits are [`MAX_POSITION`](crate::MAX_POSITION),
//! [`MAX_WIDTH`](crate::MAX_WIDTH) and [`MAX_ANGLE`](crate::MAX_ANGLE)), the positions a
//! request asks for ([`positions`]) and what can go wrong ([`error`]). Reading a checkpoint's
//! metadata (`config.json`, GGUF) is `candle-pe-formats`' work, never this crate's.

pub(crate) mod error;
pub(crate) mod freq;
pub(crate) mod positions;
pub(crate) mod spec;
