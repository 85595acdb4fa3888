//! [`Tools`]: an agent's tools kept (created, read, updated, deleted and tested) and run
//! during a chat turn ([`Toolbox`]).

use std::{
    collections::BTreeMap,
    sync::Arc,
    time::{Duration, Instant},
};

use app::api::{McpServerTool, PendingApproval, Tool, ToolCallView, ToolTestResult};
use serde_json::{json, Map, Value};

use super::{
    http_action::{validate_secret_headers, HttpActionConfig},
    mcp::{McpClients, McpError, McpServer},
    output,
    schema::{parse_arguments, ArgumentsValidator},
    web_fetch,
};
use crate::{
    agents::AgentService,
    auth::Principal,
    clock::Clock,
    crypto::SecretBox,
    domain::ProviderCode,
    domain::ToolType,
    ids::{AgentId, IntegrationId, MessageId, ThreadId, ToolCallId, ToolId, UserId},
    knowledge::{search::retrieve, Knowledge},
    llm::{ToolCall, ToolSpec},
    outbound::SafeClient,
    store::{
        integrations::IntegrationRecord, tools::ApprovalRecord, AgentRecord, Store, StoreError,
        ToolRecord,
    },
    views::iso,
};

/// Tools one agent may have (docs/api.md § Tools).
pub const MAX_TOOLS_PER_AGENT: u32 = 32;
/// Longest tool description, in characters.
pub const DESCRIPTION_MAX: usize = app::api::limits::TOOL_DESCRIPTION_MAX;
/// Most chunks a `knowledge_search` call answers.
pub const SEARCH_LIMIT_MAX: u32 = 20;
/// HTTP actions' client limits: 2 MiB answer (the model gets [`output::MAX_OUTPUT_BYTES`]), 120 s,
/// 5 redirects.
pub const ACTION_LIMITS: crate::outbound::FetchLimits = crate::outbound::FetchLimits {
    max_body_bytes: 2 * 1024 * 1024,
    timeout: Duration::from_secs(120),
    max_redirects: 5,
};
/// Chunks a `knowledge_search` call answers when the model gives no `limit`.
pub const SEARCH_LIMIT_DEFAULT: u32 = 5;

/// Why a tool operation failed. The texts are the messages clients are shown.
#[derive(Debug, thiserror::Error)]
pub enum ToolError {
    #[error("Agent not found")]
    AgentNotFound,
    #[error("Tool not found")]
    NotFound,
    /// A field breaks its rule; the text names the field.
    #[error("{0}")]
    Invalid(String),
    /// The agent has [`MAX_TOOLS_PER_AGENT`] tools.
    #[error("An agent may have at most {MAX_TOOLS_PER_AGENT} tools; delete one first")]
    Limit,
    /// No such integration of the caller's (an `mcp` tool's, or the listed one).
    #[error("Integration not found")]
    IntegrationNotFound,
    /// The MCP server could not be reached or refused (502).
    #[error("{0}")]
    Mcp(McpError),
    /// The store failed (a taken name is its conflict).
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// How long a call waits for a person's decision (docs/api.md § Approvals).
pub const APPROVAL_TTL: chrono::Duration = chrono::Duration::hours(24);

/// Why a decision on a pending call was refused; the texts are shown to clients.
#[derive(Debug, thiserror::Error)]
pub enum ApprovalError {
    #[error("Tool call not found")]
    NotFound,
    /// The call was decided before (by any request).
    #[error("This tool call was already {0}")]
    Decided(String),
    /// The call waited longer than [`APPROVAL_TTL`].
    #[error("This tool call's approval expired; send a new message")]
    Expired,
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// What deciding a pending call led to.
pub enum Decided {
    /// Every call of the stopped reply is decided; this request continues the turn with them.
    Continue(Vec<ToolCallView>),
    /// This call is decided (its outcome), and others of the reply still wait.
    Waiting(Box<ToolCallView>, Vec<PendingApproval>),
}

/// A tool to create, as the service takes it (the HTTP layer converts its body).
#[derive(Debug, Clone, Default)]
pub struct NewTool {
    pub tool_type: String,
    pub name: Option<String>,
    pub description: Option<String>,
    pub enabled: Option<bool>,
    pub requires_approval: Option<bool>,
    pub config: Option<Value>,
}

/// Changes to a tool; `None` leaves a field as it is.
#[derive(Debug, Clone, Default)]
pub struct ToolPatch {
    pub name: Option<String>,
    pub description: Option<String>,
    pub enabled: Option<bool>,
    pub requires_approval: Option<bool>,
    pub config: Option<Value>,
}

/// The agent tools service. Cheap to clone.
#[derive(Clone)]
pub struct Tools {
    store: Arc<dyn Store>,
    secrets: SecretBox,
    agents: AgentService,
    knowledge: Knowledge,
    actions: SafeClient,
    clock: Clock,
    timeout: Duration,
    mcp: McpClients,
}

fn secrets_aad(user_id: &UserId, tool_id: &ToolId) -> Vec<u8> {
    format!("tool-secrets|{user_id}|{tool_id}").into_bytes()
}

impl Tools {
    /// The service; a call lasts at most `timeout` unless its tool says otherwise.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        store: Arc<dyn Store>,
        secrets: SecretBox,
        agents: AgentService,
        knowledge: Knowledge,
        actions: SafeClient,
        clock: Clock,
        timeout: Duration,
        mcp: McpClients,
    ) -> Self {
        Self {
            store,
            secrets,
            agents,
            knowledge,
            actions,
            clock,
            timeout,
            mcp,
        }
    }

