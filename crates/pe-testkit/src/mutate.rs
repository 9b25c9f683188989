//! Random mutations of the fixtures' inputs, for the sweeps that hold bad input to errors
//! ([`no_panics`](crate::no_panics)): config.json files and GGUF files where readers go wrong.
//!
//! - A config ([`ConfigMutator`]): one to four mutations, each at a random value of it: made
//!   extreme ([`extreme_json`]: zero, negatives, the edges of the integer types and of f64,
//!   sizes past every limit, values of the wrong type), nudged (off by one, negated, scaled),
//!   dropped, grown (arrays), taken from another config (any key at any depth), or a model
//!   type swapped.
//! - A GGUF file ([`GgufMutator`]): one to four mutations of its metadata (a key's value of any
//!   GGUF type, dropped, or taken from another file; the architecture swapped, its keys renamed
//!   or not), and of its rope tensors' shapes, types and offsets.
//!
//! ```
//! use pe_testkit::{seeded_rng, ConfigMutator};
//!
//! let mutator = ConfigMutator::from_fixtures();
//! let config = mutator.mutated(&mut seeded_rng("doc"), 0);
//! assert!(config.is_object());
//! ```

use std::io::Cursor;

use candle_core::quantized::gguf_file::{Content, TensorInfo, Value as GgufValue};
use candle_core::quantized::GgmlDType;
use candle_core::Shape;
use rand::rngs::StdRng;
use rand::seq::IndexedRandom;
use rand::Rng;
use serde_json::{json, Map, Value};

use crate::{fixture, fixture_entries, fixture_files, read_json};

/// Mutates the fixtures' configs (see the module docs).
pub struct ConfigMutator {
    seeds: Vec<Value>,
    model_types: Vec<String>,
}

impl ConfigMutator {
    /// From every config of the fixtures ([`fixture_configs`]).
    pub fn from_fixtures() -> Self {
        let seeds = fixture_configs();
        let mut model_types: Vec<String> = seeds
            .iter()
            .filter_map(|s| s["model_type"].as_str().map(String::from))
            .collect();
        model_types.extend(["".to_string(), "unknown".to_string()]);
        Self { seeds, model_types }
    }

    /// Input `case`: the seed config `case` (cycling), mutated one to four times.
    pub fn mutated(&self, rng: &mut StdRng, case: usize) -> Value {
        let mut config = self.seeds[case % self.seeds.len()].clone();
        if !config.is_object() {
            config = Value::Object(Map::new());
        }
        for _ in 0..rng.random_range(1..=4) {
            mutate(rng, &mut config, &self.seeds, &self.model_types);
        }
        config
    }
}

/// Every config.json of the fixtures: each model type's, each vision tower's, the tiny
/// models', the rope fixtures' inputs.
pub fn fixture_configs() -> Vec<Value> {
    let mut seeds = Vec::new();
    let types = read_json(fixture("model_types").join("transformers.json"));
    for entry in types["model_types"].as_object().unwrap().values() {
        seeds.push(entry["config"].clone());
    }
    let vision = read_json(fixture("vision_ropes").join("transformers.json"));
    for tower in vision["towers"].as_object().unwrap().values() {
        seeds.push(tower["config"].clone());
    }
    for dir in fixture_entries("models") {
        let path = dir.join("config.json");
        if path.exists() {
            seeds.push(read_json(path));
        }
    }
    for path in fixture_files("rope", "json") {
        let fixture = read_json(path);
        if fixture["config_input"].is_object() {
            seeds.push(fixture["config_input"].clone());
        }
    }
    seeds
}

