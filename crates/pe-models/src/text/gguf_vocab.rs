//! The vocabulary of a GGUF file (`tokenizer.ggml.*`) and llama.cpp's tokenizer over it
//! (`src/llama-vocab.cpp`): special and user-defined tokens split out of the text first
//! (`tokenizer_st_partition`), then the text between them tokenized as `tokenizer.ggml.model`
//! says, and the ids turned back into text as `llama_detokenize` does.
//!
//! - `gpt2`: byte-level BPE, by Hugging Face's `tokenizers` (the pre-tokenizer's regexes of
//!   `pre_tokenizers.rs`, GPT-2's byte-to-unicode map, the file's merges by rank).
//! - `llama`: SentencePiece as llama.cpp's SPM tokenizer: spaces as U+2581 (`▁`), a space
//!   before the text and after every special token when `tokenizer.ggml.add_space_prefix`
//!   (default true), then the merges of adjacent pieces into vocabulary tokens, the highest
//!   `tokenizer.ggml.scores` first and the leftmost of equal scores first, and `<0xXX>` byte
//!   tokens for what no token spells. This loop is written here rather than run through
//!   `tokenizers`' BPE with merges ranked by score: a rank is one number per pair, so two pairs
//!   that make the same token (`a`+`aa`, `aa`+`a`) cannot tie and be taken leftmost first.

use std::collections::{BinaryHeap, HashMap};

use anyhow::{anyhow, bail, Context as _, Result};
use candle_core::quantized::gguf_file::Content;
use candle_pe_formats::GgufMeta;
use tokenizers::models::bpe::BPE;
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::pre_tokenizers::sequence::Sequence;
use tokenizers::pre_tokenizers::split::{Split, SplitPattern};
use tokenizers::{PreTokenizerWrapper, SplitDelimiterBehavior, Tokenizer};

use super::pre_tokenizers::{known_names, pre_tokenizer};

/// llama.cpp's token attributes (`llama_token_attr`), from `tokenizer.ggml.token_type`.
pub(crate) mod attr {
    pub const UNDEFINED: u32 = 0;
    pub const UNKNOWN: u32 = 1 << 0;
    pub const UNUSED: u32 = 1 << 1;
    pub const NORMAL: u32 = 1 << 2;
    pub const CONTROL: u32 = 1 << 3;
    pub const USER_DEFINED: u32 = 1 << 4;
    pub const BYTE: u32 = 1 << 5;
}

/// The names llama.cpp treats as end-of-generation tokens and so marks as control tokens.
const EOG_NAMES: &[&str] = &[
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<|return|>",
    "<|call|>",
    "<|flush|>",
    "<|calls|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "</s>",
    "<|eom_id|>",
    "<EOT>",
    "_<EOT>",
    "[EOT]",
    "[EOS]",
    "<|end_of_text|>",
    "<end_of_utterance>",
    "<eos>",
    "<turn|>",
    "<|tool_response>",
    "<｜end▁of▁sentence｜>",
];

/// How the text between special tokens becomes ids.
enum Model {
    /// Byte-level BPE through `tokenizers`.
    Bpe(Box<Tokenizer>),
    /// llama.cpp's SentencePiece merges.
    Spm,
}

/// A GGUF file's vocabulary and llama.cpp's settings for it.
pub(crate) struct GgufVocab {
    texts: Vec<String>,
    attrs: Vec<u32>,
    scores: Vec<f32>,
    ids: HashMap<String, u32>,
    /// Control, user-defined and unknown tokens, longest first (llama.cpp's
    /// `cache_special_tokens`).
    specials: Vec<u32>,
    model: Model,
    pub add_space_prefix: bool,
    clean_spaces: bool,
    pub bos: Option<u32>,
    pub eos: Option<u32>,
    pub add_bos: bool,
    pub add_eos: bool,
}

/// A piece of the text: raw text or a special token split out of it.
enum Fragment<'a> {
    Text(&'a str),
    Token(u32),
}

const TOKENS_KEY: &str = "tokenizer.ggml.tokens";

/// Whether `tokenizer.ggml.model` is SentencePiece (`llama`) rather than byte-level BPE
/// (`gpt2`); any other model is an error naming it.
fn read_model(meta: &GgufMeta) -> Result<bool> {
    let model_key = "tokenizer.ggml.model";
    let model_name = meta
        .string(model_key)?
        .with_context(|| format!("no {model_key}: the file holds no tokenizer"))?;
    Ok(match model_name {
        "gpt2" => false,
        "llama" => true,
        other => bail!(
            "{model_key} = {other:?}: unsupported tokenizer (this reads \"gpt2\", byte-level \
             BPE, and \"llama\", SentencePiece)"
        ),
    })
}