    /// The tools of the caller's MCP integration `id`, listed live. Errors: [`ToolError::Mcp`],
    /// [`ToolError::IntegrationNotFound`] (also one the caller may not reach,
    /// [`Principal::may_reach_linked`]), [`ToolError::Invalid`] (another provider).
    pub async fn integration_tools(
        &self,
        caller: &Principal,
        id: &IntegrationId,
    ) -> Result<Arc<Vec<McpServerTool>>, ToolError> {
        let record = self.integration(caller, id).await?;
        let server = self.mcp_server(&record, "the integration")?;
        self.mcp.tools(&server).await.map_err(ToolError::Mcp)
    }

    /// The caller's integration `id`, if it may reach it ([`Principal::may_reach_linked`]).
    async fn integration(
        &self,
        caller: &Principal,
        id: &IntegrationId,
    ) -> Result<IntegrationRecord, ToolError> {
        self.store
            .integration(&caller.user_id, id)
            .await?
            .filter(|r| caller.may_reach_linked(r.agent_id.as_ref()))
            .ok_or(ToolError::IntegrationNotFound)
    }

    /// The MCP server of integration `record`; [`ToolError::Invalid`] naming `what` for
    /// another provider.
    fn mcp_server(&self, record: &IntegrationRecord, what: &str) -> Result<McpServer, ToolError> {
        if record.provider_code != ProviderCode::Mcp {
            return Err(ToolError::Invalid(format!(
                "{what} must be an MCP server integration (providerCode mcp), not {}",
                record.provider_code
            )));
        }
        McpServer::of(&self.secrets, record).map_err(ToolError::Mcp)
    }

    /// The agent's tools, oldest first. Errors: [`ToolError::AgentNotFound`].
    pub async fn list(&self, user_id: &UserId, agent_id: &AgentId) -> Result<Vec<Tool>, ToolError> {
        self.owned_agent(user_id, agent_id).await?;
        let records = self.store.list_tools(user_id, agent_id).await?;
        Ok(records.iter().map(tool_view).collect())
    }

    /// One tool of the agent. Errors: [`ToolError::NotFound`]; as [`Tools::list`].
    pub async fn get(
        &self,
        user_id: &UserId,
        agent_id: &AgentId,
        tool_id: &ToolId,
    ) -> Result<Tool, ToolError> {
        Ok(tool_view(&self.record(user_id, agent_id, tool_id).await?))
    }

    /// Creates a tool after checking every field. Errors: [`ToolError::Invalid`],
    /// [`ToolError::Limit`], [`crate::store::Conflict::ToolName`]; as [`Tools::list`].
    pub async fn create(
        &self,
        caller: &Principal,
        agent_id: &AgentId,
        input: NewTool,
    ) -> Result<Tool, ToolError> {
        let user_id = &caller.user_id;
        self.owned_agent(user_id, agent_id).await?;
        let tool_type = ToolType::parse(&input.tool_type).ok_or_else(|| {
            ToolError::Invalid(format!(
                "type must be one of {}",
                ToolType::ALL.map(ToolType::as_str).join(", ")
            ))
        })?;
        let checked = check_config(tool_type, input.config.unwrap_or_else(|| json!({})))?;
        let integration = match &checked.integration_id {
            Some(id) => Some(self.integration(caller, id).await?),
            None => None,
        };
        if let Some(record) = &integration {
            self.mcp_server(record, "config.integrationId")?;
        }
        let name = match (input.name, tool_type, &integration) {
            (Some(name), _, _) => check_name(&name)?,
            (None, ToolType::KnowledgeSearch | ToolType::WebFetch, _) => tool_type.as_str().into(),
            (None, ToolType::Mcp, Some(integration)) => default_mcp_name(&integration.name),
            (None, _, _) => return Err(ToolError::Invalid("name is required".into())),
        };
        let description = match input.description {
            Some(d) => check_description(&d)?,
            None => default_description(tool_type).to_string(),
        };
        let now = self.clock.now();
        let id = ToolId::new();
        let (secrets_sealed, key_id) = self.seal(user_id, &id, checked.secrets.as_ref());
        let record = ToolRecord {
            id,
            agent_id: agent_id.clone(),
            user_id: user_id.clone(),
            tool_type,
            name,
            description,
            enabled: input.enabled.unwrap_or(true),
            requires_approval: input.requires_approval.unwrap_or(false),
            config: checked.config.to_string(),
            secrets_sealed,
            key_id,
            created_at: now,
            updated_at: now,
        };
        if !self.store.create_tool(&record, MAX_TOOLS_PER_AGENT).await? {
            return Err(ToolError::Limit);
        }
        self.agents.tools_changed(agent_id);
        Ok(tool_view(&record))
    }

