//! Output formats (being written).
