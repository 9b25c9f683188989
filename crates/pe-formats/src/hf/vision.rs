//! [`VisionRopeConfig`]: the 2-D rotary embedding of a vision tower's attention, read from a
//! `config.json` (a vision-language model's, whose tower sits at `vision_config` or deeper, or a
//! tower's own), as transformers 5.24's rotary class of that tower computes it; and
//! [`VisionLayout`], how a tower deals its head's frequencies to a patch's row and column.
//!
//! Each tower is one row of `VISION_TOWERS`: its model types (the tower's own, `qwen2_vl_vision`,
//! and those of the models that nest it, `qwen2_vl` at `vision_config`), its layout and pair
//! layout, the field its width is read from, and its class's default `rope_theta`.
//! `scripts/fixtures/vision_ropes.py` records every tower of transformers with an axial rope
//! and the tables its class computes, and `tests/vision_ropes.rs` holds the rows to them.
//!
//! The head's width is `head_dim`, or its class's default (Pixtral's and Gemma 4's: 64), or
//! the tower's width (`hidden_size`; Qwen2-VL's `embed_dim`) over its heads
//! (`num_attention_heads` or `num_heads`), each of those its class's default where the config
//! gives none (a config saved with only what differs from its class's defaults). The tables are those of [`AxesRope::at`] at
//! positions `(row, column)` (MiniMax-M3-VL's: `(frame, row, column)`; Llama 4's numbered from
//! 1, [`VisionRopeConfig::patch_origin`]), one per patch,
//! `head_dim / 2` columns (fewer where part of the head passes through), which turn as
//! `pair_layout` says: [`PairLayout::Halves`] (transformers' `rotate_half`, candle's `rope`) or
//! [`PairLayout::Interleaved`] (adjacent pairs, candle's `rope_i`), over the whole head or, for
//! [`VisionLayout::HalvesPerAxis`] (Gemma 4), within each axis's half of it.
//! [`VisionRopeConfig::rotary`] is the block that turns them so.
//!
//! ```
//! use candle_core::{DType, Device};
//! use candle_pe_core::{patch_positions, PairLayout};
//! use candle_pe_formats::{FromHfConfig, VisionLayout, VisionRopeConfig};
//!
//! // Qwen2-VL's config.json: its vision_config gives no rope_parameters (theta 10000).
//! let json = serde_json::json!({"model_type": "qwen2_vl", "vision_config": {
//!     "depth": 32, "embed_dim": 1280, "hidden_size": 3584, "num_heads": 16}});
//! let vision = VisionRopeConfig::from_hf_config(&json)?;
//! assert_eq!((vision.head_dim, vision.rope_theta), (80, 10000.0)); // 1280 / 16
//! assert_eq!((vision.layout, vision.pair_layout), (VisionLayout::RowsFirst, PairLayout::Halves));
//! let (cos, sin) = vision.rope()?.at(&patch_positions(4, 6, &Device::Cpu)?, DType::F32)?;
//! assert_eq!(cos.dims(), &[24, 40]);
//!
//! // Gemma 4's: theta 100 by default, the column turning each head's first half, the row its
//! // second.
//! let json = serde_json::json!({"model_type": "gemma4", "vision_config": {
//!     "model_type": "gemma4_vision", "hidden_size": 768, "num_attention_heads": 12}});
//! let vision = VisionRopeConfig::from_hf_config(&json)?;
//! assert_eq!((vision.head_dim, vision.rope_theta), (64, 100.0));
//! assert_eq!(vision.layout, VisionLayout::HalvesPerAxis);
//! let q = candle_core::Tensor::randn(0f32, 1.0, (1, 12, 24, 64), &Device::Cpu)?;
//! let (q, k) = vision.rotary()?.apply(&q, &q, &patch_positions(4, 6, &Device::Cpu)?)?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use candle_pe_core::{AxesRope, Error as CoreError, PairLayout, DEFAULT_ROPE_THETA};
use candle_pe_nn::AxesRotaryEmbedding;
use serde_json::Value;

