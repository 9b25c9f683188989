//! The GGUF architectures whose rope [`GgufRope`](crate::GgufRope) reads: one [`Arch`] row per
//! `general.architecture` llama.cpp knows (`src/llama-arch.cpp`, and `llama_model_rope_type` in
//! `src/llama-model.cpp` for the pair layout), and everything the reader does differently for
//! one architecture as a named field of its row. The reader compares no architecture name.
//!
//! A new architecture is a row here and a fixture: its name as the converter writes it, its
//! [`RopeKind`] (llama.cpp's `llama_model_rope_type` says which), and, only where it differs
//! from [`Arch::norm`] / [`Arch::neox`]'s defaults, the field of its quirk:
//!
//! - [`Arch::head`]: where the rotated head's width comes from ([`Head::KeyLength`], or
//!   [`Head::RotaryPart`] for a model whose rope covers only part of an MLA head);
//! - [`Arch::sliding`]: llama.cpp's sliding-window defaults, for a model whose file may omit the
//!   `_swa` keys (Gemma 3: every sixth layer global, sliding base 10000, sliding layers
//!   unscaled; olmo2, plamo3 and modern-bert: sliding layers only in a file with a window,
//!   OLMo 3's every fourth layer global and unscaled, PLaMo 3's every eighth and ModernBERT's
//!   every third from the first, both scaled, all at the full layers' base by default);
//! - [`Arch::mrope_with_sections`]: M-RoPE when the first two `rope.dimension_sections` are
//!   non-zero (llama.cpp's `use_mrope`: glm4, glm4moe, hunyuan_vl);
//! - [`Arch::log_multiplier`]: how `rope.scaling.yarn_log_multiplier` is stored (DeepSeek-2's
//!   converter writes a tenth of `mscale_all_dim`);
//! - [`Arch::query_temperature`]: whether llama.cpp's graph scales the queries by
//!   `attention.temperature_scale`, and where the length comes from ([`TemperatureLength`]:
//!   mistral3, deepseek2, mistral4);
//! - [`Arch::ntk_alpha`]: whether llama.cpp multiplies the base by
//!   `rope.scaling.alpha^(head/(head-2))` (hunyuan-dense, hunyuan_vl);
//! - [`Arch::swa_head`]: whether the sliding layers' head is `attention.key_length_swa`
//!   (gemma4);
//! - [`Arch::proportional_freqs`]: whether `rope_freqs` of ones then `1e30`s is the converter's
//!   form of the full layers' proportional rope (gemma4);
//! - [`Arch::nope`]: the layers llama.cpp's graph does not rotate, a rule in its code rather
//!   than a key (smollm3, afmoe and llama4: every fourth layer, llama4's with a query
//!   temperature; cohere2, cohere2moe, exaone4 and exaone-moe: the full-attention layers,
//!   [`NopeLayers::Full`]; granite and granitehybrid: every layer where
//!   `rope.scaling.finetuned = false`, [`NopeLayers::UnlessFinetuned`]).
//!
//! A quirk no field expresses is a new field (with its default in [`Arch::norm`]), read in
//! `rope.rs` from the row, never from the name. The fixture goes to
//! `crates/pe-testkit/fixtures/gguf`, written by llama.cpp's converter
//! (`scripts/fixtures/`), with its test in `crates/pe-formats/tests/gguf.rs`.

use candle_pe_core::{PairLayout, QueryScale};

use crate::{Error, Result};

/// llama.cpp's rope types (`llama_model_rope_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RopeKind {
    /// Adjacent pairs: the converter permutes Q and K so that this is `rotate_half`.
    Norm,
    /// The two halves of the rotated part.
    Neox,
    /// Halves, with `rope.dimension_sections` splitting the pairs among t, h, w (qwen2vl).
    Mrope,
    /// Interleaved M-RoPE (qwen3vl).
    Imrope,
}

