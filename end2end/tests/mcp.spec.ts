/**
 * MCP servers in the dashboard: an "MCP server" integration made on the integrations page
 * lists the server's tools live; attached to an agent with one of its tools ticked, the model
 * calls it in the chat and the call's card shows the server's answer.
 *
 * The server is the official MCP reference server (@modelcontextprotocol/server-everything,
 * installed by scripts/setup.sh into MCP_EVERYTHING_DIR) in Streamable HTTP mode on
 * 127.0.0.1:3195, which scripts/test.sh lets the server reach (ALLOWED_PRIVATE_HOSTS).
 */
import { spawn, type ChildProcess } from "node:child_process";
import * as net from "node:net";
import { homedir } from "node:os";
import { join } from "node:path";
import { expect } from "@playwright/test";
import { createAgent, newAccount, screenshot, signIn, signUpVerified, test } from "./helpers";

const PORT = 3195;
/** The mock provider's streaming model (see dashboard.spec.ts). */
const STREAMING_MODEL = "gpt-4o-mini";

let server: ChildProcess | undefined;

/** Whether something accepts connections on 127.0.0.1:`port`. */
function listening(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect(port, "127.0.0.1", () => {
      socket.end();
      resolve(true);
    });
    socket.on("error", () => resolve(false));
  });
}

test.beforeAll(async () => {
  const dir = process.env.MCP_EVERYTHING_DIR ?? join(homedir(), ".cache", "agentchat", "mcp-everything");
  const entry = join(dir, "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js");
  server = spawn(process.execPath, [entry, "streamableHttp"], {
    env: { ...process.env, PORT: String(PORT) },
    stdio: "ignore",
  });
  for (let i = 0; i < 300; i++) {
    if (await listening(PORT)) return;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`the MCP reference server (${entry}) did not listen on ${PORT}: run scripts/setup.sh`);
});

test.afterAll(() => {
  server?.kill();
});

test("an MCP server integration lists its tools, and an agent calls the one ticked", async ({ page, request }, testInfo) => {
  test.setTimeout(120_000);
  const pageErrors: string[] = [];
  page.on("pageerror", (error) => pageErrors.push(error.message));
  const account = newAccount("mcp");
  await signUpVerified(request, account);
  await signIn(page, account);
  const agentId = await createAgent(page, "Calculator", STREAMING_MODEL);

  await test.step("the integrations page makes an MCP server integration and lists its tools", async () => {
    await page.getByRole("navigation", { name: "Dashboard" }).getByRole("link", { name: "Integrations" }).click();
    await page.getByLabel("Provider").selectOption("mcp");
    await page.getByLabel("Name").fill("Everything");
    await page.getByLabel(/^Server URL/).fill(`http://127.0.0.1:${PORT}/mcp`);
    await page.getByRole("button", { name: "Create integration" }).click();
    await expect(page.getByTestId("integration-created")).toBeVisible();
    const row = page.getByTestId("integration").filter({ hasText: "Everything" });
    await row.getByRole("button", { name: "Tools" }).click();
    await expect(row.getByTestId("mcp-tools")).toContainText("get-sum");
    await expect(row.getByTestId("mcp-tools")).toContainText("echo");
    await screenshot(page, testInfo, "mcp-integration-tools");
  });

  await test.step("the agent's settings attach the server with one tool ticked", async () => {
    await page.goto(`/dashboard/agents/${agentId}`);
    await page.getByTestId("tools").getByRole("button", { name: "Attach MCP server" }).click();
    const editor = page.getByTestId("mcp-editor");
    await editor.getByLabel("MCP server").selectOption({ label: "Everything" });
    await editor.getByRole("checkbox", { name: /get-sum/ }).check();
    await editor.getByLabel("Name", { exact: true }).fill("everything");
    await screenshot(page, testInfo, "mcp-attach");
    await editor.getByRole("button", { name: "Attach server" }).click();
    await expect(page.getByTestId("tool-saved")).toContainText("everything");
    const listed = await page.request.get(`/api/agents/${agentId}/tools`);
    const attached = (await listed.json()).tools.find((t: { type: string }) => t.type === "mcp");
    expect(attached.config.allowedTools).toEqual(["get-sum"]);
  });

  await test.step("the model calls the server's tool in the chat", async () => {
    await page.goto(`/dashboard/agents/${agentId}/chat`);
    await expect(page.getByTestId("chat-empty")).toBeVisible();
    await page.getByLabel("Message").fill('Add them. [[call:everything__get-sum:{"a":2,"b":3}]]');
    await page.getByRole("button", { name: "Send" }).click();
    const reply = page.getByTestId("reply").first();
    const card = reply.getByTestId("tool-call");
    await expect(card).toHaveAttribute("data-status", "succeeded", { timeout: 20_000 });
    await expect(card.getByTestId("tool-call-name")).toHaveText("everything__get-sum");
    await expect(card.getByTestId("tool-call-output")).toContainText("5");
    await expect(reply).toHaveAttribute("data-status", "complete");
    await screenshot(page, testInfo, "mcp-chat");
  });

  expect(pageErrors, "uncaught errors in the page").toEqual([]);
});