/// Values where readers go wrong: zero, negatives, fractions, the edges of the integer types
/// and of f64, sizes past every limit, and values of the wrong type.
pub fn extreme_json(rng: &mut StdRng) -> Value {
    let pick = [
        json!(0),
        json!(1),
        json!(2),
        json!(3),
        json!(-1),
        json!(-2),
        json!(0.5),
        json!(-0.5),
        json!(1.5),
        json!(0.0),
        json!(-0.0),
        json!(1e-300),
        json!(1e300),
        json!(f64::MAX),
        json!(f64::MIN),
        json!(f64::MIN_POSITIVE),
        json!(u64::MAX),
        json!(i64::MIN),
        json!(i64::MAX),
        json!(u32::MAX),
        json!(1u64 << 31),
        json!((1u64 << 31) - 1),
        json!(1u64 << 32),
        json!(1u64 << 24),
        json!((1u64 << 24) + 1),
        json!(1u64 << 40),
        json!(1u64 << 53),
        json!((1u64 << 53) + 1),
        json!(1e20),
        json!(65_537),
        json!(""),
        json!("default"),
        json!("llama3"),
        json!("yarn"),
        json!("longrope"),
        json!("dynamic"),
        json!("linear"),
        json!("proportional"),
        json!("ntk"),
        json!("su"),
        json!("mrope"),
        json!("3d"),
        json!("full_attention"),
        json!("sliding_attention"),
        json!("chunked_attention"),
        json!("linear_attention"),
        Value::Null,
        json!(true),
        json!(false),
        json!([]),
        json!({}),
        json!([0]),
        json!([1, 2, 3]),
        json!([0, 0, 0]),
        json!([16, 24, 24]),
        json!([-1, 5, 5]),
        json!([1e300, 1.0]),
        json!(["full_attention", "sliding_attention"]),
        json!([true, false]),
        json!({"rope_type": "default"}),
        json!({"rope_type": "yarn", "factor": 4.0}),
        json!({"rope_type": "llama3", "factor": 8.0}),
        json!({"type": "linear", "factor": 0.0}),
    ];
    pick.choose(rng).unwrap().clone()
}

/// A number near `n`: off by one, negated, scaled, made a float or an integer.
fn near(rng: &mut StdRng, n: f64) -> Value {
    match rng.random_range(0..7) {
        0 => json!(n + 1.0),
        1 => json!(n - 1.0),
        2 => json!(-n),
        3 => json!(n * 2f64.powi(rng.random_range(-40..40))),
        4 => json!(n.trunc() as i64),
        5 => json!(n + 0.5),
        _ => json!((n as i64).wrapping_mul(1 << rng.random_range(1..40))),
    }
}

/// The paths of every value in `v` (object keys and array indices).
fn paths(v: &Value, here: &mut Vec<Step>, out: &mut Vec<Vec<Step>>) {
    out.push(here.clone());
    match v {
        Value::Object(map) => {
            for (k, child) in map {
                here.push(Step::Key(k.clone()));
                paths(child, here, out);
                here.pop();
            }
        }
        Value::Array(items) => {
            for (i, child) in items.iter().enumerate() {
                here.push(Step::Index(i));
                paths(child, here, out);
                here.pop();
            }
        }
        _ => {}
    }
}

#[derive(Clone, Debug)]
enum Step {
    Key(String),
    Index(usize),
}

fn at<'a>(v: &'a mut Value, path: &[Step]) -> &'a mut Value {
    path.iter().fold(v, |v, step| match step {
        Step::Key(k) => &mut v[k.as_str()],
        Step::Index(i) => &mut v[*i],
    })
}

/// A random `(key, value)` of some config's objects, at any depth.
fn donated(rng: &mut StdRng, donors: &[Value]) -> Option<(String, Value)> {
    let donor = donors.choose(rng)?;
    let mut all = Vec::new();
    paths(donor, &mut Vec::new(), &mut all);
    let keyed: Vec<_> = all
        .into_iter()
        .filter(|p| matches!(p.last(), Some(Step::Key(_))))
        .collect();
    let path = keyed.choose(rng)?;
    let Some(Step::Key(key)) = path.last() else {
        return None;
    };
    let mut donor = donor.clone();
    Some((key.clone(), at(&mut donor, path).take()))
}

/// One mutation of `config`, at a random value of it.
fn mutate(rng: &mut StdRng, config: &mut Value, donors: &[Value], model_types: &[String]) {
    let mut all = Vec::new();
    paths(config, &mut Vec::new(), &mut all);
    let path = all.choose(rng).unwrap().clone();
    let target = at(config, &path);
    // The root stays an object: its mutations are of its keys.
    let op = match rng.random_range(0..10) {
        0..=4 | 6 if path.is_empty() => 5,
        op => op,
    };
    match op {
        0..=2 => *target = extreme_json(rng),
        3 | 4 => {
            if let Some(n) = target.as_f64() {
                *target = near(rng, n);
            } else {
                *target = extreme_json(rng);
            }
        }
        5 => match target {
            // Drop a key or an element.
            Value::Object(map) if !map.is_empty() => {
                let key = map
                    .keys()
                    .nth(rng.random_range(0..map.len()))
                    .unwrap()
                    .clone();
                map.remove(&key);
            }
            Value::Array(items) if !items.is_empty() => {
                let i = rng.random_range(0..items.len());
                if rng.random_bool(0.5) {
                    items.remove(i);
                } else {
                    items.truncate(i);
                }
            }
            other => *other = Value::Null,
        },
        6 => match target {
            // Grow an array.
            Value::Array(items) if !items.is_empty() => {
                let item = items.choose(rng).unwrap().clone();
                for _ in 0..rng.random_range(1..4) {
                    items.push(item.clone());
                }
            }
            other => *other = json!([other.clone(), other.clone()]),
        },
        7 | 8 => {
            // A key of another config, here (or at the root).
            if let Some((key, value)) = donated(rng, donors) {
                let map = match target {
                    Value::Object(map) => map,
                    _ => config.as_object_mut().unwrap(),
                };
                map.insert(key, value);
            }
        }
        _ => {
            let name = model_types.choose(rng).unwrap().clone();
            let map = match target {
                Value::Object(map) if rng.random_bool(0.5) => map,
                _ => config.as_object_mut().unwrap(),
            };
            map.insert("model_type".into(), Value::String(name));
        }
    }
}