use crate::{ConfigFields, FromHfConfig, Result};

/// How a vision tower deals its head's frequencies to a patch's row and column (the tables'
/// columns, `head_dim / 2` of them, in order).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VisionLayout {
    /// Each axis turns `head_dim / 4` frequencies `rope_theta^(-4k / head_dim)` (those of a rope
    /// of `head_dim / 2` features), the row's columns first, then the column's: Qwen2-VL to
    /// Qwen3.5, GLM-4V, PaddleOCR-VL and most towers (transformers' `axial` rope).
    RowsFirst,
    /// The same frequencies, the column's columns first (Step 3.5, Inkling 2, SAM 3's ViT,
    /// Llama 4's encoder, SAM 2's memory attention).
    ColumnsFirst,
    /// The same frequencies, alternating frequency by frequency, the row's first
    /// (EfficientLoFTR, whose rope turns its whole width before its heads split it).
    AlternatingRowsFirst,
    /// The same frequencies, alternating frequency by frequency, the column's first
    /// (Kimi-K2.5).
    AlternatingColumnsFirst,
    /// One spectrum of `head_dim / 2` frequencies `rope_theta^(-2i / head_dim)`, the even ones
    /// the row's, the odd ones the column's (Pixtral; [`AxesRope::split_spectrum`]).
    SplitSpectrum,
    /// The frequencies and tables of `ColumnsFirst`, but each axis turns its own half of the
    /// head: the column the first `head_dim / 2` features, the row the rest, each by its half's
    /// two halves (Gemma 4, whose image processor gives its patches' positions as (x, y);
    /// transformers' `apply_multidimensional_rope`,
    /// [`AxesRotaryEmbedding::with_halves_per_axis`]).
    HalvesPerAxis,
    /// Three axes, at positions `(frame, row, column)`: each turns `s = 2 * floor(head_dim / 6)`
    /// features, `s / 2` frequencies `rope_theta^(-2k / s)`, the frame's columns first, then the
    /// row's, then the column's; the head's last `head_dim - 3 s` features pass through
    /// (MiniMax-M3-VL; [`AxesRotaryEmbedding::with_head_dim`]).
    FramesRowsColumns,
}

impl VisionLayout {
    /// The axes of a patch's position: 2 (row, column), or 3 (frame, row, column) for
    /// [`FramesRowsColumns`](Self::FramesRowsColumns).
    pub fn axes(self) -> usize {
        match self {
            VisionLayout::FramesRowsColumns => 3,
            _ => 2,
        }
    }

    /// A patch's position as this layout takes it: `(row, column)`, or `(frame, row, column)`.
    pub fn positions(self) -> &'static str {
        match self.axes() {
            3 => "(frame, row, column)",
            _ => "(row, column)",
        }
    }

    /// What a head of this layout must be wide, where `head_dim` is not.
    fn head_rule(self, head_dim: usize) -> Option<&'static str> {
        match self {
            VisionLayout::FramesRowsColumns => {
                (head_dim < 6).then_some("at least 6 (each of three axes turns a pair)")
            }
            _ => (head_dim == 0 || !head_dim.is_multiple_of(4))
                .then_some("a positive multiple of 4 (each of two axes turns pairs)"),
        }
    }

    /// The rope of this layout for heads of `head_dim` (a positive multiple of 4; at least 6
    /// for three axes) and base `rope_theta`, at positions `(row, column)` (`(frame, row,
    /// column)` for three axes).
    pub fn rope(self, head_dim: usize, rope_theta: f64) -> candle_pe_core::Result<AxesRope> {
        if let Some(expected) = self.head_rule(head_dim) {
            return Err(CoreError::InvalidParameter {
                name: "head_dim",
                expected,
                value: head_dim as f64,
            });
        }
        let per_axis = head_dim / 4;
        // Each arm builds the rope before its column order: the rope checks the width first.
        let axes = || AxesRope::new(&[head_dim / 2, head_dim / 2], rope_theta);
        match self {
            VisionLayout::RowsFirst => axes(),
            VisionLayout::ColumnsFirst | VisionLayout::HalvesPerAxis => {
                let rope = axes()?;
                let order: Vec<usize> = (per_axis..2 * per_axis).chain(0..per_axis).collect();
                rope.with_column_order(&order)
            }
            VisionLayout::AlternatingRowsFirst => {
                let rope = axes()?;
                let order: Vec<usize> = (0..per_axis).flat_map(|k| [k, per_axis + k]).collect();
                rope.with_column_order(&order)
            }
            VisionLayout::AlternatingColumnsFirst => {
                let rope = axes()?;
                let order: Vec<usize> = (0..per_axis).flat_map(|k| [per_axis + k, k]).collect();
                rope.with_column_order(&order)
            }
            VisionLayout::SplitSpectrum => AxesRope::split_spectrum(head_dim, 2, rope_theta),
            VisionLayout::FramesRowsColumns => {
                let s = 2 * (head_dim / 6);
                AxesRope::new(&[s, s, s], rope_theta)
            }
        }
    }
}

