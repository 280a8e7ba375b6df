//! preempt-lat: preemption latency measurement (skeleton; being written).
mod hip;

fn main() {}
