//! Helpers shared by the shaper's integration tests.
#![allow(dead_code)]

pub(crate) mod needs;