/// The 2-D rotary embedding of a vision tower's attention, as its `config.json` and its
/// transformers class give it (the module docs say how it is read).
#[derive(Clone, Debug, PartialEq)]
pub struct VisionRopeConfig {
    /// The tower's model type (`qwen2_vl_vision`), its row's first name.
    pub model_type: String,
    /// The width each rotation turns: each attention head's, or the whole width where
    /// `whole_width` says so.
    pub head_dim: usize,
    /// The base of the frequencies.
    pub rope_theta: f64,
    /// How the frequencies are dealt to the patch's row and column.
    pub layout: VisionLayout,
    /// Which features each column of the tables turns (within its axis's half of the head, for
    /// [`VisionLayout::HalvesPerAxis`]).
    pub pair_layout: PairLayout,
    /// The position of a patch in row 0 or column 0 on that axis: 0, but 1 for Llama 4's
    /// encoder, which numbers its patches from 1 and gives its class token (after the patches)
    /// the position `(0, 0)`, and for EfficientLoFTR. Patch `(r, c)` is at
    /// `(r + patch_origin, c + patch_origin)`.
    pub patch_origin: u32,
    /// The rope turns the whole width (`head_dim` is it) before the heads split it
    /// (EfficientLoFTR's coarse attention): turn q and k as `(batch, 1, n, head_dim)`, then
    /// split them into heads.
    pub whole_width: bool,
    /// The keys of the tower's `rope_parameters` that nothing read, as paths (transformers
    /// warns about them and reads on).
    pub unknown_keys: Vec<String>,
}

impl VisionRopeConfig {
    /// The tower's rope, at positions `(row, column)` (`(frame, row, column)` for three axes;
    /// [`VisionLayout::rope`]).
    pub fn rope(&self) -> candle_pe_core::Result<AxesRope> {
        self.layout.rope(self.head_dim, self.rope_theta)
    }

    /// The block that turns the tower's queries and keys (`(batch, heads, n, head_dim)`) at
    /// positions `(row, column)` (`(frame, row, column)` for three axes): its
    /// [`rope`](Self::rope), turning the pairs its layout and pair layout say.
    pub fn rotary(&self) -> candle_core::Result<AxesRotaryEmbedding> {
        let rotary = AxesRotaryEmbedding::from(self.rope()?)
            .with_pair_layout(self.pair_layout)
            .with_head_dim(self.head_dim)?;
        Ok(match self.layout {
            VisionLayout::HalvesPerAxis => rotary.with_halves_per_axis(),
            _ => rotary,
        })
    }
}

