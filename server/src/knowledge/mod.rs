//! The knowledge base.

pub mod chunk;
pub mod crawl;
pub mod extract;
pub mod net;
