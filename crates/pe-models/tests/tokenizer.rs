//! `TextTokenizer`: tiny GGUF vocabularies written here (byte-level BPE and SentencePiece),
//! the keys llama.cpp reads and the errors naming them; the two real GGUF files
//! (`scripts/real-models.sh`) against llama.cpp's ids, ids without specials, detokenized text
//! and chat template recorded in `crates/pe-testkit/fixtures/real/<stem>.json`; and
//! `generate --prompt` / `--chat`.

use std::io::Cursor;

use anyhow::Result;
use candle_core::quantized::gguf_file::{self, Content, Value};
use pe_models::{ChatMessage, TextTokenizer};

const SMOLLM: &str = "smollm2-135m-instruct-q4_1.gguf";
const GEMMA: &str = "gemma-3-270m-q4_k_m.gguf";

fn s(text: &str) -> Value {
    Value::String(text.into())
}

fn strings(texts: &[&str]) -> Value {
    Value::Array(texts.iter().map(|t| s(t)).collect())
}

/// The content of a GGUF file holding only `metadata`.
fn gguf(metadata: &[(&str, Value)]) -> Result<Content> {
    let mut file = Cursor::new(vec![]);
    let refs: Vec<(&str, &Value)> = metadata.iter().map(|(k, v)| (*k, v)).collect();
    gguf_file::write(&mut file, &refs, &[])?;
    file.set_position(0);
    Ok(Content::read(&mut file)?)
}

/// GPT-2's byte-level alphabet: the character of each byte.
fn byte_level_alphabet() -> Vec<String> {
    let mut printable: Vec<u32> = (b'!' as u32..=b'~' as u32).collect();
    printable.extend(0xA1..=0xAC);
    printable.extend(0xAE..=0xFF);
    let mut extra = 0;
    (0..256u32)
        .map(|b| {
            if printable.contains(&b) {
                char::from_u32(b).unwrap().to_string()
            } else {
                extra += 1;
                char::from_u32(255 + extra).unwrap().to_string()
            }
        })
        .collect()
}

/// A byte-level BPE vocabulary: the 256 byte characters, "he", "hel", "hell", "hello",
/// "Ġw", "Ġwo", "Ġwor", "Ġworl", "Ġworld", then "<|end|>" (control) and "<ud>"
/// (user-defined).
fn gpt2_keys(pre: Option<&str>) -> Vec<(&'static str, Value)> {
    let mut tokens = byte_level_alphabet();
    let merged = [
        "he", "hel", "hell", "hello", "Ġw", "Ġwo", "Ġwor", "Ġworl", "Ġworld",
    ];
    tokens.extend(merged.iter().map(|t| t.to_string()));
    tokens.extend(["<|end|>".to_string(), "<ud>".to_string()]);
    let mut types = vec![1i32; tokens.len()];
    let n = types.len();
    types[n - 2] = 3;
    types[n - 1] = 4;
    let merges = [
        "h e", "he l", "hel l", "hell o", "Ġ w", "Ġw o", "Ġwo r", "Ġwor l", "Ġworl d",
    ];
    let mut keys = vec![
        ("tokenizer.ggml.model", s("gpt2")),
        (
            "tokenizer.ggml.tokens",
            Value::Array(tokens.iter().map(|t| s(t)).collect()),
        ),
        (
            "tokenizer.ggml.token_type",
            Value::Array(types.into_iter().map(Value::I32).collect()),
        ),
        ("tokenizer.ggml.merges", strings(&merges)),
        ("tokenizer.ggml.bos_token_id", Value::U32(n as u32 - 2)),
        ("tokenizer.ggml.eos_token_id", Value::U32(n as u32 - 2)),
    ];
    if let Some(pre) = pre {
        keys.push(("tokenizer.ggml.pre", s(pre)));
    }
    keys
}

fn id_of(tok: &TextTokenizer, text: &str) -> u32 {
    let ids = tok.tokenize(text, false, true).unwrap();
    assert_eq!(ids.len(), 1, "{text:?} is one token");
    ids[0]
}

