//! [`Family`]: what a decoder family is made of, one row of data per family. The readers of
//! `config.json` ([`LlamaConfig::from_hf_config`](crate::LlamaConfig::from_hf_config)) and of
//! GGUF files ([`LlamaFamily::from_gguf`](crate::LlamaFamily::from_gguf)) look a family up here
//! (by `model_type`, or by GGUF architecture) and read its fields; neither names a family.
//! Adding a family is a row in [`FAMILIES`] and a fixture.
//!
//! What any reader of a `config.json` needs to know of a model type, this decoder or not, is
//! pe-formats' row of it ([`HfModelType`](candle_pe_formats::HfModelType)): the `head_dim` default
//! (Gemma 3: 256), where the text decoder's fields are (`text_config`), and how the ropes read.
//! A family row holds only what the decoder is made of; a family whose model type reads
//! differently needs a row there too.
//!
//! ```
//! use pe_models::{Family, ModelType};
//!
//! let gemma = Family::by_gguf_architecture("gemma3").expect("a row");
//! assert_eq!(gemma.model_type, ModelType::Gemma3);
//! assert!(gemma.qk_norm && gemma.sandwich_norms && gemma.embedding_scale);
//! assert_eq!(Family::by_model_type("qwen2_5_vl").map(|f| f.model_type), Some(ModelType::Qwen2Vl));
//! ```

/// The architecture a config describes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ModelType {
    /// Llama 2 / 3 / 3.1 (`LlamaForCausalLM`).
    Llama,
    /// Qwen2 / Qwen2.5 (`Qwen2ForCausalLM`): biases on q, k and v.
    Qwen2,
    /// Phi-3, Phi-3.5, Phi-4-mini (`Phi3ForCausalLM`): fused `qkv_proj` and `gate_up_proj`.
    Phi3,
    /// Mistral (`MistralForCausalLM`): optional sliding window.
    Mistral,
    /// Qwen3 (`Qwen3ForCausalLM`): an RMSNorm on each head of q and of k before the rope
    /// (qk-norm).
    Qwen3,
    /// Gemma 3's text decoder (`Gemma3ForCausalLM`, `model_type` `gemma3_text`): sliding and
    /// global layers with their own ropes, qk-norm, norms around the attention and the MLP
    /// whose weights store the scale minus one, a GELU MLP, scaled embeddings.
    Gemma3,
    /// The language model of Qwen2-VL and Qwen2.5-VL (`qwen2_vl`, `qwen2_5_vl`; its fields under
    /// `text_config`): Qwen2 layers with M-RoPE, at position ids `(3, batch, seq)`.
    Qwen2Vl,
    /// The language model of Qwen3-VL (`qwen3_vl`, its fields under `text_config`): Qwen3 layers
    /// with interleaved M-RoPE.
    Qwen3Vl,
    /// SmolLM3 (`SmolLM3ForCausalLM`): Llama's layers, some without rotary (NoPE layers,
    /// `no_rope_layers`).
    SmolLM3,
    /// Ministral 3's text decoder (`Ministral3ForCausalLM`): Mistral's layers with queries scaled
    /// by position (`llama_4_scaling_beta`).
    Ministral3,
    /// Llama 4's text decoder (`Llama4ForCausalLM`, `model_type` `llama4_text`), dense layers
    /// only: NoPE layers with a query temperature (`attn_temperature_tuning`), rotary on
    /// adjacent channel pairs, q and k L2-normalised after the rotation (`use_qk_norm`), and
    /// chunked attention on the rotary layers.
    Llama4,
}

impl ModelType {
    /// The `model_type` string of `config.json`: the first name of its family's row.
    pub fn name(self) -> &'static str {
        Family::of(self).hf_names[0]
    }
}

/// Where a bias comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bias {
    /// Never there.
    Never,
    /// Always there (Qwen2's q, k and v).
    Always,
    /// There when this boolean field of `config.json` is true (default false); in a GGUF file,
    /// when the tensor is.
    Field(&'static str),
}

/// Where the sliding window of `config.json` comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Window {
    /// None.
    None,
    /// `sliding_window`, when given.
    Field,
    /// `sliding_window`, this default when absent (transformers' Gemma3TextConfig: 4096).
    FieldOr(usize),
    /// None, and a true `use_sliding_window` is refused (Qwen's per-layer window).
    Refused,
}