/// The id of each token's text, an empty text renamed `[EMPTY_<id>]` first, as llama.cpp
/// names it.
fn index_tokens(texts: &mut [String]) -> HashMap<String, u32> {
    let mut ids = HashMap::with_capacity(texts.len());
    for (i, text) in texts.iter_mut().enumerate() {
        if text.is_empty() {
            *text = format!("[EMPTY_{i}]");
        }
        ids.insert(text.clone(), i as u32);
    }
    ids
}

/// The tokens split out of the text before tokenizing (control, user-defined and unknown ones,
/// the end-of-generation names of [`EOG_NAMES`] marked control first), longest first.
fn special_tokens(texts: &[String], attrs: &mut [u32], ids: &HashMap<String, u32>) -> Vec<u32> {
    for name in EOG_NAMES {
        if let Some(&id) = ids.get(*name) {
            attrs[id as usize] |= attr::CONTROL;
        }
    }
    let mut specials: Vec<u32> = (0..texts.len() as u32)
        .filter(|&id| {
            attrs[id as usize] & (attr::CONTROL | attr::USER_DEFINED | attr::UNKNOWN) != 0
        })
        .collect();
    specials.sort_by_key(|&id| std::cmp::Reverse(texts[id as usize].len()));
    specials
}

/// `tokenizer.ggml.tokens`: at least one, at most `u32::MAX`.
fn read_tokens(meta: &GgufMeta) -> Result<Vec<String>> {
    let texts = meta
        .strings(TOKENS_KEY)?
        .with_context(|| format!("no {TOKENS_KEY}: the file's tokenizer has no tokens"))?;
    if texts.is_empty() {
        bail!("{TOKENS_KEY} is empty");
    }
    if texts.len() > u32::MAX as usize {
        bail!("{TOKENS_KEY}: {} tokens do not fit u32 ids", texts.len());
    }
    Ok(texts.into_iter().map(str::to_string).collect())
}

/// Each token's attributes, from `tokenizer.ggml.token_type` (normal when absent).
fn read_attrs(meta: &GgufMeta, n: usize) -> Result<Vec<u32>> {
    let types_key = "tokenizer.ggml.token_type";
    let Some(types) = meta.integers::<i64>(types_key)? else {
        return Ok(vec![attr::NORMAL; n]);
    };
    if types.len() < n {
        bail!("{types_key}: {} types for {n} tokens", types.len());
    }
    let attr = |t: &i64| match t {
        1 => attr::NORMAL,
        2 => attr::UNKNOWN,
        3 => attr::CONTROL,
        4 => attr::USER_DEFINED,
        5 => attr::UNUSED,
        6 => attr::BYTE,
        _ => attr::UNDEFINED,
    };
    Ok(types[..n].iter().map(attr).collect())
}

/// Each token's score, `tokenizer.ggml.scores` (required by SentencePiece, 0 otherwise).
fn read_scores(meta: &GgufMeta, n: usize, spm: bool) -> Result<Vec<f32>> {
    let scores_key = "tokenizer.ggml.scores";
    match meta.f32s(scores_key)? {
        None if spm => bail!("no {scores_key}: a \"llama\" (SentencePiece) tokenizer needs them"),
        None => Ok(vec![0.0; n]),
        Some(scores) if scores.len() < n => {
            bail!("{scores_key}: {} scores for {n} tokens", scores.len())
        }
        Some(mut scores) => {
            scores.truncate(n);
            Ok(scores)
        }
    }
}

/// A byte-level BPE's model, from `tokenizer.ggml.pre` and `tokenizer.ggml.merges`, and its
/// pre-tokenizer's defaults: `(model, add_space_prefix, clean_spaces, add_bos)`.
fn read_bpe(meta: &GgufMeta, ids: &HashMap<String, u32>) -> Result<(Model, bool, bool, bool)> {
    let pre_key = "tokenizer.ggml.pre";
    let pre_name = meta.string(pre_key)?.unwrap_or("default");
    let pre = pre_tokenizer(pre_name).with_context(|| {
        format!(
            "{pre_key} = {pre_name:?}: unknown pre-tokenizer (known: {})",
            known_names().join(", ")
        )
    })?;
    let merges_key = "tokenizer.ggml.merges";
    let merges = meta.strings(merges_key)?.with_context(|| {
        format!("no {merges_key}: a \"gpt2\" (byte-level BPE) tokenizer needs them")
    })?;
    let merges: Vec<String> = merges.into_iter().map(str::to_string).collect();
    let bpe = bpe(ids, &merges, pre.ignore_merges, pre.regexes)?;
    Ok((
        Model::Bpe(Box::new(bpe)),
        false,
        pre.clean_spaces,
        pre.add_bos,
    ))
}

