//! What qbench writes as plain text: a run's summary and interval lines, the compare and diff
//! tables, and the notes and number formats they share.

mod app_text;
pub mod compare_table;
#[cfg(test)]
mod compare_table_tests;
pub mod diff_table;
mod link;
mod losses;
pub mod notes;
pub mod numbers;
pub mod run;
#[cfg(test)]
mod run_tests;
mod sockets;