/// A vision tower: one row of `VISION_TOWERS`.
struct VisionTower {
    /// Its model types, the tower config's own.
    names: &'static [&'static str],
    /// The model types whose config nests it at `vision_config`.
    nested_in: &'static [&'static str],
    /// Other model types whose config nests it, each with the path it sits at.
    nested_at: &'static [(&'static str, &'static str)],
    layout: VisionLayout,
    pair_layout: PairLayout,
    /// The field of the tower's width, which its heads share.
    width: &'static str,
    /// Its config class's defaults of the width and the head count, which a config without
    /// them takes (one saved with only the fields that differ from them, as older transformers
    /// saved some sub-configs); `None`: both must be given.
    sizes: Option<(usize, usize)>,
    /// The fields of its head count, the first given read.
    heads: &'static [&'static str],
    /// The field of the rate its width is narrowed by before its heads share it (SAM 2's
    /// memory attention).
    downsample: Option<&'static str>,
    /// The row is a video tracker's memory attention, read by
    /// [`VisionRopeConfig::memory_attention_from_hf_config`], not a vision tower.
    memory: bool,
    /// Its config class's default `head_dim`, which a config without one takes; `None` where
    /// the class has none (the width over the heads).
    head_dim: Option<usize>,
    /// Its config class's default `rope_theta`.
    rope_theta: f64,
    /// The rope type its `rope_parameters` give: `axial`, Llama 4's `default`.
    rope_type: &'static str,
    /// [`VisionRopeConfig::patch_origin`].
    patch_origin: u32,
    /// The rope turns the tower's whole width (`width`), before its heads split it, at the
    /// frequencies of `partial_rotary_factor` (this default where the config gives none) times
    /// a head's width, which must be half the whole width (EfficientLoFTR's); `None` where it
    /// turns each head.
    whole_width: Option<f64>,
}

/// A tower (its names) nested at `vision_config` by the models `nested_in`, laid out as most
/// are, but for what the builders below change.
const fn tower(names: &'static [&'static str], nested_in: &'static [&'static str]) -> VisionTower {
    VisionTower {
        names,
        nested_in,
        nested_at: &[],
        layout: VisionLayout::RowsFirst,
        pair_layout: PairLayout::Halves,
        width: "hidden_size",
        sizes: None,
        heads: &["num_attention_heads", "num_heads"],
        downsample: None,
        memory: false,
        head_dim: None,
        rope_theta: DEFAULT_ROPE_THETA,
        rope_type: "axial",
        patch_origin: 0,
        whole_width: None,
    }
}

/// The memory attention of a SAM 2 video tracker (its names), nested at `nested_at`: adjacent
/// pairs, the column's frequencies first, heads `memory_attention_hidden_size /
/// (memory_attention_downsample_rate * memory_attention_num_attention_heads)` wide.
const fn memory_attention(
    names: &'static [&'static str],
    nested_at: &'static [(&'static str, &'static str)],
) -> VisionTower {
    VisionTower {
        width: "memory_attention_hidden_size",
        heads: &["memory_attention_num_attention_heads"],
        downsample: Some("memory_attention_downsample_rate"),
        memory: true,
        ..tower(names, &[])
            .layout(VisionLayout::ColumnsFirst)
            .adjacent()
            .nested_at(nested_at)
    }
}

impl VisionTower {
    const fn layout(mut self, layout: VisionLayout) -> Self {
        self.layout = layout;
        self
    }

    /// Its columns turn adjacent pairs (its tables repeat each value twice in a row).
    const fn adjacent(mut self) -> Self {
        self.pair_layout = PairLayout::Interleaved;
        self
    }

    const fn width(mut self, field: &'static str) -> Self {
        self.width = field;
        self
    }

    /// Its config class's default width and head count.
    const fn sizes(mut self, width: usize, heads: usize) -> Self {
        self.sizes = Some((width, heads));
        self
    }

    const fn head(mut self, head_dim: usize) -> Self {
        self.head_dim = Some(head_dim);
        self
    }

    const fn theta(mut self, rope_theta: f64) -> Self {
        self.rope_theta = rope_theta;
        self
    }

    const fn nested_at(mut self, nested_at: &'static [(&'static str, &'static str)]) -> Self {
        self.nested_at = nested_at;
        self
    }

