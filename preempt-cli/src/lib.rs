//! preempt-lat's command line as a library: what every subcommand is given and how its result
//! leaves, without the code that runs on a device. The typed options (clap parses straight into
//! them), the usage and error types and the exit statuses they map to, the output formats (one
//! exporter per format), the SVG plots, files replaced only when complete, and the stop flag a
//! first Ctrl-C raises.
//!
//! It is a crate of its own so that the two halves of `preempt-lat` share it: the binary, which
//! measures on a device, and `preempt-acceptance` (`acceptance`, `report`, the targets), which
//! talks to the binary only through argv and JSON but builds those command lines from these very
//! options, so that a flag renamed here is renamed in every child line.
pub mod atomic_file;
pub mod error;
pub mod exit;
pub mod num;
pub mod options;
pub mod output;
pub mod plot;
pub mod stop;