    /// Applies `patch`; a `config` replaces the config, keeping omitted stored `secretHeaders`.
    /// Errors: [`Tools::create`]'s and [`ToolError::NotFound`].
    pub async fn update(
        &self,
        caller: &Principal,
        agent_id: &AgentId,
        tool_id: &ToolId,
        patch: ToolPatch,
    ) -> Result<Tool, ToolError> {
        let user_id = &caller.user_id;
        let mut record = self.record(user_id, agent_id, tool_id).await?;
        if let Some(name) = patch.name {
            record.name = check_name(&name)?;
        }
        if let Some(d) = patch.description {
            record.description = check_description(&d)?;
        }
        if let Some(enabled) = patch.enabled {
            record.enabled = enabled;
        }
        if let Some(approval) = patch.requires_approval {
            record.requires_approval = approval;
        }
        if let Some(config) = patch.config {
            let checked = check_config(record.tool_type, config)?;
            if let Some(id) = &checked.integration_id {
                self.mcp_server(&self.integration(caller, id).await?, "config.integrationId")?;
            }
            let mut config = checked.config;
            if let Some(secrets) = &checked.secrets {
                let (sealed, key_id) = self.seal(user_id, &record.id, Some(secrets));
                record.secrets_sealed = sealed;
                record.key_id = key_id;
            } else if let Some(names) = stored_secret_names(&record) {
                // Omitted: the stored secrets stay, and so do their names.
                config["secretHeaders"] = names;
            }
            record.config = config.to_string();
        }
        record.updated_at = self.clock.now();
        if !self.store.update_tool(&record).await? {
            return Err(ToolError::NotFound);
        }
        self.agents.tools_changed(agent_id);
        Ok(tool_view(&record))
    }

    /// Deletes a tool. Errors: [`ToolError::NotFound`]; as [`Tools::list`].
    pub async fn delete(
        &self,
        user_id: &UserId,
        agent_id: &AgentId,
        tool_id: &ToolId,
    ) -> Result<(), ToolError> {
        self.owned_agent(user_id, agent_id).await?;
        if !self.store.delete_tool(user_id, agent_id, tool_id).await? {
            return Err(ToolError::NotFound);
        }
        self.agents.tools_changed(agent_id);
        Ok(())
    }

    /// Runs a tool once with `arguments` as a chat would, enabled or not; `tool_name` picks an
    /// `mcp` tool's server tool; a failing run is `failed`. Errors: [`ToolError::NotFound`],
    /// [`ToolError::Invalid`] (`tool_name`); as [`Tools::list`].
    pub async fn test(
        &self,
        user_id: &UserId,
        agent_id: &AgentId,
        tool_id: &ToolId,
        arguments: Value,
        tool_name: Option<&str>,
    ) -> Result<ToolTestResult, ToolError> {
        let record = self.record(user_id, agent_id, tool_id).await?;
        let started = Instant::now();
        let outcome = match self.prepare_all(record).await {
            Ok(actives) => {
                let active = pick(&actives, tool_name).map_err(ToolError::Invalid)?;
                let arguments = match arguments {
                    Value::Null => Value::Object(Map::new()),
                    other => other,
                };
                self.run_checked(active, &arguments).await
            }
            Err(e) => Err(e),
        };
        let duration_ms = started.elapsed().as_millis() as u64;
        Ok(match outcome {
            Ok(output) => ToolTestResult {
                status: "succeeded".into(),
                output,
                error: None,
                duration_ms,
            },
            Err(error) => ToolTestResult {
                status: "failed".into(),
                output: String::new(),
                error: Some(error),
                duration_ms,
            },
        })
    }

    /// The tools `agent` offers in a turn: enabled ones, approval-requiring ones only with
    /// `approvals`; one whose config or secrets no longer open is left out (logged).
    /// Errors: the store's.
    pub async fn toolbox(
        &self,
        agent: &AgentRecord,
        approvals: bool,
    ) -> Result<Toolbox, StoreError> {
        if !agent.has_tools {
            return Ok(Toolbox::default());
        }
        let records = self.store.list_tools(&agent.user_id, &agent.id).await?;
        let offered = records
            .into_iter()
            .filter(|r| r.enabled && (approvals || !r.requires_approval))
            .map(|record| async move {
                let id = record.id.clone();
                self.prepare_all(record).await.unwrap_or_else(|e| {
                    tracing::warn!(tool.id = %id, error = %e, "a stored tool cannot be used");
                    Vec::new()
                })
            });
        // MCP servers are asked for their tools at the same time.
        let mut tools = Vec::new();
        let mut names = std::collections::HashSet::new();
        for active in futures::future::join_all(offered)
            .await
            .into_iter()
            .flatten()
        {
            // Names are unique among an agent's tools; an MCP tool whose function name is
            // taken (by a tool named like `name__tool`) is left out.
            if names.insert(active.spec.name.clone()) {
                tools.push(active);
            }
        }
        Ok(Toolbox {
            tools: Arc::new(tools),
        })
    }

