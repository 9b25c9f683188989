//! [`HfModelType`]: what a Hugging Face `model_type` changes in how its `config.json` is read,
//! one row of data per model type; and [`HfTextConfig`], the object of a `config.json` that
//! holds the text decoder's fields (the root, or the `text_config` a vision-language model
//! nests them in) with the row of its model type.
//!
//! The readers of `config.json` (the rope reader [`RopeConfigs`](crate::RopeConfigs), the
//! Qwen-VL position ids' [`QwenVlConfig`](crate::QwenVlConfig), pe-models' decoder config and
//! `pe inspect`) look a model type up here and read the fields of its row; none of them names
//! a model type. A model type without a row reads as most models do (every field off).
//!
//! A new model type whose transformers config class or model code changes how its
//! `config.json` reads is one row in `MODEL_TYPES`, most of them one line,
//! `row(&["cohere"]).theta(500_000.0).interleaved()`; `scripts/fixtures/model_types.py`
//! records every model type of transformers, and `tests/model_types.rs` holds the rows to it.
//! A row gives:
//! - `names`: the `model_type` strings it covers, the text config's own (`gemma3_text`) as well
//!   as the outer one (`gemma3`); with `prefix`, also every model type that starts with one of
//!   them and that no row names (`gemma3` covers `gemma3n`);
//! - `head_dim`: the config class's `head_dim` default, when it is not `hidden_size /
//!   num_attention_heads` (Gemma 1 to 3: 256, Qwen3: 128);
//! - `rope_theta`: the config class's `default_theta`, the `rope_theta` of a config that gives
//!   none (transformers' 10000 unless the class says otherwise: Mixtral 1e6, SmolLM3 2e6), or
//!   none where the class fills in none and its code fails without one (Laguna, Mellum): such
//!   a config is refused, naming the field;
//!   `sliding_rope_theta` the sliding layers' own, where it differs (Gemma 3: 1e6 and 1e4);
//! - `partial_rotary_factor`: the config class's default share of the head that turns, in a
//!   config that gives none (1 unless the class says otherwise: GPT-NeoX and StableLM 0.25,
//!   Phi and GLM-4 0.5, Moonshine 0.9); `sliding_partial_rotary_factor` the sliding layers' own,
//!   where it differs (NeoMME: 0.25 on full layers, 1 on sliding ones);
//! - `pair_layout`: the default of `rope_interleave`, [`PairLayout::Interleaved`] where the
//!   config class defaults it to true (DeepSeek-V3) or the model always turns adjacent pairs
//!   (Llama 4, Cohere, GLM-4);
//! - `nope_interval`: without `no_rope_layers`, every `no_rope_layer_interval`-th layer (this
//!   default) has no rotary (SmolLM3, Llama 4, Mistral Large 4);
//! - `sliding_only`: its attention turns only the sliding layers, so the `full_attention` ones
//!   of `layer_types` are NoPE ([`SlidingOnly`]: AFMoE, Cohere 2 and its MoE, EXAONE 4 and
//!   its MoE, Flint, Kolibri);
//! - `rope_switch`: what turns the rope on ([`RopeSwitch`]); off, every layer is NoPE
//!   (GraniteMoeHybrid, Zamba2, OLMo Hybrid);
//! - `attn_temperature`: the NoPE layers' query temperature, `attn_temperature_tuning`
//!   (Llama 4);
//! - `sliding`: layers of two types whose types follow from a pattern (Gemma's
//!   `sliding_window_pattern`, ModernBERT's `global_attn_every_n_layers`, OLMo 3's fixed 4),
//!   and the older rope form read, each layer type's theta in a field of its own and the rope
//!   dict for the full layers only, or for both ([`Sliding`]: Gemma 3, Gemma 4 and its
//!   diffusion and embedding kin, T5Gemma 2, ModernBERT, OLMo 3);
//! - `mrope_section`: the M-RoPE sections its config class gives any rope dict without them
//!   (HunYuan-V4-VL's `[12, 10, 10]`, a `setdefault`);
//! - `mrope_slots`: [`MropeSlots::Alternating`] where the M-RoPE slots always alternate,
//!   whatever `mrope_interleaved` says (Qwen3-VL);
//! - `rope_type_names`: the rope types it spells its own way, and the type each reads as: Phi-3's
//!   `yarn` is LongRoPE, Sarvam's `deepseek_yarn` is YaRN;
//! - `aliases`: the fields its config.json gives under names of its own, as its config class's
//!   `attribute_map` reads them: `("head_dim", "kv_channels")` (JetMoe), or in a nested object:
//!   `("rope_theta", "attn_config.rope_theta")` (DBRX);
//! - `rope_uses`: its `rope_parameters` are keyed by use, not by layer type, and each layer type
//!   turns by the dict of one key, `("sliding_attention", "main")` (DeepSeek-V4); the top-level
//!   `rope_theta` then only fills a dict that gives none, as transformers fills it;
//! - `legacy_uses`: the older form of such a config that its class converts (DeepSeek-V4's
//!   original checkpoints: each use's theta in a top-level field, the legacy rope dict for one
//!   use, the layer types from per-layer ratios);
//! - `mlp_blocks`: its saved `layer_types` list an `"mlp"` block after each layer's type (Dory);
//! - `mscales`: LongRoPE's `short_mscale` and `long_mscale` are read, and required
//!   (Phi-3.5-MoE);
//! - `rope_dict`: the rope dict its config class fills in where a config gives none (no
//!   `rope_parameters`, no `rope_scaling`), as JSON: gpt-oss's YaRN, Apertus's llama3, Gemma 4's
//!   dict per layer type. It is read as if the config gave it, except that its values win over
//!   the top level's (transformers' `setdefault`): a top-level `rope_theta` fills only a dict
//!   that gives none (gpt-oss's);
//! - `qwen_vl`: the Qwen-VL generation whose rules build the model's position ids.
//!
//! ```
//! use candle_pe_formats::{HfModelType, HfTextConfig};
//!
//! assert_eq!(HfModelType::of("gemma3_text").head_dim_default(), Some(256));
//! assert_eq!(HfModelType::of("llama").head_dim_default(), None);
//!
//! let gemma3 = serde_json::json!({"model_type": "gemma3", "text_config": {
//!     "model_type": "gemma3_text", "hidden_size": 2560, "num_attention_heads": 8}});
//! let text = HfTextConfig::from_hf_config(&gemma3)?;
//! assert_eq!(text.fields().path(), "text_config");
//! assert_eq!(text.head_dim()?, 256); // not 2560 / 8
//! # Ok::<(), candle_pe_formats::Error>(())
//! ```

use serde_json::{Map, Value};

