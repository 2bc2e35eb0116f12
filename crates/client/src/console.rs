//! Lines for the user on stdout and stderr, through the engine's writers that notice a
//! closed pipe (see `qbench_engine::output::stdio`).

pub use qbench_engine::output::stdio::*;

/// `text` with every control character but newlines and tabs escaped (`\u{1b}`): text that
/// came from a file anyone can edit (a shard's hostname or error) cannot move the cursor,
/// retitle the terminal or hide a line.
pub fn printable(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_control() && c != '\n' && c != '\t' {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

/// `println!` that survives a closed stdout.
#[macro_export]
macro_rules! say {
    ($($arg:tt)*) => {
        $crate::console::out(&format!("{}\n", format_args!($($arg)*)))
    };
}

/// `eprintln!` that survives a closed stderr.
#[macro_export]
macro_rules! tell {
    ($($arg:tt)*) => {
        $crate::console::err(&format!("{}\n", format_args!($($arg)*)))
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_escaped_and_lines_kept() {
        assert_eq!(
            printable("host\x1b]0;owned\x07\nnext\tcol"),
            "host\\u{1b}]0;owned\\u{7}\nnext\tcol"
        );
    }
}