    /// Runs one model call; never fails: unknown tool, bad arguments, timeout or failure is a
    /// `failed` call whose error the model gets.
    pub async fn run(&self, toolbox: &Toolbox, call: &ToolCall) -> ToolCallView {
        let started = Instant::now();
        let active = toolbox.tools.iter().find(|t| t.spec.name == call.name);
        let parsed = parse_arguments(&call.arguments);
        let arguments = parsed
            .as_ref()
            .map(|m| Value::Object(m.clone()))
            .unwrap_or_else(|_| Value::Object(Map::new()));
        let outcome = match (active, &parsed) {
            (None, _) => Err(format!("the agent has no tool named `{}`", call.name)),
            (_, Err(e)) => Err(e.clone()),
            (Some(active), Ok(_)) => self.run_checked(active, &arguments).await,
        };
        let (status, output, error) = match outcome {
            Ok(output) => ("succeeded", output, None),
            Err(error) => ("failed", String::new(), Some(error)),
        };
        ToolCallView {
            id: call.id.clone(),
            name: call.name.clone(),
            tool_type: active
                .map_or("unknown", |t| t.record.tool_type.as_str())
                .into(),
            arguments,
            status: status.into(),
            output,
            error,
            duration_ms: started.elapsed().as_millis() as u64,
        }
    }

    /// Holds `calls` of reply `message_id` for approval for [`APPROVAL_TTL`]. Errors: the store's.
    pub async fn hold(
        &self,
        agent_id: &AgentId,
        user_id: &UserId,
        thread_id: &ThreadId,
        message_id: &MessageId,
        calls: &[ToolCall],
    ) -> Result<(), StoreError> {
        let now = self.clock.now();
        let records: Vec<ApprovalRecord> = calls
            .iter()
            .enumerate()
            .map(|(i, call)| ApprovalRecord {
                thread_id: thread_id.clone(),
                tool_call_id: ToolCallId::from(call.id.as_str()),
                message_id: message_id.clone(),
                user_id: user_id.clone(),
                agent_id: agent_id.clone(),
                name: call.name.clone(),
                arguments: call.arguments.clone(),
                status: "pending".into(),
                result: None,
                // In the model's order, a millisecond apart.
                created_at: now + chrono::Duration::milliseconds(i as i64),
                expires_at: now + APPROVAL_TTL,
            })
            .collect();
        self.store.create_approvals(&records).await
    }

    /// Decides a pending call: runs it if `approved` ([`Tools::run`]) or records `denied`; settling
    /// its reply claims the continuation. One concurrent decision wins. Errors: [`ApprovalError`].
    pub async fn decide(
        &self,
        agent: &AgentRecord,
        thread_id: &ThreadId,
        tool_call_id: &ToolCallId,
        approved: bool,
    ) -> Result<Decided, ApprovalError> {
        let record = self
            .store
            .approval(&agent.user_id, thread_id, tool_call_id)
            .await?
            .filter(|r| r.agent_id == agent.id)
            .ok_or(ApprovalError::NotFound)?;
        let now = self.clock.now();
        if !self.store.decide_approval(&record, approved, now).await? {
            let current = self
                .store
                .approval(&agent.user_id, thread_id, tool_call_id)
                .await?
                .ok_or(ApprovalError::NotFound)?;
            return Err(if current.status == "pending" {
                ApprovalError::Expired
            } else {
                ApprovalError::Decided(current.status)
            });
        }
        let call = ToolCall {
            id: record.tool_call_id.to_string(),
            name: record.name.clone(),
            arguments: record.arguments.clone(),
        };
        let view = if approved {
            let toolbox = self.toolbox(agent, true).await?;
            self.run(&toolbox, &call).await
        } else {
            ToolCallView {
                id: call.id.clone(),
                name: call.name.clone(),
                tool_type: self
                    .store
                    .list_tools(&agent.user_id, &agent.id)
                    .await?
                    .iter()
                    .find(|t| offers(t, &call.name))
                    .map_or("unknown", |t| t.tool_type.as_str())
                    .into(),
                arguments: parse_arguments(&call.arguments)
                    .map(Value::Object)
                    .unwrap_or_else(|_| json!({})),
                status: "denied".into(),
                output: String::new(),
                error: Some("The user declined this tool call".into()),
                duration_ms: 0,
            }
        };
        let result = serde_json::to_string(&view).unwrap_or_default();
        self.store
            .set_approval_result(thread_id, tool_call_id, &result)
            .await?;
        let claimed = self.store.claim_continuation(&record.message_id).await?;
        if claimed.is_empty() {
            let pending = self
                .store
                .pending_approvals(&record.message_id)
                .await?
                .iter()
                .map(pending_view)
                .collect();
            return Ok(Decided::Waiting(Box::new(view), pending));
        }
        Ok(Decided::Continue(
            claimed
                .iter()
                .filter_map(|r| r.result.as_deref())
                .filter_map(|r| serde_json::from_str(r).ok())
                .collect(),
        ))
    }