use candle_pe_core::Error as CoreError;
use candle_pe_core::{MropeSlots, PairLayout, DEFAULT_ROPE_THETA};

use crate::{ConfigFields, Error, Result};

/// What a `model_type` changes in how its `config.json` is read: one row of `MODEL_TYPES` (the
/// module docs say what each field means).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct HfModelType {
    pub(crate) names: &'static [&'static str],
    pub(crate) prefix: bool,
    pub(crate) head_dim: Option<usize>,
    pub(crate) rope_theta: Option<f64>,
    pub(crate) sliding_rope_theta: Option<f64>,
    pub(crate) partial_rotary_factor: f64,
    pub(crate) sliding_partial_rotary_factor: Option<f64>,
    pub(crate) pair_layout: PairLayout,
    pub(crate) nope_interval: Option<usize>,
    pub(crate) sliding_only: Option<SlidingOnly>,
    pub(crate) rope_switch: Option<RopeSwitch>,
    pub(crate) attn_temperature: bool,
    pub(crate) sliding: Option<Sliding>,
    pub(crate) mrope_section: Option<&'static [usize]>,
    pub(crate) mrope_slots: MropeSlots,
    pub(crate) rope_type_names: &'static [(&'static str, &'static str)],
    pub(crate) aliases: &'static [(&'static str, &'static str)],
    pub(crate) rope_uses: &'static [(&'static str, &'static str)],
    pub(crate) legacy_uses: Option<&'static LegacyUses>,
    pub(crate) mscales: bool,
    pub(crate) mlp_blocks: bool,
    pub(crate) rope_dict: Option<&'static str>,
    pub(crate) qwen_vl: Option<QwenVlVersion>,
}

/// The older form of a config whose ropes are keyed by use, which its config class converts
/// (DeepSeek-V4's original checkpoints, with V3-flavoured names): no keyed `rope_parameters`;
/// each use's `rope_theta` in a top-level field; the legacy rope dict (`rope_scaling`, or a
/// flat `rope_parameters`) for one use only, a YaRN there turning at `attention_factor` 1
/// unless it gives one; and the layer types from a per-layer list of ints.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LegacyUses {
    /// Each use's key, the top-level field of its `rope_theta` and that field's default.
    pub thetas: &'static [(&'static str, &'static str, f64)],
    /// The use the legacy rope dict is for.
    pub scaled: &'static str,
    /// The field of the per-layer ints, and the layer type of each int.
    pub layer_ints: (&'static str, &'static [(u64, &'static str)]),
}

impl LegacyUses {
    /// The top-level field of the `rope_theta` of the use `key`, and that field's default.
    pub fn theta_of(&self, key: &str) -> Option<(&'static str, f64)> {
        self.thetas
            .iter()
            .find(|(k, ..)| *k == key)
            .map(|&(_, field, default)| (field, default))
    }
}

/// DeepSeek-V4's original config.json: `rope_theta` (main) and `compress_rope_theta` (160000),
/// `rope_scaling` for the compressors, `compress_ratios` 0, 4 and 128.
const DEEPSEEK_V4_LEGACY: LegacyUses = LegacyUses {
    thetas: &[
        ("main", "rope_theta", 10000.0),
        ("compress", "compress_rope_theta", 160000.0),
    ],
    scaled: "compress",
    layer_ints: (
        "compress_ratios",
        &[
            (0, "sliding_attention"),
            (4, "compressed_sparse_attention"),
            (128, "heavily_compressed_attention"),
        ],
    ),
};

/// Layers of two types, sliding and full attention, whose types a config without `layer_types`
/// implies from a pattern (Gemma 3 and 4, ModernBERT), and the older form of their ropes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sliding {
    /// The field `n` of the pattern, every `n`-th layer full attention, and its default
    /// (Gemma's `sliding_window_pattern`, 6; ModernBERT's `global_attn_every_n_layers`, 3);
    /// no field where the class fixes `n` (OLMo 3: 4).
    pub pattern: (Option<&'static str>, usize),
    /// The first layer of each `n` is the full one (ModernBERT: layers 0, n, 2n, ...); else the
    /// last (Gemma: layers n - 1, 2n - 1, ...).
    pub first_full: bool,
    /// The last layer is full attention too (Gemma 4).
    pub last_full: bool,
    /// Only transformers 5's `rope_parameters` keyed by layer type is read (Gemma 4); otherwise
    /// the older form is read too.
    pub keyed_only: bool,
    /// The older form's top-level fields of the full and the sliding layers' `rope_theta`
    /// (Gemma 3's `rope_theta` and `rope_local_base_freq`; ModernBERT's `global_rope_theta`
    /// and `local_rope_theta`).
    pub thetas: (&'static str, &'static str),
    /// The older form's rope dict (`rope_scaling`) turns the sliding layers too (ModernBERT),
    /// not only the full ones (Gemma 3).
    pub scales_sliding: bool,
}

/// A model whose attention turns only its sliding-window layers (transformers' code tests the
/// layer's type or window before `apply_rotary_pos_emb`): its `full_attention` layers are NoPE.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct SlidingOnly {
    /// Without `layer_types`, every `n`-th layer is full attention, `(i + 1) % n == 0`: the
    /// field `n` is read from and its default (AFMoE's `global_attn_every_n_layers`, Cohere 2's
    /// `sliding_window_pattern`: 4), or no field where the class fixes `n` (Kolibri: 5). `None`:
    /// the class's default pattern is not one of these, and `layer_types` is required (Flint,
    /// Cohere 2 MoE).
    pub(crate) pattern: Option<(Option<&'static str>, usize)>,
    /// What a config whose `sliding_window` is null turns.
    pub(crate) windowless: Windowless,
    /// The layers whose `mlp_layer_types` entry is `"dense"` turn too when
    /// `prefix_dense_sliding_window_pattern` is 1, its default (Cohere 2 MoE's `force_rope`);
    /// without `mlp_layer_types`, the first `first_k_dense_replace` layers are the dense ones.
    pub(crate) dense_prefix: bool,
}

/// What turns on the rotary embedding of a model that builds one only on a condition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RopeSwitch {
    /// A field and the value that turns the rope on, a string or a bool as `"true"`; any other
    /// value, or none, is off (GraniteMoeHybrid's `position_embedding_type`, `"rope"`: Granite
    /// 4.0-H gives `"nope"`; Zamba2's `use_mem_rope`, false by default).
    Field(&'static str, &'static str),
    /// The rope's `rope_theta` (in the rope dict, else at the top level): null is off, absent
    /// takes the class's default (OLMo Hybrid, whose released checkpoint gives null).
    Theta,
}

/// What a [`SlidingOnly`] model turns when its config's `sliding_window` is null.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Windowless {
    /// The sliding layers, as with a window: the code tests the layer's type alone (AFMoE).
    SlidingLayers,
    /// Every layer: the code turns a layer when the model has no window (`sliding_window is
    /// None or is_sliding`: EXAONE 4 and its MoE, Kolibri).
    EveryLayer,
    /// No layer: the code turns a layer when its own window is set (`sliding_window is not
    /// None`: Cohere 2 and its MoE, Flint).
    NoLayer,
}