impl RopeKind {
    /// The pair layout of the Q and K weights of a file of this rope type.
    pub(crate) fn layout(self) -> PairLayout {
        match self {
            RopeKind::Norm => PairLayout::Interleaved,
            _ => PairLayout::Halves,
        }
    }

    /// Whether `rope.dimension_sections` splits the pairs.
    pub(crate) fn is_mrope(self) -> bool {
        matches!(self, RopeKind::Mrope | RopeKind::Imrope)
    }
}

/// Where the head's width comes from.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Head {
    /// `attention.key_length`, else `embedding_length / attention.head_count`.
    KeyLength,
    /// `rope.dimension_count`, required: the rope covers only a part of the head that the file
    /// gives no other key for (DeepSeek-2's MLA `qk_rope` part). `needed_by` says so in the
    /// error when the key is missing.
    RotaryPart {
        /// Why the key is required, for [`Error::GgufMissing`].
        needed_by: &'static str,
    },
}

/// llama.cpp's defaults for a model with sliding-window layers, used where the file omits the
/// `_swa` keys.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Sliding {
    /// The family, as sources name the default (`Gemma 3`).
    pub label: &'static str,
    /// Every `period`-th layer is global when `attention.sliding_window_pattern` is absent;
    /// `None` where llama.cpp requires the key (Gemma 4: one flag per layer).
    pub period: Option<usize>,
    /// The first layer of each period is the global one (ModernBERT: layers 0, n, 2n, ...;
    /// llama.cpp's `dense_first`); else the last (Gemma: layers n - 1, 2n - 1, ...).
    pub first_full: bool,
    /// The sliding layers' base when `rope.freq_base_swa` is absent; `None`: the full layers'
    /// (olmo2).
    pub theta: Option<f64>,
    /// Whether the sliding layers take the file's scaling too (Gemma 3's do not).
    pub scaled: bool,
    /// Whether the file has sliding layers only where it gives `attention.sliding_window`
    /// (olmo2: OLMo 2's files give none, OLMo 3's do); elsewhere it always has them (Gemma 3).
    pub windowed: bool,
}

/// How a file stores `rope.scaling.yarn_log_multiplier`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum LogMultiplier {
    /// `mscale_all_dim` as is, with `mscale = 1`.
    MscaleAllDim,
    /// `0.1 * mscale_all_dim` (the converter multiplies, llama.cpp divides back), with
    /// `mscale = mscale_all_dim`; `label` names the family in the source.
    TenthOfMscaleAllDim {
        /// The family (`DeepSeek-2`).
        label: &'static str,
    },
}

/// Where the query temperature's length comes from (llama.cpp's `n_attn_temp_floor_scale`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum TemperatureLength {
    /// `attention.temperature_length`, required with a scale (deepseek2, mistral4).
    Key,
    /// `rope.scaling.original_context_length`, else `context_length` (mistral3, whose converter
    /// writes no `temperature_length` and whose llama.cpp loader reads none).
    OriginalContext,
}

/// The layers llama.cpp's graph leaves unrotated (NoPE): a rule set in its code, which no key
/// of the file gives.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Nope {
    /// The family, as sources name the rule (`SmolLM3`).
    pub label: &'static str,
    /// Which layers.
    pub layers: NopeLayers,
    /// The factor llama.cpp puts on the NoPE layers' queries, set in code too (Llama 4's
    /// temperature: scale 0.1, length 8192, positions counted from 1).
    pub query_scale: Option<QueryScale>,
    /// Whether a file with `attention.sliding_window = 0` rotates every layer (llama4's loader:
    /// no chunked layers, "always use rope", and no temperature).
    pub unless_windowless: bool,
}

/// The layers of a [`Nope`] rule.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum NopeLayers {
    /// Layer `i` where `(i + 1) % n == 0`: the last layer of each period (llama.cpp's
    /// `n_no_rope_layer_step`).
    EveryNth(usize),
    /// The full-attention layers: the graph turns only the sliding ones (`is_swa`).
    Full(FullLayers),
    /// Every layer where `rope.scaling.finetuned = false`, none otherwise: llama.cpp's granite
    /// and granitehybrid loaders read the key as Granite's rope switch (the converter writes
    /// false for Granite 4.0-H); elsewhere the key is reported only.
    UnlessFinetuned,
}

