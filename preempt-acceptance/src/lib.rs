//! `preempt-lat acceptance` and `preempt-lat report`: the users' test plan run stage by stage as
//! child processes of `preempt-lat`, and the results read back and judged against the targets the
//! plan names. Nothing here opens a device: a stage is a child command line (built from
//! preempt-cli's typed options) and its JSON; the stages that are device experiments no
//! subcommand offers run in preempt-lat's `__acceptance-stage` and write [`acceptance::stage_result`].
pub mod acceptance;
pub mod report;
pub mod targets;

// The command line's shared parts under the names the modules use (`crate::error::Context`).
use preempt_cli::{atomic_file, error, exit, options, output, plot};