    async fn run_checked(&self, active: &Active, arguments: &Value) -> Result<String, String> {
        active.validator.check(arguments)?;
        let Value::Object(arguments) = arguments else {
            return Err("arguments must be a JSON object".into());
        };
        let timeout = active.timeout.unwrap_or(self.timeout);
        let run = async {
            match &active.runner {
                Runner::KnowledgeSearch => self.search(&active.record.agent_id, arguments).await,
                Runner::WebFetch => {
                    let url = arguments
                        .get("url")
                        .and_then(Value::as_str)
                        .unwrap_or_default();
                    web_fetch::fetch_text(&self.knowledge.client, &self.knowledge.sandbox, url)
                        .await
                }
                Runner::Http { config, secrets } => {
                    config.run(&self.actions, secrets, arguments, timeout).await
                }
                Runner::Mcp { server, tool } => self
                    .mcp
                    .call(server, tool, arguments.clone())
                    .await
                    .map_err(|e| e.to_string()),
            }
        };
        match tokio::time::timeout(timeout, run).await {
            Ok(result) => result.map(output::cap),
            Err(_) => Err(format!(
                "the tool did not finish within {} ms",
                timeout.as_millis()
            )),
        }
    }

    async fn search(
        &self,
        agent_id: &AgentId,
        arguments: &Map<String, Value>,
    ) -> Result<String, String> {
        let query = arguments
            .get("query")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let limit = arguments
            .get("limit")
            .and_then(Value::as_u64)
            .map_or(SEARCH_LIMIT_DEFAULT, |n| {
                n.clamp(1, u64::from(SEARCH_LIMIT_MAX)) as u32
            });
        let hits = retrieve::hybrid(&self.knowledge, agent_id, query, limit)
            .await
            .map_err(|e| {
                tracing::error!(error = ?e, "knowledge search of a tool call failed");
                "the knowledge base could not be searched".to_string()
            })?;
        let results: Vec<Value> = hits
            .into_iter()
            .map(|h| {
                json!({
                    "chunkId": h.chunk_id.to_string(),
                    "title": h.title,
                    "url": h.url,
                    "text": h.text,
                })
            })
            .collect();
        Ok(json!({ "results": results }).to_string())
    }

    /// A stored tool ready to run: one [`Active`] per function offered.
    async fn prepare_all(&self, record: ToolRecord) -> Result<Vec<Active>, String> {
        if record.tool_type != ToolType::Mcp {
            return self.prepare(record).map(|active| vec![active]);
        }
        let config: McpToolConfig = serde_json::from_str(&record.config)
            .map_err(|e| format!("its stored config does not parse: {e}"))?;
        let integration = self
            .store
            .integration(&record.user_id, &config.integration_id)
            .await
            .map_err(|e| e.to_string())?
            .ok_or("its MCP server integration was deleted")?;
        let server = self
            .mcp_server(&integration, "config.integrationId")
            .map_err(|e| e.to_string())?;
        let listed = self.mcp.tools(&server).await.map_err(|e| e.to_string())?;
        let mut actives = Vec::new();
        for tool in listed.iter() {
            if config
                .allowed_tools
                .as_ref()
                .is_some_and(|allowed| !allowed.contains(&tool.name))
            {
                continue;
            }
            // The server checks its own arguments too; a schema this server cannot
            // compile is left to it.
            let validator = ArgumentsValidator::new(&tool.input_schema)
                .or_else(|_| ArgumentsValidator::new(&json!({"type": "object"})))?;
            actives.push(Active {
                spec: ToolSpec {
                    name: mcp_function_name(&record.name, &tool.name),
                    description: tool.description.clone(),
                    parameters: tool.input_schema.clone(),
                },
                record: record.clone(),
                runner: Runner::Mcp {
                    server: server.clone(),
                    tool: tool.name.clone(),
                },
                validator,
                timeout: None,
            });
        }
        Ok(actives)
    }

    fn prepare(&self, record: ToolRecord) -> Result<Active, String> {
        let config: Value = serde_json::from_str(&record.config)
            .map_err(|e| format!("its stored config does not parse: {e}"))?;
        let (runner, parameters, timeout) = match record.tool_type {
            ToolType::KnowledgeSearch => (Runner::KnowledgeSearch, search_parameters(), None),
            ToolType::WebFetch => (Runner::WebFetch, fetch_parameters(), None),
            ToolType::Http => {
                let config = HttpActionConfig::parse(&without_secrets(config))?;
                let secrets = self.open(&record)?;
                let parameters = config.parameters.clone();
                let timeout = config.timeout_ms.map(Duration::from_millis);
                (Runner::Http { config, secrets }, parameters, timeout)
            }
            ToolType::Mcp => return Err("an MCP server's tools are listed first".into()),
        };
        let validator = ArgumentsValidator::new(&parameters)?;
        Ok(Active {
            spec: ToolSpec {
                name: record.name.clone(),
                description: record.description.clone(),
                parameters,
            },
            record,
            runner,
            validator,
            timeout,
        })
    }

