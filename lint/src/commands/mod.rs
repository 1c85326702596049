//! One module per command.

pub mod fix;
pub mod mutate;
pub mod rules;
pub mod simulate;