/// What a decoder family is made of: the fields its readers and its layers take from it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Family {
    /// The architecture.
    pub model_type: ModelType,
    /// The `model_type` strings of `config.json` that name it (the first is its own).
    pub hf_names: &'static [&'static str],
    /// The `general.architecture` llama.cpp's converter writes for it; none when the GGUF
    /// decoder does not read it.
    pub gguf_architecture: Option<&'static str>,
    /// The biases on q, k and v.
    pub qkv_bias: Bias,
    /// The bias on o_proj.
    pub o_bias: Bias,
    /// The biases of the MLP.
    pub mlp_bias: Bias,
    /// An RMSNorm over each head of q and of k before the rope (`q_norm`, `k_norm`).
    pub qk_norm: bool,
    /// A weightless RMSNorm over each head of q and of k after the rope on rotary layers, on
    /// unless this boolean field is false (Llama 4's `use_qk_norm`).
    pub qk_l2_norm: Option<&'static str>,
    /// Norms on the attention's and the MLP's outputs besides their inputs (Gemma).
    pub sandwich_norms: bool,
    /// What `config.json`'s norm weights store: the scale minus this (Gemma: 1). GGUF files
    /// store the scale itself (llama.cpp's converter adds it back).
    pub norm_offset: f64,
    /// The field naming the MLP's activation, and its default.
    pub activation: (&'static str, &'static str),
    /// Token embeddings times `sqrt(hidden_size)` (rounded to f32), Gemma's scale.
    pub embedding_scale: bool,
    /// `query_pre_attn_scalar`'s default (Gemma 3: 256), read only by the families that have
    /// it; the scores are divided by `sqrt(head_dim)` when none.
    pub query_pre_attn_scalar: Option<f64>,
    /// The sliding window.
    pub window: Window,
    /// `tie_word_embeddings`' default.
    pub tied_default: bool,
    /// q, k, v stacked in `qkv_proj` and gate, up in `gate_up_proj` (Phi-3).
    pub fused: bool,
    /// Layers without rotary (`no_rope_layers`) and their query scale (SmolLM3, Llama 4).
    pub nope_layers: bool,
    /// Chunked attention's chunk default (`attention_chunk_size`, Llama 4: 8192).
    pub chunked: Option<usize>,
    /// Dense layers only, of a family whose checkpoints may have mixture-of-experts layers:
    /// `moe_layers` (or the layers `interleave_moe_layer_step` marks) must be empty (Llama 4).
    pub dense_only: bool,
    /// The MLP's width field, and its default.
    pub intermediate: (&'static str, Option<usize>),
    /// The MLP's module name (`mlp`; Llama 4: `feed_forward`).
    pub mlp_name: &'static str,
    /// Fields whose presence (non-null, not false) is refused: what this decoder does not
    /// compute.
    pub refused: &'static [&'static str],
}

/// The row every family starts from: Llama's.
const LLAMA: Family = Family {
    model_type: ModelType::Llama,
    hf_names: &["llama"],
    gguf_architecture: Some("llama"),
    qkv_bias: Bias::Field("attention_bias"),
    o_bias: Bias::Field("attention_bias"),
    mlp_bias: Bias::Field("mlp_bias"),
    qk_norm: false,
    qk_l2_norm: None,
    sandwich_norms: false,
    norm_offset: 0.0,
    activation: ("hidden_act", "silu"),
    embedding_scale: false,
    query_pre_attn_scalar: None,
    window: Window::None,
    tied_default: false,
    fused: false,
    nope_layers: false,
    chunked: None,
    dense_only: false,
    intermediate: ("intermediate_size", None),
    mlp_name: "mlp",
    refused: &[],
};

const QWEN2: Family = Family {
    model_type: ModelType::Qwen2,
    hf_names: &["qwen2"],
    gguf_architecture: Some("qwen2"),
    qkv_bias: Bias::Always,
    o_bias: Bias::Never,
    mlp_bias: Bias::Never,
    window: Window::Refused,
    ..LLAMA
};

const QWEN3: Family = Family {
    model_type: ModelType::Qwen3,
    hf_names: &["qwen3"],
    gguf_architecture: Some("qwen3"),
    mlp_bias: Bias::Never,
    qk_norm: true,
    window: Window::Refused,
    ..LLAMA
};

