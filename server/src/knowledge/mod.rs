//! Knowledge bases: turning web sites into clean page texts.
//!
//! - [`net`]: the SSRF-safe HTTP client every knowledge-base fetch goes through.
//! - [`crawl`]: the web crawler (crawl depth, robots.txt, sitemaps, canonical URLs,
//!   main-content extraction) built on that client.

pub mod crawl;
pub mod net;