    fn seal(
        &self,
        user_id: &UserId,
        tool_id: &ToolId,
        secrets: Option<&BTreeMap<String, String>>,
    ) -> (Option<Vec<u8>>, Option<String>) {
        match secrets.filter(|s| !s.is_empty()) {
            None => (None, None),
            Some(secrets) => {
                let plaintext = serde_json::to_vec(secrets).unwrap_or_default();
                (
                    Some(
                        self.secrets
                            .seal(&plaintext, &secrets_aad(user_id, tool_id)),
                    ),
                    Some(self.secrets.current_key_id()),
                )
            }
        }
    }

    fn open(&self, record: &ToolRecord) -> Result<BTreeMap<String, String>, String> {
        let Some(sealed) = &record.secrets_sealed else {
            return Ok(BTreeMap::new());
        };
        let plaintext = self
            .secrets
            .open(sealed, &secrets_aad(&record.user_id, &record.id))
            .map_err(|e| format!("its secret headers do not open: {e}"))?;
        serde_json::from_slice(&plaintext).map_err(|_| "its secret headers do not parse".into())
    }

    async fn owned_agent(&self, user_id: &UserId, agent_id: &AgentId) -> Result<(), ToolError> {
        match self.agents.find(user_id, agent_id).await? {
            Some(_) => Ok(()),
            None => Err(ToolError::AgentNotFound),
        }
    }

    async fn record(
        &self,
        user_id: &UserId,
        agent_id: &AgentId,
        tool_id: &ToolId,
    ) -> Result<ToolRecord, ToolError> {
        self.owned_agent(user_id, agent_id).await?;
        self.store
            .tool(user_id, agent_id, tool_id)
            .await?
            .ok_or(ToolError::NotFound)
    }
}

/// The tools of one chat turn, ready to run ([`Tools::toolbox`]). Cheap to clone.
#[derive(Clone, Default)]
pub struct Toolbox {
    tools: Arc<Vec<Active>>,
}

impl Toolbox {
    /// Whether the model's call of `name` waits for a person's approval.
    pub fn requires_approval(&self, name: &str) -> bool {
        self.tools
            .iter()
            .any(|t| t.spec.name == name && t.record.requires_approval)
    }

    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }

    /// What the model is told of each tool.
    pub fn specs(&self) -> Vec<ToolSpec> {
        self.tools.iter().map(|t| t.spec.clone()).collect()
    }
}

struct Active {
    record: ToolRecord,
    spec: ToolSpec,
    runner: Runner,
    validator: ArgumentsValidator,
    timeout: Option<Duration>,
}

enum Runner {
    KnowledgeSearch,
    WebFetch,
    Http {
        config: HttpActionConfig,
        secrets: BTreeMap<String, String>,
    },
    Mcp {
        server: McpServer,
        tool: String,
    },
}

#[derive(Debug, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct McpToolConfig {
    integration_id: IntegrationId,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    allowed_tools: Option<Vec<String>>,
}

/// Most names in an `mcp` tool's `allowedTools`.
pub const MAX_ALLOWED_TOOLS: usize = 128;

/// The function name of MCP tool `tool` of agent tool `prefix`: `prefix__tool`, `[^a-zA-Z0-9_-]` as
/// `_`; over 64 characters, 55 kept plus `_` and 8 hex digits of its SHA-256.
pub fn mcp_function_name(prefix: &str, tool: &str) -> String {
    let name: String = format!("{prefix}__{tool}")
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if name.len() <= 64 {
        return name;
    }
    use sha2::Digest;
    let digest = sha2::Sha256::digest(name.as_bytes());
    format!("{}_{}", &name[..55], &hex::encode(digest)[..8])
}

fn offers(record: &ToolRecord, name: &str) -> bool {
    record.name == name
        || (record.tool_type == ToolType::Mcp
            && name
                .strip_prefix(record.name.as_str())
                .is_some_and(|rest| rest.starts_with("__")))
}

/// Default `mcp` tool name: the integration's name, `[^a-zA-Z0-9_-]` as `_`, ≤ 32 (else `mcp`).
fn default_mcp_name(integration_name: &str) -> String {
    let name: String = integration_name
        .trim()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .take(32)
        .collect();
    if name.trim_matches('_').is_empty() {
        "mcp".into()
    } else {
        name
    }
}