/// `tokenizer.ggml.bos_token_id` and `eos_token_id`, llama.cpp's defaults when absent (those
/// only when within the `n` tokens); an id beyond them is an error.
fn read_bos_eos(meta: &GgufMeta, n: usize, spm: bool) -> Result<(Option<u32>, Option<u32>)> {
    let id = |key: &str, default: u32| -> Result<Option<u32>> {
        let default = Some(default).filter(|&i| (i as usize) < n);
        match meta.integer::<u32>(key)?.or(default) {
            Some(id) if id as usize >= n => {
                bail!("{key} = {id}: beyond the {n} tokens of {TOKENS_KEY}")
            }
            id => Ok(id),
        }
    };
    // llama.cpp's defaults when the keys are absent.
    let (bos_default, eos_default) = if spm { (1, 2) } else { (11, 11) };
    Ok((
        id("tokenizer.ggml.bos_token_id", bos_default)?,
        id("tokenizer.ggml.eos_token_id", eos_default)?,
    ))
}

/// The value of one `<0xXX>` byte token.
fn byte_of(text: &str) -> Option<u8> {
    let hex = text.strip_prefix("<0x")?.strip_suffix('>')?;
    u8::from_str_radix(hex, 16).ok()
}

/// GPT-2's map of bytes to printable characters (the byte-level alphabet), as pairs.
fn byte_chars() -> Vec<(u8, char)> {
    let mut printable: Vec<u8> = (b'!'..=b'~').collect();
    printable.extend(0xA1u8..=0xAC);
    printable.extend(0xAEu8..=0xFF);
    let mut map = Vec::with_capacity(256);
    let mut extra = 0u32;
    for b in 0..=255u8 {
        let c = if printable.contains(&b) {
            char::from(b)
        } else {
            extra += 1;
            char::from_u32(255 + extra).expect("below U+0200")
        };
        map.push((b, c));
    }
    map
}

/// A piece of the text during the SPM merges: its byte span and its neighbours.
#[derive(Clone, Copy)]
struct Symbol {
    start: usize,
    len: usize,
    prev: Option<usize>,
    next: Option<usize>,
}

/// A candidate SPM merge of two adjacent symbols into a token of this score: the highest
/// score first, then the leftmost (llama.cpp's `llm_bigram_spm::comparator`).
struct Bigram {
    score: f32,
    left: usize,
    right: usize,
    len: usize,
}

impl PartialEq for Bigram {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other).is_eq()
    }
}

impl Eq for Bigram {}

impl PartialOrd for Bigram {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Bigram {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.score
            .total_cmp(&other.score)
            .then(other.left.cmp(&self.left))
    }
}

impl GgufVocab {
    /// The vocabulary of `content`; errors name the key and the value.
    pub fn from_gguf(content: &Content) -> Result<Self> {
        let meta = GgufMeta::new(content);
        let spm = read_model(&meta)?;
        let mut texts = read_tokens(&meta)?;
        let n = texts.len();
        let mut attrs = read_attrs(&meta, n)?;
        let scores = read_scores(&meta, n, spm)?;
        let ids = index_tokens(&mut texts);
        let specials = special_tokens(&texts, &mut attrs, &ids);
        let (model, add_space_prefix, clean_spaces, add_bos) = if spm {
            (Model::Spm, true, false, true)
        } else {
            read_bpe(&meta, &ids)?
        };
        let add_space_prefix = meta
            .bool("tokenizer.ggml.add_space_prefix")?
            .unwrap_or(add_space_prefix);
        let add_bos = meta
            .bool("tokenizer.ggml.add_bos_token")?
            .unwrap_or(add_bos);
        let add_eos = meta.bool("tokenizer.ggml.add_eos_token")?.unwrap_or(false);
        let (bos, eos) = read_bos_eos(&meta, n, spm)?;
        if add_bos && bos.is_none() {
            bail!("tokenizer.ggml.add_bos_token is true but the file gives no tokenizer.ggml.bos_token_id");
        }
        if add_eos && eos.is_none() {
            bail!("tokenizer.ggml.add_eos_token is true but the file gives no tokenizer.ggml.eos_token_id");
        }
        Ok(Self {
            texts,
            attrs,
            scores,
            ids,
            specials,
            model,
            add_space_prefix,
            clean_spaces,
            bos,
            eos,
            add_bos,
            add_eos,
        })
    }