/// The full-attention layers of a [`NopeLayers::Full`] rule: those of
/// `attention.sliding_window_pattern` (one flag per layer, or a period), else of llama.cpp's
/// default period (its `load_swa_pattern`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct FullLayers {
    /// Every `period`-th layer is full where the file gives no pattern.
    pub period: usize,
    /// The first layer of each period is the full one (llama.cpp's `dense_first`); else the
    /// last.
    pub first_full: bool,
    /// The first `leading_dense_block_count` layers turn too, a key then required (cohere2moe's
    /// `force_rope`).
    pub dense_lead: bool,
    /// The loader gives sliding layers only to a file of this many blocks; in any other file
    /// every layer turns (exaone4: its 64-layer 32B).
    pub only_at_block_count: Option<usize>,
}

/// One GGUF architecture: its rope type and its quirks.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Arch {
    /// `general.architecture`, as the converter writes it; every key is prefixed with it.
    pub name: &'static str,
    /// llama.cpp's rope type, which gives the pair layout.
    pub rope: RopeKind,
    /// Where the head's width comes from.
    pub head: Head,
    /// Sliding-window defaults where the file may omit the `_swa` keys.
    pub sliding: Option<Sliding>,
    /// M-RoPE (rotating halves) when the file's first two `rope.dimension_sections` are
    /// non-zero (llama.cpp's `use_mrope`).
    pub mrope_with_sections: bool,
    /// How `rope.scaling.yarn_log_multiplier` is stored.
    pub log_multiplier: LogMultiplier,
    /// Whether llama.cpp scales the queries by `attention.temperature_scale`, and where the
    /// length comes from; elsewhere the temperature keys are refused by name.
    pub query_temperature: Option<TemperatureLength>,
    /// Whether llama.cpp multiplies `rope.freq_base` by `rope.scaling.alpha^(d/(d-2))`, `d` the
    /// head (HunYuan's NTK alpha); elsewhere an alpha other than 0 or 1 is refused by name.
    pub ntk_alpha: bool,
    /// Whether the sliding layers' head is `attention.key_length_swa` (Gemma 4); elsewhere a
    /// value other than the head is refused by name.
    pub swa_head: bool,
    /// Whether `rope_freqs` holding ones then `1e30`s is the converter's form of the full
    /// layers' proportional rope (Gemma 4: the `1e30` pairs do not rotate), read as
    /// [`RopeType::Proportional`](crate::RopeType::Proportional) on those layers only.
    pub proportional_freqs: bool,
    /// The layers llama.cpp's graph does not rotate (NoPE), where it sets them in code.
    pub nope: Option<Nope>,
}

impl Arch {
    /// A row of rope type `rope` with no quirk.
    const fn plain(name: &'static str, rope: RopeKind) -> Self {
        Arch {
            name,
            rope,
            head: Head::KeyLength,
            sliding: None,
            mrope_with_sections: false,
            log_multiplier: LogMultiplier::MscaleAllDim,
            query_temperature: None,
            ntk_alpha: false,
            swa_head: false,
            proportional_freqs: false,
            nope: None,
        }
    }

    /// A NORM row (adjacent pairs) with no quirk.
    pub(crate) const fn norm(name: &'static str) -> Self {
        Self::plain(name, RopeKind::Norm)
    }

    /// A NEOX row (halves) with no quirk.
    pub(crate) const fn neox(name: &'static str) -> Self {
        Self::plain(name, RopeKind::Neox)
    }

