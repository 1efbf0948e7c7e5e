//! placeholder

pub mod log_store;
