//! How a head's channels are arranged for the rotation: [`PairLayout`], which two channels turn
//! together, and [`MropeSlots`], which position axis each frequency slot of M-RoPE reads. Two
//! different questions, two words: a pair layout is *interleaved* or in *halves*; M-RoPE slots
//! come in *sections* or *alternate*.
//!
//! Neither changes the tables' frequencies: [`PairLayout`] is how a block applies them
//! (candle's `rope_i` or `rope`), [`MropeSlots`] which positions each column is computed at.
//!
//! ```
//! use candle_pe_core::{MropeSlots, PairLayout, RopeConfig};
//!
//! let mut config = RopeConfig::new(128, 1e6);
//! assert_eq!(config.pair_layout, PairLayout::Halves);
//! config.pair_layout = PairLayout::Interleaved; // DeepSeek-V3's rope_interleave
//! assert!(config.pair_layout.is_interleaved());
//! config.mrope_section = Some(vec![24, 20, 20]);
//! config.mrope_slots = MropeSlots::Alternating; // Qwen3-VL
//! ```

use serde::Serializer;

/// Which channels of a head turn together, as a model's Q and K weights pair them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PairLayout {
    /// Channels `i` and `i + rotary_dim / 2`: transformers' `rotate_half`, llama.cpp's NEOX rope
    /// (and M-RoPE), candle's `rope`. The default.
    #[default]
    Halves,
    /// Adjacent channels `(2i, 2i + 1)`: GPT-J, HF's `rope_interleave` (DeepSeek-V3), llama.cpp's
    /// NORM rope, candle's `rope_i`.
    Interleaved,
}

impl PairLayout {
    /// Whether the pairs are adjacent channels (candle's `rope_i`).
    pub fn is_interleaved(self) -> bool {
        self == PairLayout::Interleaved
    }

    /// Whether the pairs are the two halves (the default, which a config leaves unwritten).
    pub(crate) fn is_halves(&self) -> bool {
        *self == PairLayout::Halves
    }

    /// Writes the layout as HF's `rope_interleave` bool.
    pub(crate) fn serialize_flag<S: Serializer>(
        layout: &PairLayout,
        serializer: S,
    ) -> std::result::Result<S::Ok, S::Error> {
        serializer.serialize_bool(layout.is_interleaved())
    }
}

/// Which position axis (temporal, height, width) each frequency slot of M-RoPE takes its angle
/// from, given `mrope_section`'s counts per axis.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum MropeSlots {
    /// Each axis's slots in one run, the runs following each other (Qwen2-VL, Qwen2.5-VL). The
    /// default.
    #[default]
    Sections,
    /// The slots alternate temporal, height, width, slot by slot, while each axis has slots
    /// left (HF's `mrope_interleaved`: Qwen3-VL; llama.cpp's IMROPE).
    Alternating,
}

impl MropeSlots {
    /// Whether the slots alternate axis by axis (HF's `mrope_interleaved`).
    pub fn is_alternating(self) -> bool {
        self == MropeSlots::Alternating
    }

    /// Whether the slots follow in sections (the default, which a config leaves unwritten).
    pub(crate) fn is_sections(&self) -> bool {
        *self == MropeSlots::Sections
    }

    /// Writes the slots as HF's `mrope_interleaved` bool.
    pub(crate) fn serialize_flag<S: Serializer>(
        slots: &MropeSlots,
        serializer: S,
    ) -> std::result::Result<S::Ok, S::Error> {
        serializer.serialize_bool(slots.is_alternating())
    }
}