    const fn rope_type(mut self, rope_type: &'static str) -> Self {
        self.rope_type = rope_type;
        self
    }

    const fn patch_origin(mut self, patch_origin: u32) -> Self {
        self.patch_origin = patch_origin;
        self
    }

    const fn whole_width(mut self, partial_rotary_factor: f64) -> Self {
        self.whole_width = Some(partial_rotary_factor);
        self
    }
}

/// Every vision tower this reader reads, each as transformers 5.24's rotary class computes it
/// (held by `crates/pe-formats/tests/vision_ropes.rs`).
const VISION_TOWERS: &[VisionTower] = &[
    tower(&["cohere_compass_vision"], &["cohere_compass"]).sizes(1152, 16),
    tower(&["dots3_note_vision_encoder"], &["dots3_note"]).sizes(1536, 24),
    // EfficientLoFTR's coarse attention (a keypoint matcher's, not a tower's): a "default" rope
    // over its whole width, before its heads split it, on its coarse feature map's grid,
    // patches numbered from 1, rows and columns alternating, turned as adjacent pairs.
    tower(&["efficientloftr"], &[])
        .sizes(256, 8)
        .layout(VisionLayout::AlternatingRowsFirst)
        .adjacent()
        .rope_type("default")
        .patch_origin(1)
        .whole_width(4.0),
    tower(&["ernie4_5_vl_moe_vision"], &["ernie4_5_vl_moe"]).sizes(1280, 16),
    tower(&["exaone4_5_vision"], &["exaone4_5"]).sizes(3584, 16),
    tower(
        &["gemma4_vision"],
        &["diffusion_gemma", "embedding_gemma2", "gemma4"],
    )
    .sizes(768, 12)
    .layout(VisionLayout::HalvesPerAxis)
    .head(64)
    .theta(100.0),
    tower(&["glm4v_moe_vision"], &["glm4v_moe"]).sizes(1536, 12),
    tower(&["glm4v_vision"], &["glm46v", "glm4v", "glmga"]).sizes(1536, 12),
    tower(&["glm5_next_vision"], &["glm5_next"]).sizes(1024, 16),
    tower(&["glm_ocr_vision"], &["glm_ocr"]).sizes(1024, 16),
    tower(&["inkling2_vision"], &["inkling2", "inkling2_loop"])
        .sizes(1024, 16)
        .layout(VisionLayout::ColumnsFirst)
        .adjacent(),
    tower(&["kimi_k25_vision"], &["kimi_k25"])
        .sizes(1152, 16)
        .layout(VisionLayout::AlternatingColumnsFirst),
    tower(&["lfm3_vl_vision"], &["lfm3_vl"])
        .sizes(1024, 16)
        .theta(1e6),
    // Llama 4's encoder: a "default" rope over its own grid, patches numbered from 1 (its
    // class token at (0, 0)), the column's frequencies first, turned as complex numbers.
    tower(&["llama4_vision_model"], &["llama4"])
        .sizes(768, 16)
        .layout(VisionLayout::ColumnsFirst)
        .adjacent()
        .rope_type("default")
        .patch_origin(1),
    tower(&["minimax_m3_vl_vision"], &["minimax_m3_vl"])
        .sizes(1280, 16)
        .layout(VisionLayout::FramesRowsColumns),
    tower(&["mlcd_vision_model"], &[]).sizes(1664, 16),
    tower(&["muse_glimmer_vision"], &["muse_glimmer"]).sizes(1536, 16),
    tower(&["muse_spark_vision"], &["muse_spark"]).sizes(1536, 16),
    tower(&["paddleocr_vl_vision"], &["paddleocr_vl"]).sizes(1152, 16),
    tower(&["pixtral"], &["lighton_ocr", "mistral3", "mistral_large4"])
        .sizes(1024, 16)
        .layout(VisionLayout::SplitSpectrum)
        .head(64),
    tower(&["qwen2_5_omni_vision_encoder"], &["qwen2_5_omni_thinker"])
        .sizes(3584, 16)
        .nested_at(&[("qwen2_5_omni", "thinker_config.vision_config")]),
    tower(
        &["qwen2_5_vl_vision"],
        &["hyperclovax_vision_v2", "qwen2_5_vl"],
    )
    .sizes(3584, 16),
    tower(&["qwen2_vl_vision"], &["qwen2_vl"])
        .sizes(1280, 16)
        .width("embed_dim")
        .nested_at(&[("colqwen2", "vlm_config.vision_config")]),
    tower(&["qwen3_5_moe_vision"], &["qwen3_5_moe"]).sizes(1152, 16),
    tower(&["qwen3_5_vision"], &["qwen3_5"]).sizes(1152, 16),
    tower(
        &["qwen3_omni_moe_vision_encoder"],
        &["qwen3_omni_moe_thinker"],
    )
    .sizes(1152, 16)
    .nested_at(&[("qwen3_omni_moe", "thinker_config.vision_config")]),
    tower(&["qwen3_vl_moe_vision"], &["qwen3_vl_moe"]).sizes(1152, 16),
    tower(&["qwen3_vl_vision"], &["cosmos3_omni", "qwen3_vl"]).sizes(1152, 16),
    tower(&["qwen4_exp_vision"], &["qwen4_exp"]).sizes(1152, 16),
    // SAM 3's ViT: adjacent pairs; nested in its detector and trackers' backbones.
    tower(&["sam3_vit_model"], &[])
        .sizes(1024, 16)
        .layout(VisionLayout::ColumnsFirst)
        .adjacent()
        .nested_at(&[
            ("sam3", "vision_config.backbone_config"),
            ("sam3_lite_text", "vision_config.backbone_config"),
            ("sam3_tracker", "vision_config.backbone_config"),
            ("sam3_tracker_video", "vision_config.backbone_config"),
            (
                "sam3_video",
                "detector_config.vision_config.backbone_config",
            ),
            ("sam3_vision_model", "backbone_config"),
        ]),
    // The memory attention of SAM 2's, EdgeTAM's and SAM 3's video trackers.
    memory_attention(&["edgetam_video"], &[]).sizes(256, 1),
    memory_attention(&["sam2_video"], &[]).sizes(256, 1),
    memory_attention(&["sam3_tracker_video"], &[("sam3_video", "tracker_config")]).sizes(256, 1),
    tower(&["step3p5_vision"], &["step3p7"])
        .sizes(1536, 16)
        .layout(VisionLayout::ColumnsFirst),
    tower(&["video_llama_3_vision"], &["video_llama_3"]).sizes(768, 12),
];