#[test]
fn gpt2_vocabulary_tokenizes_as_llama_cpp() -> Result<()> {
    let tok = TextTokenizer::from_gguf(&gguf(&gpt2_keys(Some("gpt-2")))?)?;
    let (hello, world) = (id_of(&tok, "hello"), id_of(&tok, " world"));
    let (end, ud) = (tok.vocab_size() as u32 - 2, tok.vocab_size() as u32 - 1);
    assert_eq!(tok.encode("hello world", false)?, [hello, world]);
    // No BOS by default for "gpt2" (llama.cpp), none added even with add_special.
    assert_eq!(tok.encode("hello world", true)?, [hello, world]);
    // Control tokens are parsed only with special parsing; user-defined ones always.
    assert_eq!(tok.tokenize("hello<|end|>", false, true)?, [hello, end]);
    let plain = tok.tokenize("hello<|end|>", false, false)?;
    assert_eq!(plain.len(), 1 + "<|end|>".len(), "{plain:?}");
    assert_eq!(tok.tokenize("hello<ud>", false, false)?, [hello, ud]);
    // Bytes beyond ASCII, through the byte-level alphabet, and back.
    let text = "héllo wörld ✓ \n\t 12345";
    let ids = tok.encode(text, false)?;
    assert_eq!(tok.decode(&ids)?, text);
    // Control tokens are written unless left out.
    assert_eq!(tok.decode(&[hello, end])?, "hello<|end|>");
    assert_eq!(tok.detokenize(&[hello, end], false, false)?, "hello");
    // gpt-2's clean_spaces: " ," loses its space when detokenized.
    let ids = tok.encode("hello , world", false)?;
    assert_eq!(tok.decode(&ids)?, "hello, world");

    // add_bos_token and add_eos_token as the file says.
    let mut keys = gpt2_keys(Some("gpt-2"));
    keys.push(("tokenizer.ggml.add_bos_token", Value::Bool(true)));
    keys.push(("tokenizer.ggml.add_eos_token", Value::Bool(true)));
    let tok = TextTokenizer::from_gguf(&gguf(&keys)?)?;
    assert_eq!(tok.encode("hello", true)?, [end, hello, end]);
    assert_eq!(tok.encode("hello", false)?, [hello]);
    assert_eq!(tok.detokenize(&[end, hello, end], true, true)?, "hello");

    // A missing pre-tokenizer is llama.cpp's "default"; "llama-bpe" adds BOS by default.
    TextTokenizer::from_gguf(&gguf(&gpt2_keys(None))?)?;
    let tok = TextTokenizer::from_gguf(&gguf(&gpt2_keys(Some("llama-bpe")))?)?;
    assert_eq!(tok.encode("hello", true)?, [end, hello]);
    Ok(())
}

/// A SentencePiece vocabulary: `<unk>`, `<s>`, `</s>`, the 256 byte tokens, then pieces
/// with scores, a control `<ctrl>` and a user-defined `<ud>`.
fn spm_keys() -> Vec<(&'static str, Value)> {
    let mut tokens: Vec<String> = vec!["<unk>".into(), "<s>".into(), "</s>".into()];
    let mut types = vec![2, 3, 3];
    tokens.extend((0..=255u8).map(|b| format!("<0x{b:02X}>")));
    types.extend([6; 256]);
    let pieces = [
        ("▁", -1.0),
        ("h", -2.0),
        ("e", -3.0),
        ("l", -4.0),
        ("o", -5.0),
        ("a", -6.0),
        ("he", -10.0),
        ("ll", -11.0),
        ("hell", -12.0),
        ("hello", -13.0),
        ("▁hello", -14.0),
        ("aa", -20.0),
        ("<ctrl>", 0.0),
        ("<ud>", 0.0),
    ];
    let mut scores = vec![0.0f32; tokens.len()];
    for (piece, score) in pieces {
        tokens.push(piece.into());
        types.push(1);
        scores.push(score);
    }
    let n = types.len();
    types[n - 2] = 3;
    types[n - 1] = 4;
    vec![
        ("tokenizer.ggml.model", s("llama")),
        (
            "tokenizer.ggml.tokens",
            Value::Array(tokens.iter().map(|t| s(t)).collect()),
        ),
        (
            "tokenizer.ggml.token_type",
            Value::Array(types.into_iter().map(Value::I32).collect()),
        ),
        (
            "tokenizer.ggml.scores",
            Value::Array(scores.into_iter().map(Value::F32).collect()),
        ),
    ]
}

