//! Builds the edt backend's BPF program (bpf/edt.bpf.c) with clang. Without clang the
//! backend is left out, the rest of qbench builds, and `--backend edt` says why.

use std::path::PathBuf;

include!("../build_version.rs");

fn main() {
    git_version();
    println!("cargo:rerun-if-changed=bpf/edt.bpf.c");
    println!("cargo:rerun-if-env-changed=CLANG");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let object = out.join("edt.bpf.o");
    let why = out.join("edt.why");
    let clang = std::env::var("CLANG").unwrap_or_else(|_| "clang".into());
    // Installing clang or libbpf's headers later must rebuild the program: the result of this
    // script is cached until a file it names changes. dpkg gives the files it installs their
    // package's old mtimes, so a file named before it existed looks unchanged once it
    // appears; the directory it appears in is changed by its arrival.
    // PATH itself is not watched: commands that run cargo with different PATHs (the test
    // script adds Go's) would rebuild each other's program. Nor are directories inside the
    // checkout, which the build itself changes.
    let found = which(&clang);
    match &found {
        Some(path) => println!("cargo:rerun-if-changed={}", path.display()),
        None if clang.contains('/') => {
            let dir = std::path::Path::new(&clang).parent().filter(|d| d.is_dir());
            if let Some(dir) = dir {
                println!("cargo:rerun-if-changed={}", dir.display());
            }
        }
        None => {
            let checkout = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
            let checkout = checkout.canonicalize().unwrap_or(checkout);
            for dir in path_dirs().filter(|d| d.is_dir()) {
                if !dir.canonicalize().is_ok_and(|d| d.starts_with(&checkout)) {
                    println!("cargo:rerun-if-changed={}", dir.display());
                }
            }
        }
    }
    // The kernel's uapi headers include <asm/types.h>, which Debian keeps per architecture.
    let arch = std::env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_default();
    let multiarch = format!("/usr/include/{arch}-linux-gnu");
    let result = std::process::Command::new(&clang)
        .args([
            "-O2", "-g", "-target", "bpf", "-mcpu=v3", "-Wall", "-Werror",
        ])
        .arg(format!("-I{multiarch}"))
        .args(["-c", "bpf/edt.bpf.c", "-o"])
        .arg(&object)
        .output();
    let failure = match result {
        Ok(o) if o.status.success() => None,
        Ok(o) => Some(format!(
            "`{clang}` could not build crates/shaper/bpf/edt.bpf.c: {}",
            String::from_utf8_lossy(&o.stderr)
                .lines()
                .next()
                .unwrap_or("")
        )),
        Err(e) => Some(format!("cannot run `{clang}`: {e}")),
    };
    match failure {
        None => std::fs::write(&why, "").expect("OUT_DIR is writable"),
        Some(f) => {
            // Any header it missed (libbpf's, the kernel's, the architecture's) arrives
            // under /usr/include; a newer clang, beside the one that failed.
            if std::path::Path::new("/usr/include").is_dir() {
                println!("cargo:rerun-if-changed=/usr/include");
            }
            if let Some(dir) = found.as_deref().and_then(std::path::Path::parent) {
                println!("cargo:rerun-if-changed={}", dir.display());
            }
            // No environment variable decides whether this fails: one would make a test run
            // with it and one without rebuild each other. CI's requirement that the program
            // be built is checked by the tests (`QBENCH_REQUIRE_EDT` at run time).
            println!("cargo:warning=the edt backend is left out: {f}");
            std::fs::write(&object, []).expect("OUT_DIR is writable");
            std::fs::write(&why, f).expect("OUT_DIR is writable");
        }
    }
}

/// `program` as the shell would find it: itself when it names a path, else the first
/// executable of that name on PATH.
fn which(program: &str) -> Option<PathBuf> {
    if program.contains('/') {
        return Some(PathBuf::from(program)).filter(|p| p.is_file());
    }
    path_dirs().map(|d| d.join(program)).find(|p| p.is_file())
}

fn path_dirs() -> impl Iterator<Item = PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path).collect::<Vec<_>>().into_iter()
}