/// Which Qwen-VL generation's rules build the ids.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum QwenVlVersion {
    /// Qwen2-VL (`model_type` `qwen2_vl`).
    Qwen2Vl,
    /// Qwen2.5-VL (`qwen2_5_vl`): video time from `tokens_per_second * second_per_grid_ts`.
    Qwen25Vl,
    /// Qwen3-VL and Qwen3.5 (`qwen3_vl`, `qwen3_vl_moe`, `qwen3_5`, `qwen3_5_moe`): each video
    /// frame its own run.
    Qwen3Vl,
}

/// The row of a model type that has none: every field off.
const DEFAULT: HfModelType = HfModelType {
    names: &[],
    prefix: false,
    head_dim: None,
    rope_theta: Some(DEFAULT_ROPE_THETA),
    sliding_rope_theta: None,
    partial_rotary_factor: 1.0,
    sliding_partial_rotary_factor: None,
    pair_layout: PairLayout::Halves,
    nope_interval: None,
    sliding_only: None,
    rope_switch: None,
    attn_temperature: false,
    sliding: None,
    mrope_section: None,
    mrope_slots: MropeSlots::Sections,
    rope_type_names: &[],
    aliases: &[],
    rope_uses: &[],
    legacy_uses: None,
    mscales: false,
    mlp_blocks: false,
    rope_dict: None,
    qwen_vl: None,
};

impl Sliding {
    /// Gemma 3's layers: every `sliding_window_pattern`-th one full attention, the legacy rope
    /// form read too (`rope_theta` and `rope_scaling` for full layers, `rope_local_base_freq`
    /// for sliding ones); also the form of a config of another model type that gives
    /// `rope_local_base_freq`.
    pub const GEMMA3: Sliding = Sliding {
        pattern: (Some("sliding_window_pattern"), 6),
        first_full: false,
        last_full: false,
        keyed_only: false,
        thetas: ("rope_theta", "rope_local_base_freq"),
        scales_sliding: false,
    };

    /// Gemma 4's layers: Gemma 3's pattern with the last layer full too, and only
    /// transformers 5's `rope_parameters` keyed by layer type read (its config classes keep a
    /// flat dict as it is, which their rotary classes cannot index by layer type).
    pub const GEMMA4: Sliding = Sliding {
        last_full: true,
        keyed_only: true,
        ..Sliding::GEMMA3
    };

    /// OLMo 3's layers: every fourth full attention; the older form's `rope_theta` for both
    /// types and its `rope_scaling` for the full layers only.
    pub const OLMO3: Sliding = Sliding {
        pattern: (None, 4),
        thetas: ("rope_theta", "rope_theta"),
        ..Sliding::GEMMA3
    };
}

/// A model type (its names) that reads as most do, but for what the builders below change.
const fn row(names: &'static [&'static str]) -> HfModelType {
    HfModelType { names, ..DEFAULT }
}

impl HfModelType {
    /// Its config class's `default_theta`, for every layer.
    const fn theta(mut self, rope_theta: f64) -> Self {
        self.rope_theta = Some(rope_theta);
        self
    }

    /// Its config class fills no `rope_theta` into a rope dict that gives none (and its
    /// modeling code then fails): a config must give one.
    const fn no_theta(mut self) -> Self {
        self.rope_theta = None;
        self
    }

    /// Its config class's `default_theta`: `full` for full-attention layers (and every layer
    /// that is not sliding), `sliding` for sliding ones.
    const fn thetas(mut self, full: f64, sliding: f64) -> Self {
        self.rope_theta = Some(full);
        self.sliding_rope_theta = Some(sliding);
        self
    }

    /// Its config class's default `partial_rotary_factor`, for every layer.
    const fn partial(mut self, factor: f64) -> Self {
        self.partial_rotary_factor = factor;
        self
    }

    /// Its config class's default `partial_rotary_factor`: `full` for full-attention layers
    /// (and every layer that is not sliding), `sliding` for sliding ones.
    const fn partials(mut self, full: f64, sliding: f64) -> Self {
        self.partial_rotary_factor = full;
        self.sliding_partial_rotary_factor = Some(sliding);
        self
    }

    /// Its config class's `head_dim` default.
    const fn head(mut self, head_dim: usize) -> Self {
        self.head_dim = Some(head_dim);
        self
    }

    /// Its attention turns adjacent pairs, unless its config's `rope_interleave` says not.
    const fn interleaved(mut self) -> Self {
        self.pair_layout = PairLayout::Interleaved;
        self
    }

    /// The fields its config gives under names of its own.
    const fn aliases(mut self, aliases: &'static [(&'static str, &'static str)]) -> Self {
        self.aliases = aliases;
        self
    }

    /// Its rope dicts are keyed by use: each `(layer type, key)`'s layers turn by the dict at
    /// `key`.
    const fn keyed_by_use(mut self, uses: &'static [(&'static str, &'static str)]) -> Self {
        self.rope_uses = uses;
        self
    }

    /// Its config class converts the older form `legacy` of its keyed-by-use config.
    const fn converts_legacy(mut self, legacy: &'static LegacyUses) -> Self {
        self.legacy_uses = Some(legacy);
        self
    }

    /// Its config class gives any rope dict without `mrope_section` these sections.
    const fn sections(mut self, mrope_section: &'static [usize]) -> Self {
        self.mrope_section = Some(mrope_section);
        self
    }

    /// Its config class fills in the rope dict `json` where a config gives none.
    const fn fills(mut self, json: &'static str) -> Self {
        self.rope_dict = Some(json);
        self
    }
}

/// Gemma 4's rope dict per layer type (its config classes' `default_rope_params`).
/// Cohere 2's attention: a layer turns where its own window is set (the sliding layers, every
/// fourth one full by `sliding_window_pattern`), so none turns without a window.
const COHERE2_SLIDING_ONLY: SlidingOnly = SlidingOnly {
    pattern: Some((Some("sliding_window_pattern"), 4)),
    windowless: Windowless::NoLayer,
    dense_prefix: false,
};

