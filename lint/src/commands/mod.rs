//! One module per subcommand (and one for the default command, checking files): each takes its
//! parsed arguments and returns the exit code.

pub mod fix;