/// Mutates the fixtures' GGUF files (see the module docs).
pub struct GgufMutator {
    files: Vec<GgufFile>,
    archs: Vec<String>,
}

impl GgufMutator {
    /// From every GGUF file of the fixtures ([`fixture_gguf_files`]).
    pub fn from_fixtures() -> Self {
        let files = fixture_gguf_files();
        let mut archs: Vec<String> = files
            .iter()
            .filter_map(|f| match f.content.metadata.get("general.architecture") {
                Some(GgufValue::String(a)) => Some(a.clone()),
                _ => None,
            })
            .collect();
        archs.sort();
        archs.dedup();
        archs.extend(["".to_string(), "gpt2".to_string()]);
        Self { files, archs }
    }

    /// The files the mutations start from.
    pub fn files(&self) -> &[GgufFile] {
        &self.files
    }

    /// Input `case`: the file `case` (cycling, its index returned) with its metadata mutated
    /// one to four times, and its rope tensors' infos too where `tensors` says.
    pub fn mutated(&self, rng: &mut StdRng, case: usize, tensors: bool) -> (usize, Content) {
        let file = case % self.files.len();
        let mut content = copy_content(&self.files[file].content);
        for _ in 0..rng.random_range(1..=4) {
            mutate_gguf(rng, &mut content, &self.files, &self.archs, tensors);
        }
        (file, content)
    }
}

/// A GGUF file of the fixtures: its bytes, and its metadata and tensors as candle reads them.
pub struct GgufFile {
    /// Its file name.
    pub name: String,
    /// The whole file.
    pub bytes: Vec<u8>,
    /// Its metadata and tensor infos.
    pub content: Content,
}

/// Every GGUF file of the fixtures, by name.
pub fn fixture_gguf_files() -> Vec<GgufFile> {
    let mut files = Vec::new();
    for path in fixture_files("gguf", "gguf") {
        let bytes = std::fs::read(&path).unwrap();
        let content = Content::read(&mut Cursor::new(&bytes)).unwrap();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        files.push(GgufFile {
            name,
            bytes,
            content,
        });
    }
    files
}

/// A copy of `content` (candle's `Content` is not `Clone`).
pub fn copy_content(content: &Content) -> Content {
    Content {
        magic: content.magic,
        metadata: content.metadata.clone(),
        tensor_infos: content
            .tensor_infos
            .iter()
            .map(|(name, info)| {
                let info = TensorInfo {
                    ggml_dtype: info.ggml_dtype,
                    shape: info.shape.clone(),
                    offset: info.offset,
                };
                (name.clone(), info)
            })
            .collect(),
        tensor_data_offset: content.tensor_data_offset,
    }
}