/// EXAONE 4's attention: the sliding layers turn (every fourth one full by
/// `sliding_window_pattern`), and every layer of a model without a window.
const EXAONE4_SLIDING_ONLY: SlidingOnly = SlidingOnly {
    pattern: Some((Some("sliding_window_pattern"), 4)),
    windowless: Windowless::EveryLayer,
    dense_prefix: false,
};

const GEMMA4_ROPES: &str = r#"{
    "sliding_attention": {"rope_type": "default", "rope_theta": 1e4},
    "full_attention": {"rope_type": "proportional", "partial_rotary_factor": 0.25, "rope_theta": 1e6}}"#;

/// gpt-oss's YaRN.
const GPT_OSS_YARN: &str = r#"{"rope_type": "yarn", "factor": 32.0, "beta_fast": 32.0,
    "beta_slow": 1.0, "truncate": false, "original_max_position_embeddings": 4096}"#;

/// GPT-NeoX's older names of `rope_theta` and `partial_rotary_factor`.
const GPT_NEOX_NAMES: &[(&str, &str)] = &[
    ("rope_theta", "rotary_emb_base"),
    ("partial_rotary_factor", "rotary_pct"),
];

/// Every model type whose `config.json` reads differently from the default, each the way its
/// transformers 5.24 config class and modeling code read it (held by
/// `crates/pe-formats/tests/model_types.rs` against every model type of transformers). A name
/// is in at most one row without `prefix`; a prefix row covers the names that no row holds.
const MODEL_TYPES: &[HfModelType] = &[
    // Layer types, NoPE layers, per-model spellings and position ids.
    row(&["gemma", "gemma2"]).head(256),
    HfModelType {
        sliding: Some(Sliding::GEMMA3),
        ..row(&["gemma3", "gemma3_text"]).head(256).thetas(1e6, 1e4)
    },
    HfModelType {
        prefix: true,
        sliding: Some(Sliding::GEMMA3),
        ..row(&["gemma3"]).thetas(1e6, 1e4)
    },
    HfModelType {
        prefix: true,
        sliding: Some(Sliding::GEMMA4),
        ..row(&["gemma4"]).fills(GEMMA4_ROPES)
    },
    // Llama 4's attention turns adjacent pairs (as complex numbers); its config has no
    // rope_interleave.
    HfModelType {
        nope_interval: Some(4),
        attn_temperature: true,
        ..row(&["llama4", "llama4_text"])
            .theta(500_000.0)
            .interleaved()
    },
    HfModelType {
        prefix: true,
        attn_temperature: true,
        ..row(&["llama4"])
    },
    HfModelType {
        nope_interval: Some(4),
        ..row(&["smollm3"]).theta(2e6)
    },
    // AFMoE's attention turns only its sliding layers (`is_local_attention`).
    HfModelType {
        sliding_only: Some(SlidingOnly {
            pattern: Some((Some("global_attn_every_n_layers"), 4)),
            windowless: Windowless::SlidingLayers,
            dense_prefix: false,
        }),
        ..row(&["afmoe"])
    },
    // DoryConfig: each layer of the saved layer_types is followed by an "mlp" block.
    HfModelType {
        mlp_blocks: true,
        ..row(&["dory"]).head(256).fills(
            r#"{"sliding_attention": {"rope_type": "default", "rope_theta": 1e4},
                "full_attention": {"rope_type": "default", "rope_theta": 1e7}}"#
        )
    },
    // transformers' Phi3Config and Phi4MultimodalConfig (convert_rope_params_to_dict: older
    // Phi-3 checkpoints wrote `yarn` with factor lists).
    HfModelType {
        rope_type_names: &[("yarn", "longrope")],
        ..row(&["phi3", "phi4_multimodal"])
    },
    // transformers' PhimoeRotaryEmbedding (PhimoeConfig.validate_rope requires both).
    HfModelType {
        mscales: true,
        ..row(&["phimoe"]).theta(1e6)
    },
    // Sarvam-M's MLA (SarvamMlaConfig defaults rope_interleave to true): DeepSeek's
    // `deepseek_yarn` is YaRN.
    HfModelType {
        rope_type_names: &[("deepseek_yarn", "yarn")],
        ..row(&["sarvam_mla"]).interleaved()
    },
    HfModelType {
        qwen_vl: Some(QwenVlVersion::Qwen2Vl),
        ..row(&["qwen2_vl", "qwen2_vl_text"]).theta(1e6)
    },
    HfModelType {
        qwen_vl: Some(QwenVlVersion::Qwen25Vl),
        ..row(&["qwen2_5_vl", "qwen2_5_vl_text"]).theta(1e6)
    },
    // transformers' Qwen3-VL never reads mrope_interleaved.
    HfModelType {
        mrope_slots: MropeSlots::Alternating,
        qwen_vl: Some(QwenVlVersion::Qwen3Vl),
        ..row(&["qwen3_vl", "qwen3_vl_moe"]).theta(500_000.0)
    },
    HfModelType {
        prefix: true,
        mrope_slots: MropeSlots::Alternating,
        ..row(&["qwen3_vl"]).theta(500_000.0)
    },
    HfModelType {
        qwen_vl: Some(QwenVlVersion::Qwen3Vl),
        ..row(&["qwen3_5", "qwen3_5_moe"]).partial(0.25)
    },
    // The config classes that default rope_interleave to true.
    row(&["axk1", "deepseek_v3", "glm4_moe_lite", "youtu"]).interleaved(),
    // Mistral 4's YaRN: its share of the head is qk_rope_head_dim's, which the head reads.
    row(&["mistral4"]).interleaved().fills(
        r#"{"type": "yarn", "rope_theta": 1e4, "factor": 128.0,
            "original_max_position_embeddings": 8192, "beta_fast": 32.0, "beta_slow": 1.0,
            "mscale_all_dim": 1.0, "mscale": 1.0, "llama_4_scaling_beta": 0.1}"#,
    ),
    // Every other model type whose class or code changes a default: its default_theta, its
    // head_dim, whether its attention always turns adjacent pairs (its rotate_half slices
    // [..., ::2], it multiplies complex numbers, or it calls DeepSeek's
    // apply_rotary_pos_emb_interleave with no rope_interleave to test), the fields its
    // config.json names its own way.
    row(&["apertus", "apertus1p5_text"]).theta(12e6).fills(
        r#"{"rope_type": "llama3", "rope_theta": 12e6, "factor": 8.0,
            "original_max_position_embeddings": 8192, "low_freq_factor": 1.0,
            "high_freq_factor": 4.0}"#,
    ),
    row(&["axk2"]).interleaved(),
    row(&["bailing_hybrid"])
        .theta(6e6)
        .interleaved()
        .aliases(&[("max_position_embeddings", "model_max_length")]),
    // Their config classes fill in no rope_theta (their code then fails without one), as
    // EmbeddingGemma 2's below.
    row(&["beam"]).head(128).no_theta().fills(
        r#"{"sliding_attention": {"rope_type": "default", "rope_theta": 1e4},
            "full_attention": null}"#,
    ),
    row(&["laguna"]).head(128).no_theta().fills(
        r#"{"full_attention": {"rope_type": "default", "rope_theta": 5e5, "partial_rotary_factor": 0.5},
            "sliding_attention": {"rope_type": "default", "rope_theta": 1e4, "partial_rotary_factor": 1.0}}"#,
    ),
    row(&["mellum"]).head(128).no_theta().fills(
        r#"{"full_attention": {"rope_type": "default", "rope_theta": 5e5},
            "sliding_attention": {"rope_type": "default", "rope_theta": 1e4}}"#,
    ),
    row(&["zaya"]).head(128).no_theta().fills(
        r#"{"hybrid": {"rope_type": "default", "rope_theta": 5e6, "partial_rotary_factor": 0.5},
            "hybrid_sliding": {"rope_type": "default", "rope_theta": 1e4, "partial_rotary_factor": 0.5}}"#,
    ),
    // Cohere 2 MoE turns its sliding layers and its dense prefix (`force_rope`).
    HfModelType {
        sliding_only: Some(SlidingOnly {
            pattern: None,
            windowless: Windowless::NoLayer,
            dense_prefix: true,
        }),
        ..row(&["cohere2_moe"]).interleaved().no_theta()
    },
    row(&["mimo_v2_flash"]).head(192).no_theta().fills(
        r#"{"full_attention": {"rope_type": "default", "rope_theta": 5e6, "partial_rotary_factor": 0.334},
            "sliding_attention": {"rope_type": "default", "rope_theta": 1e4, "partial_rotary_factor": 0.334}}"#,
    ),
    row(&["bitnet"]).theta(500_000.0),
    row(&[
        "blt",
        "blt_global_transformer",
        "blt_local_decoder",
        "blt_local_encoder",
    ])
    .theta(500_000.0)
    .interleaved(),
    row(&["blt_patcher"]).interleaved(),
    row(&["cohere"]).theta(500_000.0).interleaved(),
    // Cohere 2 (Command R7B, Command A) turns only its sliding layers.
    HfModelType {
        sliding_only: Some(COHERE2_SLIDING_ONLY),
        ..row(&["cohere2"]).interleaved()
    },
    row(&["cosmos3_edge_text"]).theta(1e8).fills(
        r#"{"rope_type": "default", "rope_theta": 1e8, "mrope_section": [24, 20, 20]}"#,
    ),
    row(&["csm", "csm_depth_decoder_model"]).theta(500_000.0),
    row(&["cwm"]).theta(1e6).fills(
        r#"{"rope_theta": 1e6, "factor": 16.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
            "original_max_position_embeddings": 8192, "rope_type": "llama3"}"#,
    ),
    // DBRX: its config names the usual fields its own way, and its original config.json gives
    // rope_theta in attn_config (500000), where transformers 4 read it.
    row(&["dbrx"]).aliases(&[
        ("hidden_size", "d_model"),
        ("num_attention_heads", "n_heads"),
        ("num_hidden_layers", "n_layers"),
        ("max_position_embeddings", "max_seq_len"),
        ("num_key_value_heads", "attn_config.kv_n_heads"),
        ("rope_theta", "attn_config.rope_theta"),
    ]),
    row(&["deepseek_v2", "deepseek_v32"]).interleaved(),
    // DeepSeek-V4: sliding layers turn by the "main" rope, the compressed ones (and their
    // compressors) by the "compress" rope.
    row(&["deepseek_v4"])
        .head(512)
        .partial(0.125)
        .interleaved()
        .keyed_by_use(&[
            ("sliding_attention", "main"),
            ("compressed_sparse_attention", "compress"),
            ("heavily_compressed_attention", "compress"),
        ])
        .converts_legacy(&DEEPSEEK_V4_LEGACY),
    row(&["dia_encoder"]).head(128),
    row(&["bamba"]).partial(0.5),
    row(&["dots3_note_audio_encoder"])
        .partial(0.5)
        .interleaved(),
    // dots3: its indexed layers' theta is rope_theta's (8e7), its sliding ones' 5e4; the share
    // of the head is qk_rope_head_dim's, which the head reads.
    row(&["dots3_note_text"])
        .theta(8e7)
        .head(256)
        .interleaved()
        .fills(
            r#"{"indexed_attention": {"rope_type": "default"},
                "sliding_attention": {"rope_type": "default", "rope_theta": 5e4}}"#,
        ),
    HfModelType {
        sliding: Some(Sliding::GEMMA4),
        ..row(&["diffusion_gemma_text"]).fills(GEMMA4_ROPES)
    },
    // EmbeddingGemma 2: Gemma 4's layers; its full layers' 512 is in the per_layer_config its
    // class saves.
    HfModelType {
        sliding: Some(Sliding::GEMMA4),
        ..row(&["embedding_gemma2_text"]).head(256).no_theta().fills(
            r#"{"sliding_attention": {"rope_type": "default", "rope_theta": 1e4},
                "full_attention": {"rope_type": "default", "rope_theta": 1e6}}"#,
        )
    },
    row(&["emu3_text_model"]).theta(1e6),
    row(&["eomt_dinov3"]).theta(100.0),
    row(&["ernie4_5"]).theta(500_000.0).head(128).interleaved(),
    row(&["ernie4_5_moe", "ernie4_5_vl_moe_text"])
        .theta(500_000.0)
        .interleaved(),
    row(&["evolla"]).theta(500_000.0),
    row(&["exaone"]).theta(500_000.0),
    // EXAONE 4 (and EXAONE 4.5's text model) and EXAONE MoE turn only their sliding layers.
    HfModelType {
        sliding_only: Some(EXAONE4_SLIDING_ONLY),
        ..row(&["exaone4", "exaone_moe"])
    },
    row(&["flex_olmo"]).theta(500_000.0),
    // Flint turns a layer where its own window is set; its class's pattern (the first two
    // layers, every fourth from the second and the last full) is not read: layer_types is.
    HfModelType {
        sliding_only: Some(SlidingOnly {
            pattern: None,
            windowless: Windowless::NoLayer,
            dense_prefix: false,
        }),
        ..row(&["flint"]).head(128)
    },
    row(&["glm", "glm4"]).partial(0.5).interleaved(),
    row(&["glm4_moe", "glm4v_moe_text", "glmasr_encoder"]).partial(0.5),
    row(&["glm4v_text", "glm_moe_dsa", "glm_ocr_text"]).interleaved(),
    // GPT-NeoX's older config.json (Pythia's, GPT-NeoX-20B's) names its base and share
    // rotary_emb_base and rotary_pct, which its config class still reads.
    row(&["gpt_neox"]).partial(0.25).aliases(GPT_NEOX_NAMES),
    row(&["gpt_neox_japanese"]).aliases(GPT_NEOX_NAMES),
    row(&["stablelm"]).partial(0.25),
    row(&["gpt_oss", "openai_privacy_filter"])
        .theta(150_000.0)
        .head(64)
        .fills(GPT_OSS_YARN),
    // GraniteMoeHybrid (Granite 4.0) builds its rotary embedding only for
    // position_embedding_type "rope" (its default, null, and Granite 4.0-H's "nope": none).
    HfModelType {
        rope_switch: Some(RopeSwitch::Field("position_embedding_type", "rope")),
        ..row(&["granitemoehybrid"])
    },
    row(&["gte"]).theta(160_000.0),
    // OLMo Hybrid builds its rotary embedding only where rope_theta is not null.
    HfModelType {
        rope_switch: Some(RopeSwitch::Theta),
        ..row(&["olmo_hybrid"])
    },
    row(&["helium"]).theta(100_000.0).interleaved(),
    row(&["hy_v3"]).theta(11_158_840.0).head(128),
    // HunYuan-V4-VL: its class gives these sections to any rope dict without them, the one
    // it fills in as well.
    row(&["hy_v4_vl_text"]).interleaved().sections(&[12, 10, 10]),
    row(&["jetmoe"]).aliases(&[("head_dim", "kv_channels")]),
    row(&["jina_embeddings_v3"]).theta(20_000.0),
    // Kolibri turns its sliding layers (every fifth one full), and every layer without a window.
    HfModelType {
        sliding_only: Some(SlidingOnly {
            pattern: Some((None, 5)),
            windowless: Windowless::EveryLayer,
            dense_prefix: false,
        }),
        ..row(&["kolibri1"]).head(128)
    },
    row(&["lara_mini"]).head(128),
    row(&["higgs_audio_v2"]).fills(
        r#"{"factor": 32.0, "rope_theta": 5e5, "high_freq_factor": 0.5, "low_freq_factor": 0.125,
            "original_max_position_embeddings": 1024, "rope_type": "llama3"}"#,
    ),
    row(&["lfm2", "lfm2_moe"]).theta(1e6),
    row(&["lfm3"]).theta(1e6).fills(
        r#"{"sliding_attention": {"rope_type": "default", "rope_theta": 1e4},
            "full_attention": {"rope_type": "proportional", "rope_theta": 1e6, "partial_rotary_factor": 0.5}}"#,
    ),
    row(&["longcat_flash"]).theta(1e7).interleaved(),
    row(&["minimax"]).theta(1e6),
    row(&["minimax_m2", "minimax_m3_vl_text"])
        .theta(5e6)
        .head(128),
    // Ministral 3's YaRN (the class copies max_position_embeddings into it, which the rope reads
    // from the top level).
    row(&["ministral3"]).fills(
        r#"{"type": "yarn", "rope_theta": 1e6, "factor": 16.0,
            "original_max_position_embeddings": 16384, "beta_fast": 32.0, "beta_slow": 1.0,
            "mscale_all_dim": 1.0, "mscale": 1.0, "llama_4_scaling_beta": 0.1}"#,
    ),
    // Mistral Large 4: without no_rope_layers, its class leaves every fourth layer unrotated.
    HfModelType {
        nope_interval: Some(4),
        ..row(&["mistral_large4_text"]).interleaved().fills(
            r#"{"rope_type": "yarn", "rope_theta": 1e4, "factor": 2048.0,
                "original_max_position_embeddings": 512, "beta_fast": 32.0, "beta_slow": 1.0,
                "attention_factor": 1.0}"#,
        )
    },
    row(&["mixtral"]).theta(1e6),
    row(&["mllama_text_model"]).theta(500_000.0),
    // ModernBERT: its older config.json (answerdotai's) gives every n-th layer, from the first,
    // global attention at global_rope_theta, the others local at local_rope_theta.
    HfModelType {
        sliding: Some(Sliding {
            pattern: (Some("global_attn_every_n_layers"), 3),
            first_full: true,
            thetas: ("global_rope_theta", "local_rope_theta"),
            scales_sliding: true,
            ..Sliding::GEMMA3
        }),
        ..row(&["modernbert", "modernbert-decoder"]).thetas(160_000.0, 1e4)
    },
    // Moonshine's decoder: its config names its heads per side.
    row(&["moonshine"]).partial(0.9).interleaved().aliases(&[
        ("num_attention_heads", "decoder_num_attention_heads"),
        ("num_hidden_layers", "decoder_num_hidden_layers"),
    ]),
    row(&["moonshine_streaming"]).interleaved().fills(
        r#"{"rope_type": "default", "rope_theta": 1e4, "partial_rotary_factor": 0.8}"#,
    ),
    row(&["muse_glimmer_assistant"]).theta(500_000.0).head(128),
    row(&["muse_glimmer_text"]).head(128),
    row(&["nemotron", "persimmon", "phi", "recurrent_gemma"]).partial(0.5),
    row(&["muse_spark_text"]).fills(r#"{"rope_type": "default", "rope_theta": 5e5}"#),
    row(&[
        "nemotron3_5_transcribe_asr_audio",
        "nemotron3_5_transcribe_word_timestamp",
    ])
    .fills(r#"{"rope_type": "default", "rope_theta": 1e4, "partial_rotary_factor": 0.5}"#),
    // NeoMME: a dict per layer type, its theta and share the class's per layer type (or the
    // top-level rope_theta).
    row(&["neomme"])
        .thetas(1e6, 1e4)
        .partials(0.25, 1.0)
        .fills(
            r#"{"full_attention": {"rope_type": "default"},
                "sliding_attention": {"rope_type": "default"}}"#,
        ),
    row(&["nomic_bert"]).theta(1000.0),
    // OLMo 3: an older config.json's rope_scaling (OLMo 3 7B Instruct's YaRN) turns its full
    // layers only; the sliding ones turn plain.
    HfModelType {
        sliding: Some(Sliding::OLMO3),
        ..row(&["olmo3"]).theta(500_000.0)
    },
    row(&["paddleocr_vl_text"]).theta(500_000.0).head(128),
    row(&[
        "pe_audio_encoder",
        "pe_audio_video_encoder",
        "pe_video_encoder",
    ])
    .theta(20_000.0),
    row(&[
        "qwen2_5_omni_talker",
        "qwen2_5_omni_text",
        "qwen3_omni_moe_text",
    ])
    .theta(1e6),
    row(&["qwen3", "qwen3_omni_moe_talker_code_predictor"]).head(128),
    row(&["qwen3_5_moe_text", "qwen3_next"])
        .head(256)
        .partial(0.25),
    row(&["qwen3_5_text"]).partial(0.25),
    row(&["qwen4_exp_text"]).head(256),
    row(&["sarvam_moe"]).theta(8e6),
    row(&["seed_oss", "step3p5"]).head(128),
    row(&["solar_open"]).theta(1e6).head(128),
    row(&["t5_gemma_module", "vaultgemma"]).head(256),
    // T5Gemma 2: Gemma 3's layers, and its older form (rope_local_base_freq).
    HfModelType {
        sliding: Some(Sliding::GEMMA3),
        ..row(&["t5gemma2_decoder", "t5gemma2_text"])
            .head(256)
            .thetas(1e6, 1e4)
    },
    row(&["ultrabert"]).fills(
        r#"{"sliding_attention": {"rope_type": "default", "rope_theta": 1e4},
            "full_attention": {"rope_type": "default", "rope_theta": 2.56e6}}"#,
    ),
    row(&["voxtral_realtime_encoder"]).head(64),
    // Zamba2 turns its shared attention blocks only with use_mem_rope (false by default).
    HfModelType {
        rope_switch: Some(RopeSwitch::Field("use_mem_rope", "true")),
        ..row(&["zamba2"]).aliases(&[("head_dim", "attention_head_dim")])
    },
];

