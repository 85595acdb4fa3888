//! The pages of the dashboard, one module per route.

mod account;
mod agent;
mod agents;
mod api_keys;
mod chat;
mod dashboard;
mod forgot_password;
mod home;
mod integrations;
mod knowledge;
mod login;
mod not_found;
mod reset_password;
mod signup;
mod start;
mod tools;
mod verify_email;
mod webhooks;

pub use account::AccountPage;
pub use agent::{AgentLayout, AgentSettings};
pub use agents::{AgentsPage, NewAgentPage};
pub use api_keys::ApiKeysPage;
pub use chat::ChatPage;
pub use dashboard::DashboardLayout;
pub use forgot_password::ForgotPassword;
pub use home::Home;
pub use integrations::IntegrationsPage;
pub use knowledge::KnowledgePage;
pub use login::Login;
pub use not_found::NotFound;
pub use reset_password::ResetPassword;
pub use signup::Signup;
pub use start::GettingStarted;
pub use tools::{McpServerTools, ToolsSection};
pub use verify_email::VerifyEmail;
pub use webhooks::WebhooksPage;
