include!("../build_version.rs");

fn main() {
    git_version();
}