/// The fields whose presence at a config's root means the root holds the text decoder's fields
/// (and its `text_config`, if any, is not read).
const OWN_FIELDS: [&str; 4] = ["head_dim", "hidden_size", "rope_scaling", "rope_parameters"];

impl HfModelType {
    /// The row of `model_type`: the row naming it, else the first prefix row it starts with,
    /// else the default one (every field off).
    pub fn of(model_type: &str) -> &'static HfModelType {
        let prefixed = || {
            MODEL_TYPES
                .iter()
                .find(|r| r.prefix && r.names.iter().any(|n| model_type.starts_with(n)))
        };
        MODEL_TYPES
            .iter()
            .find(|r| !r.prefix && r.names.contains(&model_type))
            .or_else(prefixed)
            .unwrap_or(&DEFAULT)
    }

    /// The `head_dim` the config class gives when a config leaves it out (Gemma 1 to 3: 256);
    /// `None` when it is `hidden_size / num_attention_heads`.
    pub fn head_dim_default(&self) -> Option<usize> {
        self.head_dim
    }

    /// The `rope_theta` of the layers of `layer_type` (every layer when `None`) in a config that
    /// gives none: the config class's `default_theta`, the sliding layers' own where it has one;
    /// `None` where the class has none (such a config is refused, as transformers fails on it).
    ///
    /// ```
    /// use candle_pe_formats::HfModelType;
    ///
    /// assert_eq!(HfModelType::of("mixtral").rope_theta_default(None), Some(1e6));
    /// let gemma3 = HfModelType::of("gemma3_text");
    /// assert_eq!(gemma3.rope_theta_default(Some("full_attention")), Some(1e6));
    /// assert_eq!(gemma3.rope_theta_default(Some("sliding_attention")), Some(1e4));
    /// assert_eq!(HfModelType::of("llama").rope_theta_default(None), Some(10000.0));
    /// assert_eq!(HfModelType::of("laguna").rope_theta_default(None), None);
    /// ```
    pub fn rope_theta_default(&self, layer_type: Option<&str>) -> Option<f64> {
        match (layer_type, self.sliding_rope_theta) {
            (Some("sliding_attention"), Some(theta)) => Some(theta),
            _ => self.rope_theta,
        }
    }

    /// Its config class's default `partial_rotary_factor` for the layers of `layer_type`
    /// (`None`: every layer), the share of the head a config that gives none turns.
    ///
    /// ```
    /// use candle_pe_formats::HfModelType;
    ///
    /// assert_eq!(HfModelType::of("gpt_neox").partial_rotary_factor_default(None), 0.25);
    /// let neomme = HfModelType::of("neomme");
    /// assert_eq!(neomme.partial_rotary_factor_default(Some("full_attention")), 0.25);
    /// assert_eq!(neomme.partial_rotary_factor_default(Some("sliding_attention")), 1.0);
    /// assert_eq!(HfModelType::of("llama").partial_rotary_factor_default(None), 1.0);
    /// ```
    pub fn partial_rotary_factor_default(&self, layer_type: Option<&str>) -> f64 {
        match (layer_type, self.sliding_partial_rotary_factor) {
            (Some("sliding_attention"), Some(factor)) => factor,
            _ => self.partial_rotary_factor,
        }
    }

    /// Its layers of two types (sliding and full attention) and their older rope form, where it
    /// has them (Gemma 3 and 4, ModernBERT).
    pub fn sliding(&self) -> Option<&Sliding> {
        self.sliding.as_ref()
    }

    /// Where its `rope_parameters` are keyed by use (DeepSeek-V4's `main` and `compress`), each
    /// layer type and the key of the dict its layers turn by; empty for most models, whose
    /// dicts are keyed by layer type.
    ///
    /// ```
    /// use candle_pe_formats::HfModelType;
    ///
    /// let uses = HfModelType::of("deepseek_v4").rope_uses();
    /// assert!(uses.contains(&("sliding_attention", "main")));
    /// assert!(HfModelType::of("gemma3_text").rope_uses().is_empty());
    /// ```
    pub fn rope_uses(&self) -> &'static [(&'static str, &'static str)] {
        self.rope_uses
    }

    /// Where its config class converts the older form of a keyed-by-use config (DeepSeek-V4's
    /// original checkpoints, whose ropes are not keyed): how ([`LegacyUses`]).
    ///
    /// ```
    /// use candle_pe_formats::HfModelType;
    ///
    /// let legacy = HfModelType::of("deepseek_v4").legacy_uses().unwrap();
    /// assert_eq!(legacy.thetas[1], ("compress", "compress_rope_theta", 160000.0));
    /// assert_eq!((legacy.scaled, legacy.layer_ints.0), ("compress", "compress_ratios"));
    /// ```
    pub fn legacy_uses(&self) -> Option<&'static LegacyUses> {
        self.legacy_uses
    }

    /// The rope dict its config class fills in where a config gives none (no
    /// `rope_parameters`, no `rope_scaling`), as a JSON object; `None` for most model types.
    ///
    /// ```
    /// use candle_pe_formats::HfModelType;
    ///
    /// let yarn = HfModelType::of("gpt_oss").filled_rope_dict()?.unwrap();
    /// assert_eq!(yarn["rope_type"], "yarn");
    /// assert!(HfModelType::of("llama").filled_rope_dict()?.is_none());
    /// # Ok::<(), candle_pe_formats::Error>(())
    /// ```
    pub fn filled_rope_dict(&self) -> Result<Option<Map<String, Value>>> {
        let Some(json) = self.rope_dict else {
            return Ok(None);
        };
        serde_json::from_str(json).map(Some).map_err(|e| {
            Error::Core(CoreError::Config {
                field: "model_type".into(),
                message: format!(
                    "the rope dict the row of {:?} fills in is not a JSON object: {e}",
                    self.names
                ),
            })
        })
    }

    /// The rope type a config's `rope_type` (or `type`) `name` reads as: the model type's own
    /// spelling's type, else `name`.
    pub(crate) fn rope_type_name<'n>(&self, name: &'n str) -> &'n str {
        self.rope_type_names
            .iter()
            .find(|(spelled, _)| *spelled == name)
            .map_or(name, |(_, reads_as)| reads_as)
    }

    /// The width of each attention head of the config's object `root`: its `head_dim`, else
    /// this model type's default, else `hidden_size / num_attention_heads`.
    pub(crate) fn head_dim(&self, root: &ConfigFields) -> Result<usize> {
        if let Some(d) = root.get::<usize>("head_dim")?.or(self.head_dim) {
            return Ok(d);
        }
        let hidden = root.get::<usize>("hidden_size")?;
        let heads = root.get::<usize>("num_attention_heads")?;
        match (hidden, heads) {
            (Some(hidden), Some(heads)) if heads > 0 => Ok(hidden / heads),
            _ => Err(Error::Core(CoreError::MissingParameter {
                name: "head_dim",
                needed_by: "give head_dim (or qk_rope_head_dim, global_head_dim), or \
                            hidden_size and num_attention_heads",
            })),
        }
    }

    /// The model types whose position ids a Qwen-VL generation builds, for errors.
    pub(crate) fn qwen_vl_names() -> Vec<&'static str> {
        MODEL_TYPES
            .iter()
            .filter(|r| !r.prefix && r.qwen_vl.is_some())
            .flat_map(|r| r.names.iter().copied())
            .collect()
    }
}

