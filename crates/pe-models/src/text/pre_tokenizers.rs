//! llama.cpp's pre-tokenizers of byte-level BPE vocabularies, as data: the value of a GGUF
//! file's `tokenizer.ggml.pre` picks the regexes that split the text before the merges
//! (applied one after the other, each keeping the matches and the text between them, as
//! llama.cpp's `unicode_regex_split` does) and the switches llama.cpp sets with it
//! (`src/llama-vocab.cpp`, `llama_vocab::impl::load` and `llm_tokenizer_bpe`). Crate-private:
//! [`crate::TextTokenizer::from_gguf`] reads it, and an unknown name is its error.

/// GPT-2's regex (llama.cpp: `LLAMA_VOCAB_PRE_TYPE_GPT2`).
const GPT2: &str = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)";

/// Llama 3's regex, with llama.cpp's case-insensitive contractions spelled out.
const LLAMA3: &str = r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// Qwen 2's regex: Llama 3's with single digits.
const QWEN2: &str = r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// BLOOM's and Poro's regex.
const PORO: &str = r" ?[^(\s|.,!?…。，、।۔،)]+";

/// GPT-4o's (and Llama 4's) regex, as llama.cpp rewrites its case classes.
const GPT4O: &str = r"[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// Mistral's Tekken regex, as llama.cpp rewrites its case classes.
const TEKKEN: &str = r"[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// One row of the table: the `tokenizer.ggml.pre` values that select it, its regexes and
/// llama.cpp's switches.
#[derive(Debug)]
pub(crate) struct PreTokenizer {
    /// The `tokenizer.ggml.pre` values.
    pub names: &'static [&'static str],
    /// The regexes, applied in order.
    pub regexes: &'static [&'static str],
    /// Detokenizing removes the space before `?!.,` and around apostrophes (llama.cpp's
    /// `clean_spaces`).
    pub clean_spaces: bool,
    /// A word that is a whole vocabulary token is not merged (llama.cpp's `ignore_merges`).
    pub ignore_merges: bool,
    /// The BOS token is added by default (`tokenizer.ggml.add_bos_token` overrides it).
    pub add_bos: bool,
}

const fn row(
    names: &'static [&'static str],
    regexes: &'static [&'static str],
    clean_spaces: bool,
) -> PreTokenizer {
    PreTokenizer {
        names,
        regexes,
        clean_spaces,
        ignore_merges: false,
        add_bos: false,
    }
}

/// The table, in llama.cpp's order.
pub(crate) const PRE_TOKENIZERS: &[PreTokenizer] = &[
    row(
        &["default"],
        &[r"[\p{P}\$\+<=>\^~\|]+", GPT2, r"\p{N}+", r"[0-9][0-9][0-9]"],
        true,
    ),
    PreTokenizer {
        names: &[
            "llama3",
            "llama-v3",
            "llama-bpe",
            "falcon3",
            "falcon-h1",
            "pixtral",
            "midm-2.0",
            "lfm2",
            "jina-v5-nano",
        ],
        regexes: &[LLAMA3],
        clean_spaces: true,
        ignore_merges: true,
        add_bos: true,
    },
    row(&["dbrx", "smaug-bpe"], &[LLAMA3], true),
    row(
        &["deepseek-coder"],
        &[
            "[\r\n]",
            r"\s?\p{L}+",
            r"\s?\p{P}+",
            "[一-龥ࠀ-一가-퟿]+",
            r"\p{N}",
        ],
        false,
    ),
    row(
        &["deepseek-v3"],
        &[
            r"\p{N}{1,3}",
            "[一-龥぀-ゟ゠-ヿ]+",
            "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+",
        ],
        false,
    ),
    row(
        &["falcon"],
        &[r"[\p{P}\$\+<=>\^~\|`]+", GPT2, "[0-9][0-9][0-9]"],
        true,
    ),
    row(
        &["gpt-2", "phi-2", "jina-es", "jina-de", "gigachat", "jina-v2-es", "jina-v2-de"],
        &[GPT2],
        true,
    ),
    row(
        &["a.x-4.0", "mellum", "modern-bert", "exaone4", "mpt", "olmo", "jais"],
        &[GPT2],
        true,
    ),
    row(&["trillion", "granite-docling"], &[GPT2], false),
    row(
        &["starcoder", "refact", "codeshell", "exaone", "minerva-7b"],
        &[r"\p{N}", GPT2],
        true,
    ),
    row(&["command-r", "smollm"], &[r"\p{N}", GPT2], false),
    row(
        &["qwen2", "deepseek-r1-qwen", "kormo", "f2llmv2", "hunyuan", "solar-open"],
        &[QWEN2],
        false,
    ),
    row(&["stablelm2", "megrez"], &[QWEN2], true),
    row(&["poro-chat"], &[PORO], false),
    row(&["bloom", "gpt3-finnish"], &[PORO], true),
    row(&["viking"], &[PORO, r"\p{N}"], false),
    PreTokenizer {
        names: &["tekken"],
        regexes: &[TEKKEN],
        clean_spaces: false,
        ignore_merges: true,
        add_bos: true,
    },
    row(&["gpt-4o", "llama4", "kanana2"], &[GPT4O], false),
    row(
        &["seed-coder"],
        &[r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1}| ?[^\s\p{L}\p{N}\r\n]+|\s*[\r\n]+|\s+(?!\S)|\s+"],
        false,
    ),
    row(&["grok-2"], &[QWEN2], false),
];

/// The row `tokenizer.ggml.pre` = `name` selects; `None` for a name llama.cpp's table (as
/// far as this one copies it) does not hold.
pub(crate) fn pre_tokenizer(name: &str) -> Option<&'static PreTokenizer> {
    PRE_TOKENIZERS.iter().find(|row| row.names.contains(&name))
}

/// Every name the table holds, for errors.
pub(crate) fn known_names() -> Vec<&'static str> {
    PRE_TOKENIZERS
        .iter()
        .flat_map(|row| row.names.iter().copied())
        .collect()
}