/// Every family the decoder reads.
pub const FAMILIES: &[Family] = &[
    LLAMA,
    QWEN2,
    QWEN3,
    Family {
        model_type: ModelType::Phi3,
        hf_names: &["phi3"],
        gguf_architecture: Some("phi3"),
        o_bias: Bias::Never,
        mlp_bias: Bias::Never,
        window: Window::Field,
        fused: true,
        ..LLAMA
    },
    Family {
        model_type: ModelType::Mistral,
        hf_names: &["mistral"],
        // Mistral converts as llama.
        gguf_architecture: None,
        o_bias: Bias::Never,
        mlp_bias: Bias::Never,
        window: Window::Field,
        ..LLAMA
    },
    Family {
        model_type: ModelType::Gemma3,
        hf_names: &["gemma3_text"],
        gguf_architecture: Some("gemma3"),
        mlp_bias: Bias::Never,
        qk_norm: true,
        sandwich_norms: true,
        norm_offset: 1.0,
        activation: ("hidden_activation", "gelu_pytorch_tanh"),
        embedding_scale: true,
        query_pre_attn_scalar: Some(256.0),
        window: Window::FieldOr(4096),
        tied_default: true,
        refused: &[
            "final_logit_softcapping",
            "attn_logit_softcapping",
            "use_bidirectional_attention",
        ],
        ..LLAMA
    },
    Family {
        model_type: ModelType::Qwen2Vl,
        hf_names: &["qwen2_vl", "qwen2_5_vl"],
        gguf_architecture: None,
        ..QWEN2
    },
    Family {
        model_type: ModelType::Qwen3Vl,
        hf_names: &["qwen3_vl"],
        gguf_architecture: None,
        ..QWEN3
    },
    Family {
        model_type: ModelType::SmolLM3,
        hf_names: &["smollm3"],
        gguf_architecture: None,
        window: Window::Refused,
        tied_default: true,
        nope_layers: true,
        ..LLAMA
    },
    Family {
        model_type: ModelType::Ministral3,
        hf_names: &["ministral3"],
        gguf_architecture: None,
        qkv_bias: Bias::Never,
        o_bias: Bias::Never,
        mlp_bias: Bias::Never,
        window: Window::Field,
        ..LLAMA
    },
    Family {
        model_type: ModelType::Llama4,
        hf_names: &["llama4_text"],
        gguf_architecture: None,
        mlp_bias: Bias::Never,
        qk_l2_norm: Some("use_qk_norm"),
        nope_layers: true,
        chunked: Some(8192),
        dense_only: true,
        intermediate: ("intermediate_size_mlp", Some(16384)),
        mlp_name: "feed_forward",
        ..LLAMA
    },
];

impl Family {
    /// The row of `config.json`'s `model_type`.
    pub fn by_model_type(name: &str) -> Option<&'static Family> {
        FAMILIES.iter().find(|f| f.hf_names.contains(&name))
    }

    /// The row of a GGUF file's `general.architecture`.
    pub fn by_gguf_architecture(name: &str) -> Option<&'static Family> {
        FAMILIES.iter().find(|f| f.gguf_architecture == Some(name))
    }

    /// The row of `model_type`.
    pub fn of(model_type: ModelType) -> &'static Family {
        FAMILIES
            .iter()
            .find(|f| f.model_type == model_type)
            .expect("every model type has a row")
    }

    /// The `model_type` strings of every row, for errors.
    pub fn hf_list() -> String {
        let names: Vec<&str> = FAMILIES
            .iter()
            .flat_map(|f| f.hf_names.iter().copied())
            .collect();
        names.join(", ")
    }

    /// The GGUF architectures of every row, for errors.
    pub fn gguf_list() -> String {
        let names: Vec<&str> = FAMILIES
            .iter()
            .filter_map(|f| f.gguf_architecture)
            .collect();
        names.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_model_type_has_one_row_and_names_are_unique() {
        let mut hf = std::collections::HashSet::new();
        let mut gguf = std::collections::HashSet::new();
        for f in FAMILIES {
            assert_eq!(Family::of(f.model_type), f);
            for n in f.hf_names {
                assert!(hf.insert(*n), "{n} twice");
            }
            if let Some(a) = f.gguf_architecture {
                assert!(gguf.insert(a), "{a} twice");
            }
        }
    }
}
