//! Agent tools: what an agent's model may call during a turn (docs/api.md § Tools).
//!
//! - [`schema`]: JSON Schema checks of a tool's `parameters` and of the model's arguments.
//! - [`http_action`]: custom HTTP actions (`http`), sent through the outbound policy.
//! - [`web_fetch`]: one public page read as plain text (`web_fetch`).
//! - [`mcp`]: the MCP client: the tools of MCP server integrations (`mcp`), with the
//!   instance's session cache.
//! - [`output`]: the cap on what a call gives back to the model.
//! - [`service`]: [`Tools`], an agent's tools kept and run in a turn ([`Toolbox`]).

pub mod http_action;
pub mod mcp;
pub mod output;
pub mod schema;
pub mod service;
pub mod web_fetch;

pub use service::{ApprovalError, Decided, NewTool, ToolError, ToolPatch, Toolbox, Tools};