/// The keys a tower's `rope_parameters` may give.
const ROPE_KEYS: [&str; 3] = ["rope_type", "type", "rope_theta"];

impl VisionTower {
    /// The rows of vision towers, or of memory attentions (`memory`).
    fn rows(memory: bool) -> impl Iterator<Item = &'static VisionTower> {
        VISION_TOWERS.iter().filter(move |t| t.memory == memory)
    }

    /// The row (of a tower, or a memory attention) whose own model type is `model_type`.
    fn named(model_type: &str, memory: bool) -> Option<&'static VisionTower> {
        Self::rows(memory).find(|t| t.names.contains(&model_type))
    }

    /// The row (of a tower, or a memory attention) the model `model_type` nests, and the path
    /// it sits at.
    fn nested_by(model_type: &str, memory: bool) -> Option<(&'static VisionTower, &'static str)> {
        Self::rows(memory).find_map(|t| {
            let at = t
                .nested_in
                .contains(&model_type)
                .then_some("vision_config")
                .or_else(|| {
                    t.nested_at
                        .iter()
                        .find(|(m, _)| *m == model_type)
                        .map(|(_, path)| *path)
                });
            at.map(|path| (t, path))
        })
    }

    /// The tower's rope from its config's fields.
    fn read(&self, fields: &ConfigFields) -> Result<VisionRopeConfig> {
        let params = fields.object("rope_parameters")?;
        let mut unknown_keys = Vec::new();
        let mut rope_theta = None;
        let mut partial_rotary_factor = None;
        if let Some(params) = &params {
            let rope_type: Option<String> = match params.get("rope_type")? {
                Some(t) => Some(t),
                None => params.get("type")?,
            };
            if let Some(t) = rope_type.filter(|t| t != self.rope_type) {
                let name = if params.has("rope_type") {
                    "rope_type"
                } else {
                    "type"
                };
                return Err(params.invalid(
                    name,
                    format!(
                        "this tower's rope is of type {:?}, got {t:?}",
                        self.rope_type
                    ),
                ));
            }
            rope_theta = params.either::<f64>("rope_theta", fields, "rope_theta")?;
            let factor_read = self.whole_width.is_some();
            if factor_read {
                partial_rotary_factor = params.either::<f64>(
                    "partial_rotary_factor",
                    fields,
                    "partial_rotary_factor",
                )?;
            }
            unknown_keys = params
                .keys()
                .filter(|k| params.has(k) && !ROPE_KEYS.contains(k))
                .filter(|k| !(factor_read && *k == "partial_rotary_factor"))
                .map(|k| params.path_of(k))
                .collect();
        }
        let rope_theta = match rope_theta {
            Some(theta) => theta,
            None => fields.get::<f64>("rope_theta")?.unwrap_or(self.rope_theta),
        };
        let (head_dim, source) = match self.whole_width {
            Some(default) => {
                let factor = match partial_rotary_factor {
                    Some(factor) => factor,
                    None => fields.get("partial_rotary_factor")?.unwrap_or(default),
                };
                self.whole(fields, factor)?
            }
            None => self.per_head(fields)?,
        };
        if let Some(expected) = self.layout.head_rule(head_dim) {
            return Err(fields.invalid(
                source,
                format!("a head {head_dim} wide: this tower's is {expected}"),
            ));
        }
        let config = VisionRopeConfig {
            model_type: self.names[0].to_string(),
            head_dim,
            rope_theta,
            layout: self.layout,
            pair_layout: self.pair_layout,
            patch_origin: self.patch_origin,
            whole_width: self.whole_width.is_some(),
            unknown_keys,
        };
        config.rope()?;
        Ok(config)
    }

    /// The tower's width: its `width` field, else its class's default.
    fn width_of(&self, fields: &ConfigFields) -> Result<usize> {
        match (fields.get(self.width)?, self.sizes) {
            (Some(width), _) => Ok(width),
            (None, Some((width, _))) => Ok(width),
            (None, None) => Err(fields.missing(self.width)),
        }
    }

    /// The field of the tower's head count (the first of `heads` given) and its value, else
    /// its class's default.
    fn heads_of(&self, fields: &ConfigFields) -> Result<(usize, &'static str)> {
        let field = self
            .heads
            .iter()
            .copied()
            .find(|f| fields.has(f))
            .unwrap_or(self.heads[0]);
        match (fields.get(field)?, self.sizes) {
            (Some(heads), _) => Ok((heads, field)),
            (None, Some((_, heads))) => Ok((heads, field)),
            (None, None) => Err(fields.missing(field)),
        }
    }

    /// The width of each head and the field it was read from: `head_dim`, its class's default,
    /// or the width over the heads.
    fn per_head(&self, fields: &ConfigFields) -> Result<(usize, &'static str)> {
        if let Some(head_dim) = fields.get::<usize>("head_dim")?.or(self.head_dim) {
            return Ok((head_dim, "head_dim"));
        }
        let width = self.width_of(fields)?;
        let (heads, heads_field) = self.heads_of(fields)?;
        // SAM 2's memory attention narrows its width by its downsample rate (1 when the config
        // gives none, as its class's default).
        let rate: usize = match self.downsample {
            Some(field) => fields.get(field)?.unwrap_or(1),
            None => 1,
        };
        let shares = heads * rate;
        if shares == 0 || !width.is_multiple_of(shares) {
            let rate = match self.downsample {
                Some(field) if rate != 1 => format!(" (by {} = {rate})", fields.path_of(field)),
                _ => String::new(),
            };
            return Err(fields.invalid(
                heads_field,
                format!(
                    "{heads} heads do not share {} = {width}{rate} evenly",
                    fields.path_of(self.width)
                ),
            ));
        }
        Ok((width / shares, self.width))
    }

    /// The whole width a tower whose rope turns its whole width turns, checked as its class
    /// builds its table: `partial_rotary_factor` (`factor`) times a head's width (`head_dim`, or
    /// the width over the heads, rounded down) gives the rope's features, which must be half the
    /// whole width.
    fn whole(&self, fields: &ConfigFields, factor: f64) -> Result<(usize, &'static str)> {
        let width = self.width_of(fields)?;
        let head = match fields.get::<usize>("head_dim")? {
            Some(head_dim) => head_dim,
            None => {
                let (heads, heads_field) = self.heads_of(fields)?;
                if heads == 0 {
                    return Err(fields.invalid(heads_field, "0 heads"));
                }
                width / heads
            }
        };
        let features = (head as f64 * factor) as usize;
        if features.checked_mul(2) != Some(width) {
            return Err(fields.invalid(
                self.width,
                format!(
                    "a rope over the whole width {width} takes partial_rotary_factor x the head \
                     width = {}, got {factor} x {head} = {features}",
                    width / 2
                ),
            ));
        }
        Ok((width, self.width))
    }
}

