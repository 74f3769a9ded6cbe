//! Kernel test files (`tests/filetests/**/*.xk`): the run blocks they carry and, in the
//! runner, how those are executed and judged.

pub mod runner;
pub mod spec;
