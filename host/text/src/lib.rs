//! Process output as text for a model, written once for the host and the guests.
//!
//! A command's output is bytes; what a model reads is text cut to a budget. The
//! steps, each in its own module:
//!
//! - [`utf8`]: character boundaries of raw bytes (a read may end inside a
//!   character; the next one starts with its continuation bytes);
//! - [`clean`](mod@clean): bytes to text as a terminal shows it (escape sequences removed,
//!   `\r` redraws collapsed, other controls dropped);
//! - [`capture`]: a bounded record of an output range (its first and last
//!   window of bytes, the middle counted) and its text cut to a budget
//!   ([`render_parts`]: head, tail, and what was left out, without the words a
//!   tool puts between them);
//! - [`plan`]: the same record made from byte ranges of a log instead of the
//!   bytes themselves, and [`summarize`], which reads output the way the bash
//!   tool of contract 0.1.0 did (1 MiB steps from a cursor, a character cut by
//!   the previous read completed, the log's omitted middle passed over) but
//!   reads only the bytes that end up shown.
//!
//! The host's `sessions.summarize-new-output` (contract 0.3.0) is [`summarize`]
//! over a session's log; the built-in bash plugin builds its result text from
//! the same [`Parts`]. Both come from this one crate, so a model reads the same
//! text whichever side cut it (the oracle tests in `tests/oracle.rs` hold the
//! 0.1.0 plugin's code and compare).

pub mod capture;
pub mod clean;
pub mod plan;
pub mod utf8;

pub use capture::{Budget, Capture, DEFAULT_WINDOW, Parts, TextMode, render_parts};
pub use clean::clean;
pub use plan::{CapturePlan, LogRange, OutputSource, Summary, SummaryRequest, summarize};
pub use utf8::{
    ceil_char_boundary, floor_char_boundary, incomplete_suffix_len, leading_continuation_len,
    tail_str,
};