#[test]
fn llama_vocabulary_tokenizes_as_llama_cpp_spm() -> Result<()> {
    let tok = TextTokenizer::from_gguf(&gguf(&spm_keys())?)?;
    let id = id_of_spm;
    // add_space_prefix (default true): "hello" is "▁hello"; BOS (id 1) is added by default.
    assert_eq!(tok.encode("hello", true)?, [1, id("▁hello")]);
    assert_eq!(tok.encode("hello", false)?, [id("▁hello")]);
    // The space prefix comes back after a special token too, as llama.cpp writes it.
    assert_eq!(
        tok.tokenize("hello<ctrl>hello", false, true)?,
        [id("▁hello"), id("<ctrl>"), id("▁hello")]
    );
    assert_eq!(
        tok.tokenize("hello<ud>hello", false, false)?,
        [id("▁hello"), id("<ud>"), id("▁hello")]
    );
    // Byte fallback: "é" is not a piece.
    assert_eq!(
        tok.encode("hé", false)?,
        [id("▁"), id("h"), 3 + 0xC3, 3 + 0xA9]
    );
    // Equal scores merge leftmost first: "aaa" is "aa" "a".
    assert_eq!(tok.tokenize("aaa", false, false)?[1..], [id("aa"), id("a")]);
    // Detokenized: ▁ is a space, byte tokens join into UTF-8; the space of the prefix is
    // removed from the first token, unless a BOS was removed before it (llama.cpp's
    // detokenize).
    let ids = tok.encode("hello hé", true)?;
    assert_eq!(tok.detokenize(&ids, true, false)?, " hello hé");
    assert_eq!(tok.decode(&ids)?, "<s> hello hé");
    assert_eq!(tok.detokenize(&ids[1..], false, false)?, "hello hé");

    // Without the space prefix.
    let mut keys = spm_keys();
    keys.push(("tokenizer.ggml.add_space_prefix", Value::Bool(false)));
    keys.push(("tokenizer.ggml.add_bos_token", Value::Bool(false)));
    let tok = TextTokenizer::from_gguf(&gguf(&keys)?)?;
    assert_eq!(tok.encode("hello", true)?, [id_of_spm("hello")]);
    Ok(())
}

/// The id of a piece of [`spm_keys`]: they follow the 259 special and byte tokens.
fn id_of_spm(piece: &str) -> u32 {
    const PIECES: &[&str] = &[
        "▁", "h", "e", "l", "o", "a", "he", "ll", "hell", "hello", "▁hello", "aa", "<ctrl>", "<ud>",
    ];
    259 + PIECES.iter().position(|p| *p == piece).expect("a piece") as u32
}

#[test]
fn bad_vocabularies_are_named() -> Result<()> {
    let err = |keys: &[(&str, Value)]| {
        format!(
            "{:#}",
            TextTokenizer::from_gguf(&gguf(keys).unwrap()).unwrap_err()
        )
    };
    let e = err(&[("tokenizer.ggml.model", s("rwkv"))]);
    assert!(
        e.contains("tokenizer.ggml.model") && e.contains("\"rwkv\""),
        "{e}"
    );
    let e = err(&[]);
    assert!(e.contains("tokenizer.ggml.model"), "{e}");
    let e = err(&gpt2_keys(Some("no-such-pre")));
    assert!(
        e.contains("tokenizer.ggml.pre") && e.contains("\"no-such-pre\""),
        "{e}"
    );
    let e = err(&[("tokenizer.ggml.model", s("gpt2"))]);
    assert!(e.contains("tokenizer.ggml.tokens"), "{e}");
    let keys: Vec<_> = gpt2_keys(None)
        .into_iter()
        .filter(|(k, _)| *k != "tokenizer.ggml.merges")
        .collect();
    let e = err(&keys);
    assert!(e.contains("tokenizer.ggml.merges"), "{e}");
    let keys: Vec<_> = spm_keys()
        .into_iter()
        .filter(|(k, _)| *k != "tokenizer.ggml.scores")
        .collect();
    let e = err(&keys);
    assert!(e.contains("tokenizer.ggml.scores"), "{e}");
    let mut keys = gpt2_keys(None);
    keys.push(("tokenizer.ggml.eos_token_id", Value::U32(1 << 20)));
    keys.retain(|(k, v)| *k != "tokenizer.ggml.eos_token_id" || matches!(v, Value::U32(1048576)));
    let e = err(&keys);
    assert!(e.contains("tokenizer.ggml.eos_token_id = 1048576"), "{e}");
    // A token id beyond the vocabulary, decoded.
    let tok = TextTokenizer::from_gguf(&gguf(&gpt2_keys(None))?)?;
    let e = tok.decode(&[1 << 20]).unwrap_err().to_string();
    assert!(e.contains("token id 1048576"), "{e}");
    Ok(())
}