fn pick<'a>(actives: &'a [Active], tool_name: Option<&str>) -> Result<&'a Active, String> {
    let names = || {
        actives
            .iter()
            .map(|a| match &a.runner {
                Runner::Mcp { tool, .. } => tool.as_str(),
                _ => a.spec.name.as_str(),
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    match tool_name {
        Some(wanted) => actives
            .iter()
            .find(|a| {
                a.spec.name == wanted
                    || matches!(&a.runner, Runner::Mcp { tool, .. } if tool == wanted)
            })
            .ok_or_else(|| format!("toolName {wanted:?} is not one of this tool's: {}", names())),
        None if actives.len() == 1 => Ok(&actives[0]),
        None if actives.is_empty() => Err("the MCP server offers none of the allowed tools".into()),
        None => Err(format!(
            "toolName is required: this tool offers {}",
            names()
        )),
    }
}

/// A checked config: stored clear part, secret headers to seal, and an `mcp` tool's integration.
struct CheckedConfig {
    config: Value,
    secrets: Option<BTreeMap<String, String>>,
    integration_id: Option<IntegrationId>,
}

fn check_config(tool_type: ToolType, config: Value) -> Result<CheckedConfig, ToolError> {
    let Value::Object(mut object) = config else {
        return Err(ToolError::Invalid("config must be an object".into()));
    };
    match tool_type {
        ToolType::KnowledgeSearch | ToolType::WebFetch => {
            if let Some(field) = object.keys().next() {
                return Err(ToolError::Invalid(format!(
                    "config.{field} is not a setting of a {} tool (its config is {{}})",
                    tool_type.as_str()
                )));
            }
            Ok(CheckedConfig {
                config: Value::Object(object),
                secrets: None,
                integration_id: None,
            })
        }
        ToolType::Http => {
            let secrets = match object.remove("secretHeaders") {
                None | Some(Value::Null) => None,
                Some(Value::Object(map)) => {
                    let mut secrets = BTreeMap::new();
                    for (name, value) in map {
                        let Value::String(value) = value else {
                            return Err(ToolError::Invalid(format!(
                                "config.secretHeaders.{name} must be a string"
                            )));
                        };
                        secrets.insert(name, value);
                    }
                    validate_secret_headers(&secrets).map_err(ToolError::Invalid)?;
                    Some(secrets)
                }
                Some(_) => {
                    return Err(ToolError::Invalid(
                        "config.secretHeaders must be an object of header names to values".into(),
                    ))
                }
            };
            let parsed =
                HttpActionConfig::parse(&Value::Object(object)).map_err(ToolError::Invalid)?;
            let mut config = serde_json::to_value(&parsed)
                .map_err(|e| ToolError::Invalid(format!("config: {e}")))?;
            if let Some(secrets) = &secrets {
                config["secretHeaders"] = json!(secrets.keys().collect::<Vec<_>>());
            }
            Ok(CheckedConfig {
                config,
                secrets,
                integration_id: None,
            })
        }
        ToolType::Mcp => {
            let config: McpToolConfig =
                serde_json::from_value(Value::Object(object)).map_err(|e| {
                    ToolError::Invalid(format!(
                        "config of an mcp tool must be {{integrationId, allowedTools?}} ({e})"
                    ))
                })?;
            if config.integration_id.as_str().trim().is_empty() {
                return Err(ToolError::Invalid(
                    "config.integrationId is required".into(),
                ));
            }
            if let Some(allowed) = &config.allowed_tools {
                if allowed.len() > MAX_ALLOWED_TOOLS {
                    return Err(ToolError::Invalid(format!(
                        "config.allowedTools may list at most {MAX_ALLOWED_TOOLS} tools"
                    )));
                }
                if allowed
                    .iter()
                    .any(|n| n.is_empty() || n.chars().count() > 128)
                {
                    return Err(ToolError::Invalid(
                        "config.allowedTools must list tool names of 1 to 128 characters".into(),
                    ));
                }
            }
            let integration_id = config.integration_id.clone();
            Ok(CheckedConfig {
                config: serde_json::to_value(&config)
                    .map_err(|e| ToolError::Invalid(format!("config: {e}")))?,
                secrets: None,
                integration_id: Some(integration_id),
            })
        }
    }
}

fn stored_secret_names(record: &ToolRecord) -> Option<Value> {
    record.secrets_sealed.as_ref()?;
    let config: Value = serde_json::from_str(&record.config).ok()?;
    config.get("secretHeaders").cloned()
}

fn without_secrets(mut config: Value) -> Value {
    if let Value::Object(object) = &mut config {
        object.remove("secretHeaders");
    }
    config
}

/// A tool's name: `^[a-zA-Z0-9_-]{1,64}$` (OpenAI's and Anthropic's function-name rule).
fn check_name(name: &str) -> Result<String, ToolError> {
    let ok = (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if ok {
        Ok(name.to_string())
    } else {
        Err(ToolError::Invalid(
            "name must be 1 to 64 letters, digits, underscores or hyphens".into(),
        ))
    }
}

fn check_description(description: &str) -> Result<String, ToolError> {
    let d = description.trim();
    if d.chars().count() > DESCRIPTION_MAX {
        return Err(ToolError::Invalid(format!(
            "description must be at most {DESCRIPTION_MAX} characters"
        )));
    }
    if d.chars().any(|c| c.is_control() && c != '\n' && c != '\t') {
        return Err(ToolError::Invalid(
            "description must not contain control characters".into(),
        ));
    }
    Ok(d.to_string())
}

fn default_description(tool_type: ToolType) -> &'static str {
    match tool_type {
        ToolType::KnowledgeSearch => {
            "Search the knowledge base of this assistant. Returns the most relevant passages \
             with their titles and URLs."
        }
        ToolType::WebFetch => "Read one public web page (http or https URL) as plain text.",
        ToolType::Http | ToolType::Mcp => "",
    }
}

fn search_parameters() -> Value {
    json!({
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "What to search for"},
            "limit": {"type": "integer", "minimum": 1, "maximum": SEARCH_LIMIT_MAX,
                      "description": "How many passages to return (default 5)"}
        },
        "required": ["query"],
        "additionalProperties": false
    })
}