    /// The number of tokens.
    pub fn len(&self) -> usize {
        self.texts.len()
    }

    /// The text of token `id` as the file stores it.
    pub fn token(&self, id: u32) -> Option<&str> {
        self.texts.get(id as usize).map(String::as_str)
    }

    /// llama.cpp's `tokenize(text, add_special, parse_special)`.
    pub fn tokenize(&self, text: &str, add_special: bool, parse_special: bool) -> Result<Vec<u32>> {
        let fragments = self.partition(text, parse_special);
        let mut out = vec![];
        if add_special && self.add_bos {
            out.extend(self.bos);
        }
        let mut prev_special = true;
        for fragment in fragments {
            match fragment {
                Fragment::Token(id) => {
                    out.push(id);
                    prev_special = true;
                }
                Fragment::Text(raw) => {
                    match &self.model {
                        Model::Spm => {
                            let mut text = String::with_capacity(raw.len() + 3);
                            if self.add_space_prefix && prev_special {
                                text.push(' ');
                            }
                            text.push_str(raw);
                            self.spm(&text.replace(' ', "\u{2581}"), &mut out);
                        }
                        Model::Bpe(bpe) => {
                            let encoding = bpe
                                .encode(raw, false)
                                .map_err(|e| anyhow!("cannot tokenize {raw:?}: {e}"))?;
                            out.extend_from_slice(encoding.get_ids());
                        }
                    }
                    prev_special = false;
                }
            }
        }
        if add_special && self.add_eos {
            out.extend(self.eos);
        }
        Ok(out)
    }