    /// The row of `general.architecture = name`; an architecture without one is an error
    /// saying why ([`UNROTATED`]) or listing those with one.
    pub(crate) fn of(name: &str) -> Result<&'static Arch> {
        if let Some((_, why)) = UNROTATED.iter().find(|(n, _)| *n == name) {
            return Err(Error::GgufKey {
                key: "general.architecture".into(),
                message: format!("architecture {name:?} has no rotary embedding: {why}"),
            });
        }
        ARCHS.iter().find(|a| a.name == name).ok_or_else(|| {
            let list = |pick: fn(RopeKind) -> bool| {
                let names = ARCHS.iter().filter(|a| pick(a.rope)).map(|a| a.name);
                names.collect::<Vec<_>>().join(", ")
            };
            Error::GgufKey {
                key: "general.architecture".into(),
                message: format!(
                    "architecture {name:?} is not one whose rope layout this crate knows \
                     (llama.cpp's NORM: {}; NEOX: {}; M-RoPE: {})",
                    list(|k| k == RopeKind::Norm),
                    list(|k| k == RopeKind::Neox),
                    list(RopeKind::is_mrope),
                ),
            }
        })
    }

    /// The names of the rows with `pick`, joined by `" and "`.
    pub(crate) fn names_with(pick: fn(&Arch) -> bool) -> String {
        let names: Vec<_> = ARCHS.iter().filter(|&a| pick(a)).map(|a| a.name).collect();
        names.join(" and ")
    }
}

/// Gemma 3's sliding layers, as llama.cpp reads a file without the `_swa` keys.
const GEMMA3_SLIDING: Sliding = Sliding {
    label: "Gemma 3",
    period: Some(6),
    theta: Some(10_000.0),
    scaled: false,
    windowed: false,
    first_full: false,
};

/// Gemma 3n's sliding layers: every fifth layer global, sliding base 10000, unscaled.
const GEMMA3N_SLIDING: Sliding = Sliding {
    label: "Gemma 3n",
    period: Some(5),
    theta: Some(10_000.0),
    scaled: false,
    windowed: false,
    first_full: false,
};

/// Gemma 4's sliding layers: the pattern is required (one flag per layer); the sliding base
/// defaults to 10000 and the sliding layers take no scaling (`rope_freq_scale_train_swa`).
const GEMMA4_SLIDING: Sliding = Sliding {
    label: "Gemma 4",
    period: None,
    theta: Some(10_000.0),
    scaled: false,
    windowed: false,
    first_full: false,
};

/// MiMo-V2's sliding layers: the pattern is required (one flag per layer); the sliding base
/// defaults to 10000 and the sliding layers take no scaling.
const MIMO2_SLIDING: Sliding = Sliding {
    label: "MiMo-V2",
    period: None,
    theta: Some(10_000.0),
    scaled: false,
    windowed: false,
    first_full: false,
};

/// OLMo 3's sliding layers (llama.cpp's olmo2, where the file gives a window): every fourth
/// layer global, the sliding ones at the full layers' base (`rope_freq_base_train_swa`) with no
/// scaling (its graph turns them with frequency scale, attention factor 1 and no YaRN ramp).
const OLMO3_SLIDING: Sliding = Sliding {
    label: "OLMo 3",
    period: Some(4),
    theta: None,
    scaled: false,
    windowed: true,
    first_full: false,
};

/// PLaMo 3's sliding layers (llama.cpp's plamo3, where the file gives a window): every eighth
/// layer global, the sliding ones at the full layers' base and scaling (llama.cpp's defaults
/// for `rope_freq_base_train_swa` and `rope_freq_scale_train_swa`).
const PLAMO3_SLIDING: Sliding = Sliding {
    label: "PLaMo 3",
    period: Some(8),
    theta: None,
    scaled: true,
    windowed: true,
    first_full: false,
};

/// ModernBERT's sliding layers (llama.cpp's modern-bert, where the file gives a window): every
/// third layer global from the first, the sliding ones at `rope.freq_base_swa` (the full
/// layers' base without it) with the file's scaling.
const MODERN_BERT_SLIDING: Sliding = Sliding {
    label: "ModernBERT",
    period: Some(3),
    theta: None,
    scaled: true,
    windowed: true,
    first_full: true,
};

