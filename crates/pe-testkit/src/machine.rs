//! What a measurement ran on, for the reports that print timings (`bench_report`, `gpu_check`):
//! the CPU's model name, its threads, and the load average.
//!
//! ```
//! assert!(!pe_testkit::cpu_model().is_empty());
//! ```

/// The CPU's model name from `/proc/cpuinfo` (`unknown CPU` where there is none).
pub fn cpu_model() -> String {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    cpuinfo
        .lines()
        .find_map(|l| {
            l.strip_prefix("model name")
                .map(|m| m.trim_start_matches([' ', '\t', ':']).to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into())
}

/// The hardware threads the process may use.
pub fn threads() -> usize {
    std::thread::available_parallelism().map_or(0, |n| n.get())
}

/// The 1, 5 and 15 minute load averages, as `/proc/loadavg` gives them (empty where there is
/// none).
pub fn load() -> String {
    let loadavg = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    loadavg
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}