    /// llama.cpp's `tokenizer_st_partition`: each special token, longest first, split out of
    /// the raw text around it; control and unknown tokens only when `parse_special`,
    /// user-defined ones always.
    fn partition<'a>(&self, text: &'a str, parse_special: bool) -> Vec<Fragment<'a>> {
        let mut fragments = vec![];
        if text.is_empty() {
            return fragments;
        }
        fragments.push(Fragment::Text(text));
        for &id in &self.specials {
            let a = self.attrs[id as usize];
            if !parse_special && a & (attr::CONTROL | attr::UNKNOWN) != 0 {
                continue;
            }
            let needle = self.texts[id as usize].as_str();
            if !fragments
                .iter()
                .any(|f| matches!(f, Fragment::Text(t) if t.contains(needle)))
            {
                continue;
            }
            let mut next = Vec::with_capacity(fragments.len() + 2);
            for fragment in fragments {
                let Fragment::Text(mut rest) = fragment else {
                    next.push(fragment);
                    continue;
                };
                while let Some(at) = rest.find(needle) {
                    if at > 0 {
                        next.push(Fragment::Text(&rest[..at]));
                    }
                    next.push(Fragment::Token(id));
                    rest = &rest[at + needle.len()..];
                }
                if !rest.is_empty() {
                    next.push(Fragment::Text(rest));
                }
            }
            fragments = next;
        }
        fragments
    }

    /// llama.cpp's `llm_tokenizer_spm_session::tokenize` of `text` (spaces already `▁`): the
    /// characters, merged pairwise into vocabulary tokens (the highest score first, the
    /// leftmost of equal scores first) until no adjacent pair spells one; a character no token
    /// spells becomes its bytes' `<0xXX>` tokens.
    fn spm(&self, text: &str, out: &mut Vec<u32>) {
        let mut symbols: Vec<Symbol> = text
            .char_indices()
            .map(|(start, c)| Symbol {
                start,
                len: c.len_utf8(),
                prev: None,
                next: None,
            })
            .collect();
        for i in 0..symbols.len() {
            symbols[i].prev = i.checked_sub(1);
            symbols[i].next = Some(i + 1).filter(|&n| n < symbols.len());
        }
        let mut queue = BinaryHeap::new();
        let bigram = |left: Option<usize>, right: Option<usize>, symbols: &[Symbol]| {
            let (left, right) = (left?, right?);
            let (l, r) = (symbols[left], symbols[right]);
            let len = l.len + r.len;
            let id = *self.ids.get(&text[l.start..l.start + len])?;
            Some(Bigram {
                score: self.scores[id as usize],
                left,
                right,
                len,
            })
        };
        for i in 1..symbols.len() {
            queue.extend(bigram(Some(i - 1), Some(i), &symbols));
        }
        while let Some(b) = queue.pop() {
            let (l, r) = (symbols[b.left], symbols[b.right]);
            // Stale: one side was merged away since.
            if l.len == 0 || r.len == 0 || l.len + r.len != b.len {
                continue;
            }
            symbols[b.left].len += r.len;
            symbols[b.right].len = 0;
            symbols[b.left].next = r.next;
            if let Some(next) = r.next {
                symbols[next].prev = Some(b.left);
            }
            queue.extend(bigram(l.prev, Some(b.left), &symbols));
            queue.extend(bigram(Some(b.left), r.next, &symbols));
        }
        let mut at = (!symbols.is_empty()).then_some(0);
        while let Some(i) = at {
            let s = symbols[i];
            let piece = &text[s.start..s.start + s.len];
            match self.ids.get(piece) {
                Some(&id) => out.push(id),
                None => out.extend(piece.bytes().filter_map(|b| self.byte_token(b))),
            }
            at = s.next;
        }
    }

    /// The `<0xXX>` token of byte `b` (llama.cpp's `byte_to_token` for SPM): the byte token,
    /// else the byte as a one-character token, else the unknown token.
    fn byte_token(&self, b: u8) -> Option<u32> {
        self.ids
            .get(&format!("<0x{b:02X}>"))
            .or_else(|| std::str::from_utf8(&[b]).ok().and_then(|s| self.ids.get(s)))
            .copied()
    }

    /// The bytes of token `id` (llama.cpp's `token_to_piece`); `special` renders control and
    /// unknown tokens, `lstrip` drops one leading space.
    fn piece(&self, id: u32, lstrip: bool, special: bool, bytes: &mut Vec<u8>) -> Result<()> {
        let text = self
            .texts
            .get(id as usize)
            .with_context(|| format!("token id {id}: the vocabulary has {} tokens", self.len()))?;
        let a = self.attrs[id as usize];
        if !special && a & (attr::UNKNOWN | attr::CONTROL) != 0 {
            return Ok(());
        }
        let piece: Vec<u8> = if a & (attr::UNKNOWN | attr::CONTROL | attr::USER_DEFINED) != 0 {
            text.as_bytes().to_vec()
        } else if a & attr::NORMAL != 0 {
            match &self.model {
                Model::Spm => text.replace('\u{2581}', " ").into_bytes(),
                Model::Bpe(_) => byte_decode(text),
            }
        } else if a & attr::BYTE != 0 {
            byte_of(text).map(|b| vec![b]).unwrap_or_default()
        } else {
            vec![]
        };
        let piece = match piece.split_first() {
            Some((b' ', rest)) if lstrip => rest,
            _ => &piece[..],
        };
        bytes.extend_from_slice(piece);
        Ok(())
    }

    /// llama.cpp's `detokenize(ids, remove_special, unparse_special)`, the bytes as UTF-8
    /// (invalid sequences replaced by U+FFFD).
    pub fn detokenize(
        &self,
        ids: &[u32],
        remove_special: bool,
        unparse_special: bool,
    ) -> Result<String> {
        let mut ids = ids;
        let mut remove_space = self.add_space_prefix;
        if remove_special && self.add_bos && !ids.is_empty() && Some(ids[0]) == self.bos {
            remove_space = false;
            ids = &ids[1..];
        }
        if remove_special && self.add_eos && ids.last().is_some() && ids.last().copied() == self.eos
        {
            ids = &ids[..ids.len() - 1];
        }
        let mut bytes = vec![];
        for &id in ids {
            self.piece(id, remove_space, unparse_special, &mut bytes)?;
            remove_space = false;
        }
        if self.clean_spaces {
            bytes = clean_spaces(&bytes);
        }
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }
}

