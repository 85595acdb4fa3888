//! Knowledge bases: the documents an agent answers from.
//!
//! [`extract`] recognises an uploaded document by its content and turns it into plain-text
//! sections; [`chunk`] cuts those sections into token-bounded chunks for retrieval.

pub mod chunk;
pub mod extract;
