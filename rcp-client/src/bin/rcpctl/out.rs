//! Writing to stdout without panicking when the reader has gone (`rcp ... | head`): a closed
//! pipe ends the program quietly, as it does for other command-line tools.

use std::io::Write;

/// Writes `args` to stdout; a closed pipe exits with status 0, another error with 1.
pub(crate) fn write(args: std::fmt::Arguments<'_>) {
    if let Err(e) = std::io::stdout().lock().write_fmt(args) {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
        eprintln!("rcp: writing to stdout: {e}");
        std::process::exit(i32::from(rcp_wire::exit::FAILURE));
    }
}

/// `print!` that survives a closed pipe.
macro_rules! out {
    ($($arg:tt)*) => { $crate::out::write(format_args!($($arg)*)) };
}

/// `println!` that survives a closed pipe.
macro_rules! outln {
    () => { $crate::out::write(format_args!("\n")) };
    ($($arg:tt)*) => {{ $crate::out::write(format_args!($($arg)*)); $crate::out::write(format_args!("\n")) }};
}

pub(crate) use {out, outln};
