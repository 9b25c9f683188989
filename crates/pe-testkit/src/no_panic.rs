//! The sweep that holds "bad input gets an error, never a panic": random inputs, each run under
//! `catch_unwind`, every distinct panic reported with the input that made it.
//!
//! `PE_FUZZ_CASES` sets the number of inputs (default 3,000), `PE_TEST_SEED` the seed, and
//! `PE_FUZZ_TRACE` prints each input before it runs (to find one that aborts the process, as a
//! failed allocation does) and the time of each that takes over 20 ms.
//!
//! ```
//! use rand::Rng;
//!
//! pe_testkit::no_panics(
//!     "doc",
//!     |rng, _| rng.random_range(0..10u32),
//!     |&n| {
//!         let _ = 10u32.checked_div(n);
//!     },
//!     |n| n.to_string(),
//! );
//! ```

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, Once};

use rand::rngs::StdRng;

use crate::seeded_rng;

/// The panic hook's state: how many inputs are running (in any thread: a panic in a rayon
/// worker reaches the hook there), and the place and message of the last panic while one was.
/// Outside the inputs, panics go to the hook that was there before.
static IN_CASES: AtomicUsize = AtomicUsize::new(0);
static LAST: Mutex<String> = Mutex::new(String::new());
static HOOK: Once = Once::new();

/// Runs `run` on the inputs `make` draws (from the test's seeded generator and the input's
/// index), each under `catch_unwind`, and fails with every distinct panic (its place and
/// message) and the first input, as `show` writes it, that made it.
pub fn no_panics<T>(
    test: &str,
    mut make: impl FnMut(&mut StdRng, usize) -> T,
    run: impl Fn(&T),
    show: impl Fn(&T) -> String,
) {
    let cases: usize = std::env::var("PE_FUZZ_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3000);
    let trace = std::env::var_os("PE_FUZZ_TRACE").is_some();
    let mut rng = seeded_rng(test);
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if IN_CASES.load(Ordering::SeqCst) == 0 {
                return previous(info);
            }
            let payload = info.payload();
            let text = payload
                .downcast_ref::<&str>()
                .copied()
                .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
                .unwrap_or("");
            let place = info.location().map(|l| l.to_string()).unwrap_or_default();
            let message = format!("{place}: {text}");
            if std::env::var_os("PE_FUZZ_TRACE").is_some() {
                eprintln!("panicked at {message}");
            }
            *LAST.lock().unwrap_or_else(|e| e.into_inner()) = message;
        }));
    });
    let mut panics: Vec<(String, String)> = Vec::new();
    for case in 0..cases {
        let input = make(&mut rng, case);
        if trace {
            eprintln!("case {case}: {}", show(&input));
        }
        IN_CASES.fetch_add(1, Ordering::SeqCst);
        let t0 = std::time::Instant::now();
        let result = catch_unwind(AssertUnwindSafe(|| run(&input)));
        if trace && t0.elapsed().as_millis() > 20 {
            eprintln!("SLOW {} ms", t0.elapsed().as_millis());
        }
        IN_CASES.fetch_sub(1, Ordering::SeqCst);
        if result.is_err() {
            let message = LAST.lock().unwrap_or_else(|e| e.into_inner()).clone();
            if !panics.iter().any(|(m, _)| *m == message) {
                panics.push((message, show(&input)));
            }
        }
    }
    for (message, input) in &panics {
        eprintln!("panicked at {message}\n  on {input}\n");
    }
    assert!(panics.is_empty(), "{} distinct panics", panics.len());
}