/// GPT-2's byte-level text back to bytes (llama.cpp's `llama_decode_text`).
fn byte_decode(text: &str) -> Vec<u8> {
    thread_local! {
        static CHAR_BYTES: HashMap<char, u8> = byte_chars().into_iter().map(|(b, c)| (c, b)).collect();
    }
    CHAR_BYTES.with(|map| {
        let mut out = vec![];
        for c in text.chars() {
            match map.get(&c) {
                Some(&b) => out.push(b),
                None => {
                    // As llama.cpp marks a character outside the byte-level alphabet.
                    let mut utf8 = [0u8; 4];
                    out.extend_from_slice(b"[UNK_BYTE_0x");
                    for b in c.encode_utf8(&mut utf8).bytes() {
                        out.extend_from_slice(format!("{b:02x}").as_bytes());
                    }
                    out.extend_from_slice(text.as_bytes());
                    out.push(b']');
                }
            }
        }
        out
    })
}

/// llama.cpp's three passes of `clean_spaces`: no space before `?!.,`, none around a lone
/// apostrophe, none before `'s`, `'m`, `'re`, `'ve`.
fn clean_spaces(text: &[u8]) -> Vec<u8> {
    if text.is_empty() {
        return vec![];
    }
    let mut out = vec![text[0]];
    for i in 1..text.len() {
        let x = text[i];
        if text[i - 1] == b' ' && matches!(x, b'?' | b'!' | b'.' | b',') {
            out.pop();
        }
        out.push(x);
    }
    let text = out;
    let mut out = vec![text[0]];
    let mut i = 1;
    while i < text.len() {
        let x = text[i];
        if x == b'\'' && i + 1 < text.len() && text[i - 1] == b' ' && text[i + 1] == b' ' {
            // " ' " -> "'": the space before is taken back, the one after skipped.
            out.pop();
            out.push(x);
            i += 2;
            continue;
        }
        out.push(x);
        i += 1;
    }
    let text = out;
    let mut out = vec![text[0]];
    for i in 1..text.len() {
        let x = text[i];
        if text[i - 1] == b' ' && x == b'\'' && i + 1 < text.len() {
            let x1 = text[i + 1];
            let contraction = matches!(x1, b's' | b'm')
                || (i + 2 < text.len() && matches!((x1, text[i + 2]), (b'r', b'e') | (b'v', b'e')));
            if contraction {
                out.pop();
            }
        }
        out.push(x);
    }
    out
}

/// The byte-level BPE of a `gpt2` vocabulary: `regexes` split the text (each keeping what it
/// matches and what lies between), GPT-2's byte map, then the merges by rank.
fn bpe(
    ids: &HashMap<String, u32>,
    merges: &[String],
    ignore_merges: bool,
    regexes: &[&str],
) -> Result<Tokenizer> {
    let key = "tokenizer.ggml.merges";
    let mut pairs = Vec::with_capacity(merges.len());
    for (i, merge) in merges.iter().enumerate() {
        // As llama.cpp: split at the first space after the first byte.
        let at = (1..merge.len())
            .find(|&i| merge.as_bytes()[i] == b' ')
            .with_context(|| format!("{key}[{i}] = {merge:?}: not two tokens and a space"))?;
        let (a, b) = (&merge[..at], &merge[at + 1..]);
        // A merge of pieces the vocabulary does not hold could only make bytes llama.cpp
        // drops; tokenizers refuses them, so they are left out.
        if ids.contains_key(a) && ids.contains_key(b) && ids.contains_key(&format!("{a}{b}")) {
            pairs.push((a.to_string(), b.to_string()));
        }
    }
    let model = BPE::builder()
        .vocab_and_merges(
            ids.iter()
                .map(|(t, &id)| (t.clone(), id))
                .collect::<tokenizers::models::bpe::Vocab>(),
            pairs,
        )
        .ignore_merges(ignore_merges)
        .build()
        .map_err(|e| anyhow!("{key}: {e}"))?;
    let mut pre: Vec<PreTokenizerWrapper> = regexes
        .iter()
        .map(|re| {
            Split::new(
                SplitPattern::Regex(re.to_string()),
                SplitDelimiterBehavior::Isolated,
                false,
            )
            .map(PreTokenizerWrapper::from)
            .map_err(|e| anyhow!("pre-tokenizer regex {re:?}: {e}"))
        })
        .collect::<Result<_>>()?;
    pre.push(ByteLevel::new(false, false, false).into());
    let mut tokenizer = Tokenizer::new(model);
    tokenizer.with_pre_tokenizer(Some(Sequence::new(pre)));
    Ok(tokenizer)
}
