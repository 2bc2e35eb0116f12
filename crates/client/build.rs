//! `--version` names the git commit when built from a checkout.

include!("../build_version.rs");

fn main() {
    git_version();
}
