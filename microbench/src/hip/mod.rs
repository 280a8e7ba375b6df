//! HIP loaded at run time (placeholder: being written).