#[test]
fn chat_templates_render_with_python_methods() -> Result<()> {
    let template = "{{ bos_token }}{% for m in messages %}{% if m.role == 'system' %}\
        {{ raise_exception('no system messages') }}{% endif %}\
        <{{ m.role }}>{{ m.content.strip() }}{% if m.content.startswith(' ') %}!{% endif %}\
        {{ eos_token }}\n{% endfor %}{% if add_generation_prompt %}<assistant>{% endif %}";
    let mut keys = gpt2_keys(None);
    keys.push(("tokenizer.chat_template", s(template)));
    let tok = TextTokenizer::from_gguf(&gguf(&keys)?)?;
    let text = tok.apply_chat_template(&[ChatMessage::user(" hello ")], true)?;
    assert_eq!(text, "<|end|><user>hello!<|end|>\n<assistant>");
    let text = tok.apply_chat_template(&[ChatMessage::user("hi")], false)?;
    assert_eq!(text, "<|end|><user>hi<|end|>\n");
    let e = format!(
        "{:#}",
        tok.apply_chat_template(&[ChatMessage::new("system", "x")], true)
            .unwrap_err()
    );
    assert!(e.contains("no system messages"), "{e}");
    let tok = TextTokenizer::from_gguf(&gguf(&gpt2_keys(None))?)?;
    let e = tok
        .apply_chat_template(&[ChatMessage::user("hi")], true)
        .unwrap_err()
        .to_string();
    assert!(e.contains("no chat template"), "{e}");
    Ok(())
}

// ---- The real files ----

fn real(file: &str) -> Result<TextTokenizer> {
    TextTokenizer::from_gguf_file(pe_testkit::real_model(file))
}

/// Texts of every kind: they must come back from the ids unchanged.
const ROUND_TRIPS: &[&str] = &[
    "Hello world",
    " leading space and  two spaces",
    "Numbers 1234567 and 3.14159, dates 2024-01-31.",
    "Tabs\tand\nnewlines\n\n\nand   runs    of spaces",
    "Unicode: héllo wörld, naïve café, Ωμέγα, Привет, 日本語のテキスト, 한국어, emoji 🦀🚀",
    "code: fn main() { println!(\"{}\", x?); } // done",
    "It's, we're, they've, I'm, you'll, he'd",
];

#[test]
fn real_files_round_trip_text() -> Result<()> {
    for file in [SMOLLM, GEMMA] {
        let tok = real(file)?;
        for text in ROUND_TRIPS {
            let ids = tok.tokenize(text, false, false)?;
            let back = tok.detokenize(&ids, false, false)?;
            assert_eq!(&back, text, "{file}: {ids:?}");
        }
    }
    Ok(())
}

#[test]
fn real_files_keys() -> Result<()> {
    let smollm = real(SMOLLM)?;
    assert_eq!(smollm.vocab_size(), 49152);
    assert_eq!(smollm.bos_token(), Some("<|im_start|>"));
    assert_eq!(smollm.eos_token(), Some("<|im_end|>"));
    assert!(!smollm.adds_bos());
    let gemma = real(GEMMA)?;
    assert_eq!(gemma.vocab_size(), 262144);
    assert_eq!(gemma.bos_token(), Some("<bos>"));
    assert!(gemma.adds_bos());
    assert_eq!(gemma.encode("Hi", true)?[0], 2);
    assert!(gemma.chat_template().is_none());
    Ok(())
}

/// llama.cpp's record of one file (crates/pe-testkit/fixtures/real/<stem>.json).
fn reference(file: &str) -> Result<serde_json::Value> {
    let stem = file.strip_suffix(".gguf").unwrap();
    let path = pe_testkit::fixture(&format!("real/{stem}.json"));
    Ok(pe_testkit::read_json(path))
}

fn ids(value: &serde_json::Value) -> Vec<u32> {
    value
        .as_array()
        .expect("a list of ids")
        .iter()
        .map(|v| v.as_u64().expect("an id") as u32)
        .collect()
}

