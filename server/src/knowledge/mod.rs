//! Knowledge bases: turning web sites into clean page texts.
//!
//! - [`net`]: the SSRF-safe HTTP client every knowledge-base fetch goes through.

pub mod net;
