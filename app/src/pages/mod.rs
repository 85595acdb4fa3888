//! The pages of the dashboard, one module per route.

mod dashboard;
mod forgot_password;
mod home;
mod login;
mod not_found;
mod reset_password;
mod signup;
mod verify_email;

pub use dashboard::Dashboard;
pub use forgot_password::ForgotPassword;
pub use home::Home;
pub use login::Login;
pub use not_found::NotFound;
pub use reset_password::ResetPassword;
pub use signup::Signup;
pub use verify_email::VerifyEmail;

/// Shortest password the server accepts (api.md § Auth: password 8..=128).
pub const PASSWORD_MIN_LEN: usize = 8;
/// Longest password the server accepts (api.md § Auth: password 8..=128).
pub const PASSWORD_MAX_LEN: usize = 128;