/// Every case llama.cpp recorded, compared exactly: `ids` (add_bos and special parsing on),
/// `ids_plain` (both off), `detokenized` (llama.cpp's detokenize of `ids_plain`, control
/// tokens left out) and the chat template's text and ids. Prints every difference, then fails.
#[test]
fn real_files_match_llama_cpp() -> Result<()> {
    let mut failures = vec![];
    for file in [SMOLLM, GEMMA] {
        let tok = real(file)?;
        let record = reference(file)?;
        let cases = record["tokenizer"]["cases"].as_array().expect("cases");
        let mut equal = [0usize; 3];
        for (i, case) in cases.iter().enumerate() {
            let text = case["text"].as_str().expect("text");
            let want = ids(&case["ids"]);
            let got = tok.tokenize(text, true, true)?;
            if got == want {
                equal[0] += 1;
            } else {
                failures.push(format!(
                    "{file} case {i} {text:?} ids:\n  llama.cpp {want:?}\n  here      {got:?}"
                ));
            }
            let want = ids(&case["ids_plain"]);
            let got = tok.tokenize(text, false, false)?;
            if got == want {
                equal[1] += 1;
            } else {
                failures.push(format!(
                    "{file} case {i} {text:?} ids_plain:\n  llama.cpp {want:?}\n  here      {got:?}"
                ));
            }
            let want = case["detokenized"].as_str().expect("detokenized");
            let got = tok.detokenize(&ids(&case["ids_plain"]), false, false)?;
            if got == want {
                equal[2] += 1;
            } else {
                failures.push(format!(
                    "{file} case {i} detokenized:\n  llama.cpp {want:?}\n  here      {got:?}"
                ));
            }
        }
        eprintln!(
            "{file}: ids {}/{n}, ids_plain {}/{n}, detokenized {}/{n}",
            equal[0],
            equal[1],
            equal[2],
            n = cases.len()
        );
        let chat = &record["chat"];
        if chat.is_null() {
            assert!(
                tok.chat_template().is_none(),
                "{file}: llama.cpp recorded no chat, but the file has a template"
            );
            continue;
        }
        let messages: Vec<ChatMessage> = chat["messages"]
            .as_array()
            .expect("messages")
            .iter()
            .map(|m| {
                ChatMessage::new(
                    m["role"].as_str().expect("role"),
                    m["content"].as_str().expect("content"),
                )
            })
            .collect();
        let add = chat["add_generation_prompt"]
            .as_bool()
            .expect("add_generation_prompt");
        let text = tok.apply_chat_template(&messages, add)?;
        let want = chat["text"].as_str().expect("chat text");
        if text != want {
            failures.push(format!(
                "{file} chat text:\n  llama.cpp {want:?}\n  here      {text:?}"
            ));
        }
        // llama-cpp-python's chat handler adds no BOS beyond what the template writes.
        let want = ids(&chat["ids"]);
        let got = tok.tokenize(&text, false, true)?;
        eprintln!(
            "{file}: chat text {}, chat ids {}",
            text == chat["text"],
            got == want
        );
        if got != want {
            failures.push(format!(
                "{file} chat ids:\n  llama.cpp {want:?}\n  here      {got:?}"
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    Ok(())
}

// ---- generate --prompt / --chat ----

fn generate(flags: &[&str]) -> (std::process::ExitCode, String, String) {
    let (mut out, mut err) = (vec![], vec![]);
    let argv = std::iter::once("generate").chain(flags.iter().copied());
    let code = pe_models::generate_cli::main_with(
        argv,
        &pe_testkit::fixture("models/llama31"),
        &mut out,
        &mut err,
    );
    (
        code,
        String::from_utf8(out).unwrap(),
        String::from_utf8(err).unwrap(),
    )
}

#[test]
fn generate_prompt_prints_text() -> Result<()> {
    let model = pe_testkit::real_model(SMOLLM);
    let model = model.to_str().unwrap();
    let (code, out, err) = generate(&[
        "--model",
        model,
        "--prompt",
        "The capital of France is",
        "--max-new",
        "4",
    ]);
    assert_eq!(code, std::process::ExitCode::SUCCESS, "{err}");
    let ids_line = out
        .lines()
        .find_map(|l| l.strip_prefix("ids: "))
        .expect(&out);
    let ids: Vec<u32> = ids_line.split(' ').map(|t| t.parse().unwrap()).collect();
    assert_eq!(ids.len(), 4, "{out}");
    let text = out
        .lines()
        .find_map(|l| l.strip_prefix("text: "))
        .expect(&out);
    let text: String = serde_json::from_str(text)?;
    assert_eq!(text, real(SMOLLM)?.decode(&ids)?);
    assert!(!text.trim().is_empty(), "{out}");

    let (code, out, err) = generate(&["--model", model, "--chat", "Hi", "--max-new", "2"]);
    assert_eq!(code, std::process::ExitCode::SUCCESS, "{err}");
    assert!(out.contains("text: "), "{out}");
    Ok(())
}

#[test]
fn generate_text_errors_name_the_flag() {
    let fail = std::process::ExitCode::from(1);
    let usage = std::process::ExitCode::from(2);
    let (code, _, err) = generate(&["--prompt", "a", "--chat", "b"]);
    assert_eq!(code, usage);
    assert!(err.contains("--prompt") && err.contains("--chat"), "{err}");
    let (code, _, err) = generate(&["--prompt-ids", "1", "--prompt", "b"]);
    assert_eq!(code, usage);
    assert!(
        err.contains("--prompt-ids") && err.contains("--prompt"),
        "{err}"
    );
    let (code, _, err) = generate(&["--max-new", "1"]);
    assert_eq!(code, usage);
    assert!(
        err.contains("--prompt-ids") && err.contains("--chat"),
        "{err}"
    );
    // The default fixture folder has no tokenizer.json.
    let (code, _, err) = generate(&["--prompt", "hello"]);
    assert_eq!(code, fail);
    assert!(
        err.contains("--prompt") && err.contains("tokenizer.json"),
        "{err}"
    );
    // Gemma 3's GGUF file has no chat template.
    let gemma = pe_testkit::real_model(GEMMA);
    let (code, _, err) = generate(&["--model", gemma.to_str().unwrap(), "--chat", "hello"]);
    assert_eq!(code, fail);
    assert!(
        err.contains("--chat") && err.contains("chat template"),
        "{err}"
    );
}

/// A checkpoint folder's `tokenizer.json` (byte-level BPE with a special `<|end|>`) and the
/// `tokenizer_config.json` beside it: BOS / EOS and the chat template come from the config.
#[test]
fn tokenizer_json_folder() -> Result<()> {
    use tokenizers::models::bpe::BPE;
    use tokenizers::pre_tokenizers::byte_level::ByteLevel;
    use tokenizers::AddedToken;

    let dir = tempfile::tempdir()?;
    let mut vocab: Vec<String> = byte_level_alphabet();
    vocab.extend(["he".into(), "hel".into(), "hell".into(), "hello".into()]);
    let merges = [("h", "e"), ("he", "l"), ("hel", "l"), ("hell", "o")]
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .to_vec();
    let model = BPE::builder()
        .vocab_and_merges(
            vocab
                .iter()
                .enumerate()
                .map(|(i, t)| (t.clone(), i as u32))
                .collect::<tokenizers::models::bpe::Vocab>(),
            merges,
        )
        .build()
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let mut hf = tokenizers::Tokenizer::new(model);
    hf.with_pre_tokenizer(Some(ByteLevel::new(false, true, true)));
    hf.with_decoder(Some(ByteLevel::default()));
    hf.add_special_tokens([AddedToken::from("<|end|>", true)])
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    hf.save(dir.path().join("tokenizer.json"), false)
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    std::fs::write(
        dir.path().join("tokenizer_config.json"),
        r#"{"bos_token": {"content": "<|end|>"}, "eos_token": "<|end|>",
            "chat_template": "{% for m in messages %}{{ m.content }}{{ eos_token }}{% endfor %}"}"#,
    )?;
    let tok = TextTokenizer::for_model(dir.path())?;
    let (hello, end) = (vocab.len() as u32 - 1, vocab.len() as u32);
    assert_eq!(tok.encode("hello<|end|>", true)?, [hello, end]);
    assert_eq!(tok.tokenize("hello<|end|>", false, false)?.len(), 1 + 7);
    assert_eq!(tok.decode(&[hello, end])?, "hello<|end|>");
    assert_eq!(tok.detokenize(&[hello, end], false, false)?, "hello");
    assert_eq!(
        (tok.bos_token(), tok.eos_token()),
        (Some("<|end|>"), Some("<|end|>"))
    );
    let chat = tok.apply_chat_template(&[ChatMessage::user("hi")], true)?;
    assert_eq!(chat, "hi<|end|>");
    let e = tok.decode(&[1000]).unwrap_err().to_string();
    assert!(e.contains("token id 1000"), "{e}");

    // A folder without tokenizer.json names it.
    let empty = tempfile::tempdir()?;
    let e = TextTokenizer::for_model(empty.path())
        .unwrap_err()
        .to_string();
    assert!(e.contains("no tokenizer.json"), "{e}");
    Ok(())
}