/// The object of an HF `config.json` that holds the text decoder's fields, and the row of its
/// model type: the root, or its `text_config` when the root has none of the decoder's own
/// fields (`head_dim`, `hidden_size`, `rope_scaling`, `rope_parameters`), as vision-language
/// models nest them; the model type is the text config's own `model_type`, else the root's.
#[derive(Clone, Debug)]
pub struct HfTextConfig<'a> {
    fields: ConfigFields<'a>,
    model_type: &'static HfModelType,
}

impl<'a> HfTextConfig<'a> {
    /// Finds the text decoder's fields of a parsed `config.json`.
    pub fn from_hf_config(config: &'a Value) -> Result<Self> {
        let root = ConfigFields::new(config)?;
        let outer: Option<String> = root.get("model_type")?;
        let fields = match root.object("text_config")? {
            Some(text) if !OWN_FIELDS.iter().any(|k| root.has(k)) => text,
            _ => root,
        };
        let model_type: Option<String> = match fields.path() {
            "" => outer,
            _ => fields.get::<String>("model_type")?.or(outer),
        };
        let model_type = HfModelType::of(model_type.as_deref().unwrap_or(""));
        Ok(Self {
            fields: fields.with_aliases(model_type.aliases),
            model_type,
        })
    }

    /// The object holding the decoder's fields (its [`path`](ConfigFields::path) is
    /// `text_config` when nested).
    pub fn fields(&self) -> &ConfigFields<'a> {
        &self.fields
    }

    /// The row of the model type.
    pub fn model_type(&self) -> &'static HfModelType {
        self.model_type
    }

    /// The width of each attention head: `head_dim`, else the model type's default, else
    /// `hidden_size / num_attention_heads`; an error naming `head_dim` when none is given.
    pub fn head_dim(&self) -> Result<usize> {
        self.model_type.head_dim(&self.fields)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_has_one_exact_row_which_keeps_what_its_prefix_row_gives() {
        let mut seen = std::collections::HashSet::new();
        for row in MODEL_TYPES.iter().filter(|r| !r.prefix) {
            for &name in row.names {
                assert!(seen.insert(name), "{name} in two rows");
                assert_eq!(HfModelType::of(name), row);
                let prefix_row = MODEL_TYPES
                    .iter()
                    .find(|r| r.prefix && r.names.iter().any(|n| name.starts_with(n)));
                if let Some(p) = prefix_row {
                    // Every field the prefix row sets, the exact row sets the same way.
                    let keep = |f: fn(&HfModelType) -> bool| !f(p) || f(row);
                    assert!(keep(|r| r.sliding.is_some()), "{name}: sliding");
                    assert_eq!(row.sliding.or(p.sliding), row.sliding, "{name}");
                    assert!(
                        keep(|r| r.pair_layout.is_interleaved()),
                        "{name}: pair_layout"
                    );
                    assert!(keep(|r| r.attn_temperature), "{name}: attn_temperature");
                    if p.rope_theta != Some(DEFAULT_ROPE_THETA) || p.sliding_rope_theta.is_some() {
                        let thetas = |r: &HfModelType| (r.rope_theta, r.sliding_rope_theta);
                        assert_eq!(thetas(row), thetas(p), "{name}: rope_theta");
                    }
                    assert!(
                        keep(|r| r.mrope_slots.is_alternating()),
                        "{name}: mrope_slots"
                    );
                }
            }
        }
    }

    #[test]
    fn every_filled_rope_dict_is_a_json_object() {
        for row in MODEL_TYPES.iter().filter(|r| r.rope_dict.is_some()) {
            let dict = row.filled_rope_dict().unwrap().unwrap();
            assert!(!dict.is_empty(), "{:?}", row.names);
        }
    }

    #[test]
    fn lookup_by_name_then_prefix() {
        assert_eq!(HfModelType::of("gemma3n").head_dim, None);
        assert_eq!(HfModelType::of("gemma3n").sliding, Some(Sliding::GEMMA3));
        assert_eq!(HfModelType::of("gemma3_text").head_dim, Some(256));
        assert!(HfModelType::of("qwen3_vl_text")
            .mrope_slots
            .is_alternating());
        assert_eq!(HfModelType::of("qwen3_vl_text").qwen_vl, None);
        assert_eq!(HfModelType::of(""), &DEFAULT);
        assert_eq!(HfModelType::of("llama"), &DEFAULT);
    }
}