impl FromHfConfig for VisionRopeConfig {
    /// The rope of the vision tower of `config`: a vision-language model's (its `model_type`
    /// names where the tower sits; a `model_type` there, if any, must be that tower's or the
    /// model's), or a tower's own config.
    fn from_hf_config(config: &Value) -> Result<Self> {
        Self::read_module(config, false)
    }
}

impl VisionRopeConfig {
    /// The rope of the memory attention of a video tracker's `config` (SAM 2's, EdgeTAM's and
    /// SAM 3's `sam2_video`, `edgetam_video` and `sam3_tracker_video`, or SAM 3's `sam3_video`,
    /// which nests its tracker at `tracker_config`): the attention of each frame's features to
    /// the memory of earlier frames, at positions `(row, column)` of the feature grid.
    ///
    /// ```
    /// use candle_pe_formats::{VisionLayout, VisionRopeConfig};
    ///
    /// let json = serde_json::json!({"model_type": "sam2_video",
    ///     "memory_attention_hidden_size": 256, "memory_attention_num_attention_heads": 1});
    /// let memory = VisionRopeConfig::memory_attention_from_hf_config(&json)?;
    /// assert_eq!((memory.head_dim, memory.layout), (256, VisionLayout::ColumnsFirst));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn memory_attention_from_hf_config(config: &Value) -> Result<Self> {
        Self::read_module(config, true)
    }

    /// The rope of the vision tower (or, `memory`, the memory attention) of `config`.
    fn read_module(config: &Value, memory: bool) -> Result<Self> {
        let what = if memory {
            "memory attention"
        } else {
            "vision tower"
        };
        let root = ConfigFields::new(config)?;
        let model_type: String = root.require("model_type")?;
        if let Some(tower) = VisionTower::named(&model_type, memory) {
            return tower.read(&root);
        }
        let Some((tower, path)) = VisionTower::nested_by(&model_type, memory) else {
            return Err(root.invalid(
                "model_type",
                format!("{model_type:?} has no {what} whose rope this reader knows"),
            ));
        };
        let fields = root.object(path)?.ok_or_else(|| root.missing(path))?;
        if let Some(own) = fields.get::<String>("model_type")? {
            // Older configs give the tower the model's own model_type.
            if !tower.names.contains(&own.as_str()) && own != model_type {
                return Err(fields.invalid(
                    "model_type",
                    format!(
                        "{model_type:?} nests the {what} {:?} here, got {own:?}",
                        tower.names[0]
                    ),
                ));
            }
        }
        tower.read(&fields)
    }
}