/// SmolLM3's NoPE layers (llama.cpp's smollm3 graph): every fourth layer.
const SMOLLM3_NOPE: Nope = Nope {
    label: "SmolLM3",
    layers: NopeLayers::EveryNth(4),
    query_scale: None,
    unless_windowless: false,
};

/// AFMoE's NoPE layers (llama.cpp's afmoe graph, its default step): every fourth layer, the
/// global one of each period where the file gives a window.
const AFMOE_NOPE: Nope = Nope {
    label: "AFMoE",
    layers: NopeLayers::EveryNth(4),
    query_scale: None,
    unless_windowless: false,
};

/// Llama 4's NoPE layers (llama.cpp's llama4 loader and graph): every fourth layer, whose
/// queries take the temperature `ln(floor((p + 1) / 8192) + 1) * 0.1 + 1`; none in a file
/// whose window is 0.
const LLAMA4_NOPE: Nope = Nope {
    label: "Llama 4",
    layers: NopeLayers::EveryNth(4),
    query_scale: Some(QueryScale::AttnTemperature {
        floor_scale: 8192,
        attn_scale: 0.1,
    }),
    unless_windowless: true,
};

/// A NoPE rule of `layers` with no query factor, named `label`.
const fn nope_rule(label: &'static str, layers: NopeLayers) -> Option<Nope> {
    Some(Nope {
        label,
        layers,
        query_scale: None,
        unless_windowless: false,
    })
}

/// The NoPE rule of the full-attention layers of `full`.
const fn full_layers_nope(label: &'static str, full: FullLayers) -> Option<Nope> {
    nope_rule(label, NopeLayers::Full(full))
}

/// Granite's rope switch.
const GRANITE_NOPE: Option<Nope> = nope_rule("Granite", NopeLayers::UnlessFinetuned);

/// The default of [`FullLayers`]: every fourth layer full, the last of each period.
const EVERY_FOURTH_FULL: FullLayers = FullLayers {
    period: 4,
    first_full: false,
    dense_lead: false,
    only_at_block_count: None,
};

/// DeepSeek-2's MLA rope, which Mistral 4 shares (llama.cpp loads both in one case).
const fn deepseek2_like(name: &'static str) -> Arch {
    Arch {
        head: Head::RotaryPart {
            needed_by: "DeepSeek-2's rope covers its qk_rope part, whose width it gives",
        },
        log_multiplier: LogMultiplier::TenthOfMscaleAllDim {
            label: "DeepSeek-2",
        },
        query_temperature: Some(TemperatureLength::Key),
        ..Arch::norm(name)
    }
}

/// Architectures that llama.cpp gives a rope type but whose graph turns nothing: refused, with
/// the reason.
pub(crate) const UNROTATED: &[(&str, &str)] = &[
    (
        "bert",
        "llama.cpp's bert graph turns only nomic-bert, nomic-bert-moe and jina-bert-v3; BERT's \
         positions are the learned position_embd table",
    ),
    (
        "starcoder",
        "llama.cpp's starcoder graph adds the learned position_embd table (StarCoder 1, \
         GPT-BigCode)",
    ),
];

