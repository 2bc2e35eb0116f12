//! What a test needs from the machine: `qbench-testkit`'s guard, under the name the tests use.

#[allow(unused_imports)]
pub(crate) use qbench_testkit::{require, which, Need};
