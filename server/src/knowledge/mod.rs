//! Knowledge bases: the documents an agent answers from.
//!
//! [`extract`] recognises an uploaded document by its content and turns it into plain-text
//! sections.

pub mod extract;