/// Every architecture, NORM ones first, then NEOX, then M-RoPE (the order errors list them in).
/// Mistral and Mixtral checkpoints convert as `llama`.
pub(crate) const ARCHS: &[Arch] = &[
    Arch::norm("llama"),
    Arch {
        nope: Some(LLAMA4_NOPE),
        ..Arch::norm("llama4")
    },
    Arch::norm("deci"),
    Arch {
        query_temperature: Some(TemperatureLength::OriginalContext),
        ..Arch::norm("mistral3")
    },
    Arch::norm("baichuan"),
    Arch::norm("internlm2"),
    Arch::norm("minicpm"),
    Arch::norm("xverse"),
    Arch::norm("command-r"),
    // Command R7B and Command A: the graph turns only the sliding layers.
    Arch {
        nope: full_layers_nope("Cohere 2", EVERY_FOURTH_FULL),
        ..Arch::norm("cohere2")
    },
    // Cohere 2 MoE: the converter writes the pattern's flags (llama.cpp's default puts the full
    // layer first), and the dense lead turns too.
    Arch {
        nope: full_layers_nope(
            "Cohere 2 MoE",
            FullLayers {
                first_full: true,
                dense_lead: true,
                ..EVERY_FOURTH_FULL
            },
        ),
        ..Arch::norm("cohere2moe")
    },
    Arch::norm("olmo"),
    Arch::norm("arctic"),
    Arch::norm("deepseek"),
    deepseek2_like("deepseek2"),
    deepseek2_like("mistral4"),
    Arch::norm("plm"),
    Arch::norm("chatglm"),
    Arch {
        mrope_with_sections: true,
        ..Arch::norm("glm4")
    },
    Arch {
        nope: GRANITE_NOPE,
        ..Arch::norm("granite")
    },
    Arch::norm("granitemoe"),
    Arch::norm("chameleon"),
    Arch::norm("bailingmoe"),
    Arch {
        nope: Some(SMOLLM3_NOPE),
        ..Arch::norm("smollm3")
    },
    Arch::norm("arcee"),
    Arch::norm("ernie4_5"),
    Arch::norm("ernie4_5-moe"),
    Arch::norm("llada"),
    Arch::norm("deepseek2-ocr"),
    Arch {
        nope: GRANITE_NOPE,
        ..Arch::norm("granitehybrid")
    },
    Arch::norm("neo-bert"),
    Arch::norm("llama-embed"),
    Arch::norm("maincoder"),
    Arch::norm("eagle3"),
    Arch::norm("nanbeige"),
    Arch::norm("pockettts"),
    Arch::neox("falcon"),
    Arch::neox("grok"),
    Arch::neox("dbrx"),
    Arch::neox("nomic-bert"),
    Arch {
        sliding: Some(MODERN_BERT_SLIDING),
        ..Arch::neox("modern-bert")
    },
    Arch::neox("stablelm"),
    Arch::neox("bitnet"),
    Arch::neox("qwen"),
    Arch::neox("qwen2"),
    Arch::neox("qwen2moe"),
    Arch::neox("qwen3"),
    Arch::neox("qwen3moe"),
    Arch {
        sliding: Some(OLMO3_SLIDING),
        ..Arch::neox("olmo2")
    },
    Arch::neox("olmoe"),
    Arch::neox("phi2"),
    Arch::neox("phi3"),
    Arch::neox("phimoe"),
    Arch::neox("plamo"),
    Arch::neox("gemma"),
    Arch::neox("gemma2"),
    Arch {
        sliding: Some(GEMMA3_SLIDING),
        ..Arch::neox("gemma3")
    },
    Arch {
        sliding: Some(GEMMA3N_SLIDING),
        ..Arch::neox("gemma3n")
    },
    Arch {
        sliding: Some(GEMMA4_SLIDING),
        swa_head: true,
        proportional_freqs: true,
        ..Arch::neox("gemma4")
    },
    Arch::neox("starcoder2"),
    Arch::neox("openelm"),
    Arch::neox("gptneox"),
    Arch::neox("codeshell"),
    Arch::neox("orion"),
    Arch::neox("nemotron"),
    Arch::neox("exaone"),
    // EXAONE 4: the 32B (64 layers) turns only its sliding layers; llama.cpp's loader gives
    // other sizes (the 1.2B) no sliding layers, and the graph turns every layer there.
    Arch {
        nope: full_layers_nope(
            "EXAONE 4",
            FullLayers {
                only_at_block_count: Some(64),
                ..EVERY_FOURTH_FULL
            },
        ),
        ..Arch::neox("exaone4")
    },
    Arch::neox("minicpm3"),
    Arch::neox("dots1"),
    Arch::neox("hunyuan-moe"),
    Arch {
        ntk_alpha: true,
        ..Arch::neox("hunyuan-dense")
    },
    Arch {
        ntk_alpha: true,
        mrope_with_sections: true,
        ..Arch::neox("hunyuan_vl")
    },
    Arch {
        mrope_with_sections: true,
        ..Arch::neox("glm4moe")
    },
    Arch::neox("gpt-oss"),
    Arch::neox("seed_oss"),
    Arch::neox("falcon-h1"),
    Arch::neox("jina-bert-v3"),
    Arch::neox("nomic-bert-moe"),
    Arch::neox("eurobert"),
    Arch::neox("dream"),
    Arch::neox("llada-moe"),
    Arch::neox("rnd1"),
    Arch::neox("plamo2"),
    Arch {
        sliding: Some(PLAMO3_SLIDING),
        ..Arch::neox("plamo3")
    },
    Arch {
        nope: full_layers_nope("EXAONE MoE", EVERY_FOURTH_FULL),
        ..Arch::neox("exaone-moe")
    },
    Arch::neox("bailingmoe2"),
    Arch::neox("jais2"),
    Arch::neox("lfm2"),
    Arch::neox("lfm2moe"),
    Arch::neox("grovemoe"),
    Arch::neox("apertus"),
    Arch::neox("minimax-m2"),
    Arch::neox("cogvlm"),
    Arch::neox("pangu-embedded"),
    Arch {
        nope: Some(AFMOE_NOPE),
        ..Arch::neox("afmoe")
    },
    Arch::neox("qwen3next"),
    Arch::neox("hy_v3"),
    Arch::neox("minimax-01"),
    Arch::neox("minimax-m3"),
    Arch::neox("talkie"),
    Arch::neox("hrm_text"),
    // EmbeddingGemma: Gemma 3's sliding defaults (llama.cpp: period 6, base 10000, unscaled).
    Arch {
        sliding: Some(GEMMA3_SLIDING),
        ..Arch::neox("gemma-embedding")
    },
    Arch {
        sliding: Some(MIMO2_SLIDING),
        ..Arch::neox("mimo2")
    },
    Arch::plain("qwen2vl", RopeKind::Mrope),
    Arch::plain("paddleocr", RopeKind::Mrope),
    Arch::plain("qwen3vl", RopeKind::Imrope),
    Arch::plain("qwen3vlmoe", RopeKind::Imrope),
    Arch::plain("qwen35", RopeKind::Imrope),
    Arch::plain("qwen35moe", RopeKind::Imrope),
    Arch::plain("qwen4exp", RopeKind::Imrope),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_architecture_is_one_row() {
        let mut names: Vec<_> = ARCHS.iter().map(|a| a.name).collect();
        let n = names.len();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), n, "a name in two rows");
    }

    /// docs/gguf.md lists the rows of each rope type, name by name, in the rows' order.
    #[test]
    fn the_guide_lists_the_rows() {
        let guide = include_str!("../../../../docs/gguf.md");
        for (label, kind) in [
            ("- NORM (adjacent pairs): ", RopeKind::Norm),
            ("- NEOX (halves): ", RopeKind::Neox),
            (
                "- M-RoPE (halves, sections following each other): ",
                RopeKind::Mrope,
            ),
            (
                "- Interleaved M-RoPE (halves, alternating slots): ",
                RopeKind::Imrope,
            ),
        ] {
            let start = guide.find(label).expect(label) + label.len();
            let end = start + guide[start..].find('.').expect("a list ends with '.'");
            let listed: Vec<&str> = guide[start..end].split(',').map(str::trim).collect();
            let rows: Vec<&str> = ARCHS
                .iter()
                .filter(|a| a.rope == kind)
                .map(|a| a.name)
                .collect();
            assert_eq!(listed, rows, "docs/gguf.md, {label}");
        }
    }
}
