//! What the CLI commands print on stdout and stderr. Every line a command
//! prints goes through [`out!`](crate::out), [`outln!`](crate::outln),
//! [`err!`](crate::err) or [`errln!`](crate::errln) (never `print!`, whose
//! failure panics): a write to a closed pipe or terminal (`toolhost call … |
//! true`; the host ignores SIGPIPE, so the kernel answers `EPIPE`) is an error
//! like any other. The first failure of each stream is kept, later writes to
//! it are skipped, the command goes on to its end (a call's commands are still
//! ended, its cursor still saved) and [`finish`] turns its exit code into
//! [`EXIT_OUTPUT_FAILED`] with the reason on stderr (docs/cli.md#exit-codes-of-toolhost-call).

use std::fmt;
use std::io::{self, Write as _};
use std::process::ExitCode;
use std::sync::OnceLock;

/// The exit code of a command whose stdout or stderr could not be written:
/// 74, `EX_IOERR` of sysexits.h ("an error occurred while doing I/O on some
/// file"). What the command did before is complete, and its cleanup ran.
pub const EXIT_OUTPUT_FAILED: u8 = 74;

/// One of the two streams a command prints on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    /// File descriptor 1: results.
    Stdout,
    /// File descriptor 2: errors, warnings, progress, prompts.
    Stderr,
}

impl Stream {
    fn failure(self) -> &'static OnceLock<String> {
        static STDOUT: OnceLock<String> = OnceLock::new();
        static STDERR: OnceLock<String> = OnceLock::new();
        match self {
            Stream::Stdout => &STDOUT,
            Stream::Stderr => &STDERR,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Stream::Stdout => "stdout",
            Stream::Stderr => "stderr",
        }
    }
}

/// Writes `args` to `stream` and flushes it. Returns whether it was written:
/// false when this write failed (the error is kept for [`finish`]) or an
/// earlier one to the same stream did (nothing is written after a failure).
pub fn write(stream: Stream, args: fmt::Arguments<'_>) -> bool {
    let failure = stream.failure();
    if failure.get().is_some() {
        return false;
    }
    let written = match stream {
        Stream::Stdout => {
            let mut out = io::stdout().lock();
            out.write_fmt(args).and_then(|()| out.flush())
        }
        Stream::Stderr => {
            let mut err = io::stderr().lock();
            let written = match crate::telemetry::log_format() {
                crate::telemetry::LogFormat::Text => err.write_fmt(args),
                // One JSON record per write, as the log lines are
                // (docs/operations.md#traces-and-logs).
                crate::telemetry::LogFormat::Json => {
                    let text = args.to_string();
                    let text = text.strip_suffix('\n').unwrap_or(&text);
                    err.write_all(crate::telemetry::json_line(text).as_bytes())
                }
            };
            written.and_then(|()| err.flush())
        }
    };
    match written {
        Ok(()) => true,
        Err(e) => {
            record(stream, &e);
            false
        }
    }
}

/// Keeps `e` as `stream`'s failure, for a write done elsewhere (attach's
/// asynchronous stdout); the first failure is the one [`finish`] reports.
pub fn record(stream: Stream, e: &dyn fmt::Display) {
    let _ = stream.failure().set(e.to_string());
}

/// Whether a write to `stream` has failed.
pub fn failed(stream: Stream) -> bool {
    stream.failure().get().is_some()
}

/// The exit code of a command that would end with `code`: `code` when every
/// write succeeded, else [`EXIT_OUTPUT_FAILED`], with the failure of stdout
/// told on stderr (when stderr still works).
pub fn finish(code: ExitCode) -> ExitCode {
    if report_failure() {
        ExitCode::from(EXIT_OUTPUT_FAILED)
    } else {
        code
    }
}

/// [`finish`] for a command that leaves through `std::process::exit`.
pub fn finish_code(code: i32) -> i32 {
    if report_failure() {
        i32::from(EXIT_OUTPUT_FAILED)
    } else {
        code
    }
}

/// Whether a write failed; tells stdout's failure on stderr.
fn report_failure() -> bool {
    let out = Stream::Stdout.failure().get();
    let err = Stream::Stderr.failure().get();
    if out.is_none() && err.is_none() {
        return false;
    }
    if let Some(e) = out {
        write(
            Stream::Stderr,
            format_args!(
                "toolhost: cannot write to {}: {e}; the command ran to its end, its output is \
                 lost\n",
                Stream::Stdout.name()
            ),
        );
    }
    true
}

/// `print!` that cannot panic: [`write`] to stdout; evaluates to whether it was written.
#[macro_export]
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::cli_output::write($crate::cli_output::Stream::Stdout, format_args!($($arg)*))
    };
}

/// `println!` that cannot panic: [`write`] to stdout with a newline.
#[macro_export]
macro_rules! outln {
    () => { $crate::out!("\n") };
    ($($arg:tt)*) => {
        $crate::cli_output::write(
            $crate::cli_output::Stream::Stdout,
            format_args!("{}\n", format_args!($($arg)*)),
        )
    };
}

/// `eprint!` that cannot panic: [`write`] to stderr.
#[macro_export]
macro_rules! err {
    ($($arg:tt)*) => {
        $crate::cli_output::write($crate::cli_output::Stream::Stderr, format_args!($($arg)*))
    };
}

/// `eprintln!` that cannot panic: [`write`] to stderr with a newline.
#[macro_export]
macro_rules! errln {
    () => { $crate::err!("\n") };
    ($($arg:tt)*) => {
        $crate::cli_output::write(
            $crate::cli_output::Stream::Stderr,
            format_args!("{}\n", format_args!($($arg)*)),
        )
    };
}