fn fetch_parameters() -> Value {
    json!({
        "type": "object",
        "properties": {
            "url": {"type": "string", "description": "The page's http or https URL"}
        },
        "required": ["url"],
        "additionalProperties": false
    })
}

/// A call waiting for approval as the API shows it.
pub fn pending_view(r: &ApprovalRecord) -> PendingApproval {
    PendingApproval {
        tool_call_id: r.tool_call_id.to_string(),
        name: r.name.clone(),
        arguments: parse_arguments(&r.arguments)
            .map(Value::Object)
            .unwrap_or_else(|_| json!({})),
    }
}

/// A stored tool as the API shows it: the config with secret header names only.
pub fn tool_view(r: &ToolRecord) -> Tool {
    Tool {
        id: r.id.to_string(),
        tool_type: r.tool_type.as_str().into(),
        name: r.name.clone(),
        description: r.description.clone(),
        enabled: r.enabled,
        requires_approval: r.requires_approval,
        config: serde_json::from_str(&r.config).unwrap_or_else(|_| json!({})),
        created_at: iso(r.created_at),
        updated_at: iso(r.updated_at),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_the_function_name_rule() {
        assert!(check_name("get_weather-2").is_ok());
        assert!(check_name(&"a".repeat(64)).is_ok());
        for bad in ["", "has space", "dot.name", "é", &"a".repeat(65)] {
            assert!(check_name(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn built_in_configs_take_no_settings_and_mcp_names_an_integration() {
        assert!(check_config(ToolType::WebFetch, json!({})).is_ok());
        let err = check_config(ToolType::KnowledgeSearch, json!({"x": 1}))
            .err()
            .unwrap();
        assert!(err.to_string().starts_with("config.x is not a setting"));
        assert!(check_config(ToolType::WebFetch, json!([])).is_err());
        assert!(check_config(ToolType::Mcp, json!({"integrationId": "i"})).is_ok());
        assert!(check_config(ToolType::Mcp, json!({})).is_err());
        assert!(check_config(ToolType::Mcp, json!({"integrationId": "i", "x": 1})).is_err());
        assert!(check_config(
            ToolType::Mcp,
            json!({"integrationId": "i", "allowedTools": "echo"})
        )
        .is_err());
    }

    #[test]
    fn mcp_function_names_follow_the_rule_and_stay_unique() {
        assert_eq!(
            mcp_function_name("everything", "get-sum"),
            "everything__get-sum"
        );
        assert_eq!(mcp_function_name("docs", "search.v2"), "docs__search_v2");
        let long_a = mcp_function_name("server", &"a".repeat(80));
        let long_b = mcp_function_name("server", &format!("{}b", "a".repeat(79)));
        assert_eq!(long_a.len(), 64);
        assert_ne!(long_a, long_b);
        assert!(check_name(&long_a).is_ok());
        assert_eq!(default_mcp_name("My Server!"), "My_Server_");
        assert_eq!(default_mcp_name("   "), "mcp");
    }

    #[test]
    fn secret_headers_are_kept_apart_and_listed_by_name() {
        let checked = check_config(
            ToolType::Http,
            json!({
                "method": "GET",
                "url": "https://api.example.com/items/{id}",
                "parameters": {"type": "object", "properties": {"id": {"type": "string"}}},
                "secretHeaders": {"Authorization": "Bearer s3cret"}
            }),
        )
        .ok()
        .unwrap();
        assert_eq!(checked.config["secretHeaders"], json!(["Authorization"]));
        assert!(!checked.config.to_string().contains("s3cret"));
        assert_eq!(checked.secrets.unwrap()["Authorization"], "Bearer s3cret");
        let err = check_config(
            ToolType::Http,
            json!({"method": "GET", "url": "https://a.example", "parameters": {"type": "object"},
                   "secretHeaders": {"X-Key": 5}}),
        )
        .err()
        .unwrap();
        assert_eq!(
            err.to_string(),
            "config.secretHeaders.X-Key must be a string"
        );
    }

    #[test]
    fn built_in_schemas_compile() {
        assert!(ArgumentsValidator::new(&search_parameters()).is_ok());
        assert!(ArgumentsValidator::new(&fetch_parameters()).is_ok());
    }
}
