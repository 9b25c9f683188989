//! Hands gpu_check how cargo built it (debug or release, and the opt-level), for its report's
//! header: timings are only comparable between builds alike.
fn main() {
    let profile = std::env::var("PROFILE").unwrap_or_default();
    let opt_level = std::env::var("OPT_LEVEL").unwrap_or_default();
    println!("cargo::rustc-env=PE_GPU_CHECK_BUILD={profile} build, opt-level {opt_level}");
}
