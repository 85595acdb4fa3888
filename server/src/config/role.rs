//! What one instance runs: the public API, the background workers, or both
//! (`agentchat serve --role`, README.md § Running several instances).

/// The part of the service an instance runs (`--role`, or `AGENTCHAT_ROLE`; default
/// [`Role::All`]). Several instances on one PostgreSQL database may split the work: web
/// instances behind the load balancer, worker instances beside them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Role {
    /// The API and the dashboard, without background work: knowledge jobs (uploads,
    /// crawls, embedding catch-up), webhook deliveries and the pruning of remembered
    /// inbound channel events are left to instances that run the workers.
    Web,
    /// The background workers only (`JOB_WORKERS` job workers, the webhook delivery worker,
    /// the embedding catch-up and the pruning); the listener still binds `LEPTOS_SITE_ADDR`
    /// but answers only `GET /api/health` and `GET /api/health/ready` (every other path:
    /// 404), for the orchestrator's probes.
    Worker,
    /// Both, as a single instance needs (the default).
    #[default]
    All,
}

impl Role {
    /// Whether this role serves the API and the dashboard.
    pub fn serves_api(self) -> bool {
        matches!(self, Self::Web | Self::All)
    }

    /// Whether this role runs the background workers.
    pub fn runs_workers(self) -> bool {
        matches!(self, Self::Worker | Self::All)
    }

    /// The role's name as `--role` takes it: `web`, `worker`, `all`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Web => "web",
            Self::Worker => "worker",
            Self::All => "all",
        }
    }
}

impl std::fmt::Display for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use clap::ValueEnum;

    use super::*;

    #[test]
    fn roles_split_the_api_from_the_workers() {
        assert_eq!(Role::default(), Role::All);
        assert!(Role::All.serves_api() && Role::All.runs_workers());
        assert!(Role::Web.serves_api() && !Role::Web.runs_workers());
        assert!(!Role::Worker.serves_api() && Role::Worker.runs_workers());
        for role in Role::value_variants() {
            assert_eq!(Role::from_str(role.as_str(), false), Ok(*role));
            assert_eq!(role.to_string(), role.as_str());
        }
        assert!(Role::from_str("api", false).is_err());
    }
}
