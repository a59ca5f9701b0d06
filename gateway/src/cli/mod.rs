pub mod compile;