/// A GGUF value where readers go wrong: each type, zero, the edges, not finite, arrays of each
/// kind and length.
fn extreme_gguf(rng: &mut StdRng) -> GgufValue {
    use GgufValue as V;
    let pick = [
        V::U8(0),
        V::I8(-1),
        V::U16(u16::MAX),
        V::I16(-2),
        V::U32(0),
        V::U32(1),
        V::U32(3),
        V::U32(u32::MAX),
        V::U32(1 << 31),
        V::I32(-1),
        V::I32(i32::MIN),
        V::U64(u64::MAX),
        V::U64(1 << 40),
        V::I64(i64::MIN),
        V::F32(0.0),
        V::F32(-0.0),
        V::F32(-1.0),
        V::F32(0.5),
        V::F32(1e-45),
        V::F32(f32::MAX),
        V::F32(f32::NAN),
        V::F32(f32::INFINITY),
        V::F64(1e300),
        V::F64(f64::NAN),
        V::Bool(true),
        V::String(String::new()),
        V::String("yarn".into()),
        V::String("linear".into()),
        V::String("longrope".into()),
        V::String("none".into()),
        V::Array(vec![]),
        V::Array(vec![V::I32(1); 4]),
        V::Array(vec![V::I32(0); 4]),
        V::Array(vec![V::I32(-1), V::I32(2), V::I32(2), V::I32(0)]),
        V::Array(vec![V::I32(1 << 30); 3]),
        V::Array(vec![V::Bool(true), V::Bool(false)]),
        V::Array(vec![V::Bool(false); 70]),
        V::Array(vec![V::F32(1.0); 3]),
        V::Array(vec![V::String("x".into())]),
        V::Array(vec![V::Array(vec![])]),
    ];
    pick.choose(rng).unwrap().clone()
}

/// One mutation of a GGUF file's metadata or of its rope tensors.
fn mutate_gguf(
    rng: &mut StdRng,
    content: &mut Content,
    files: &[GgufFile],
    archs: &[String],
    tensors: bool,
) {
    let arch = match content.metadata.get("general.architecture") {
        Some(GgufValue::String(a)) => a.clone(),
        _ => String::new(),
    };
    let mut keys: Vec<String> = content.metadata.keys().cloned().collect();
    keys.sort();
    match rng.random_range(0..if tensors { 10 } else { 8 }) {
        0..=3 => {
            if let Some(key) = keys.choose(rng) {
                content.metadata.insert(key.clone(), extreme_gguf(rng));
            }
        }
        4 => {
            if let Some(key) = keys.choose(rng) {
                content.metadata.remove(key);
            }
        }
        5 | 6 => {
            // A key of another file, under this file's architecture.
            let donor = &files.choose(rng).unwrap().content;
            let mut donated: Vec<_> = donor.metadata.iter().collect();
            donated.sort_by(|a, b| a.0.cmp(b.0));
            if let Some((key, value)) = donated.choose(rng) {
                let key = match key.split_once('.') {
                    Some((_, rest)) if !key.starts_with("general.") => format!("{arch}.{rest}"),
                    _ => key.to_string(),
                };
                content.metadata.insert(key, (*value).clone());
            }
        }
        7 => {
            // Another architecture, its keys renamed to it or left as they were.
            let other = archs.choose(rng).unwrap().clone();
            if rng.random_bool(0.5) {
                let prefix = format!("{arch}.");
                content.metadata = std::mem::take(&mut content.metadata)
                    .into_iter()
                    .map(|(k, v)| match k.strip_prefix(&prefix) {
                        Some(rest) => (format!("{other}.{rest}"), v),
                        None => (k, v),
                    })
                    .collect();
            }
            let value = GgufValue::String(other);
            content
                .metadata
                .insert("general.architecture".into(), value);
        }
        _ => {
            // A rope tensor's shape, type or place; or a rope tensor dropped.
            let mut names: Vec<String> = content
                .tensor_infos
                .keys()
                .filter(|n| n.starts_with("rope"))
                .cloned()
                .collect();
            names.sort();
            let Some(name) = names.choose(rng) else {
                return;
            };
            let info = content.tensor_infos.get_mut(name).unwrap();
            // (A mutated shape's product may not fit a usize.)
            let n = info
                .shape
                .dims()
                .iter()
                .fold(1usize, |n, d| n.saturating_mul(*d));
            match rng.random_range(0..6) {
                0 => {
                    let dims = [
                        0,
                        1,
                        n.saturating_sub(1),
                        n.saturating_add(1),
                        n.saturating_mul(2),
                        1 << 40,
                    ];
                    info.shape = Shape::from(vec![*dims.choose(rng).unwrap()]);
                }
                1 => info.shape = Shape::from(vec![1 << 32, 1 << 32]),
                2 => info.shape = Shape::from(vec![n, 2]),
                3 => {
                    let types = [
                        GgmlDType::F16,
                        GgmlDType::Q4_0,
                        GgmlDType::Q8_0,
                        GgmlDType::BF16,
                    ];
                    info.ggml_dtype = *types.choose(rng).unwrap();
                }
                4 => {
                    info.offset = [u64::MAX, 1 << 40, 1, info.offset.saturating_add(4)]
                        [rng.random_range(0..4)]
                }
                _ => {
                    content.tensor_infos.remove(name);
                }
            }
        }
    }
}
