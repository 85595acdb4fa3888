/**
 * Agents that act: an HTTP action added in the agent's settings, tested there, called by the
 * model in the chat (its card shows the call running, then its output), and an action that
 * requires approval: the chat asks, the user approves or denies, and the reply continues.
 *
 * The action's target is an order API this test serves on 127.0.0.1:3194 (scripts/test.sh
 * lets the server reach that address through ALLOWED_PRIVATE_HOSTS). The mock model provider
 * calls a tool when the message holds `[[call:NAME:ARGS]]`, and answers `Tool results: ...`
 * once it has the results (bench/mock-provider).
 */
import * as http from "node:http";
import { expect, type Locator, type Page } from "@playwright/test";
import { createAgent, newAccount, screenshot, signIn, signUpVerified, test } from "./helpers";

const API_PORT = 3194;
const API = `http://127.0.0.1:${API_PORT}`;
/** The mock provider's streaming model (see dashboard.spec.ts). */
const STREAMING_MODEL = "gpt-4o-mini";
const API_KEY = "order-api-key-7f3c9e";
/** How long the order API takes to answer a lookup: long enough to see a call run. */
const LOOKUP_DELAY_MS = 1_500;

interface Received {
  method: string;
  url: string;
  apiKey: string | undefined;
}

const received: Received[] = [];
let server: http.Server;

test.beforeAll(async () => {
  server = http.createServer((req, res) => {
    received.push({ method: req.method ?? "", url: req.url ?? "", apiKey: req.headers["x-api-key"] as string | undefined });
    const json = (status: number, body: unknown) =>
      res.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify(body));
    if (req.headers["x-api-key"] !== API_KEY) {
      json(401, { error: "missing or wrong X-Api-Key" });
      return;
    }
    const lookup = /^\/orders\/([\w-]+)$/.exec(req.url ?? "");
    if (req.method === "GET" && lookup) {
      setTimeout(() => json(200, { id: lookup[1], status: "shipped", carrier: "Harbour Post" }), LOOKUP_DELAY_MS);
      return;
    }
    const cancel = /^\/orders\/([\w-]+)\/cancel$/.exec(req.url ?? "");
    if (req.method === "POST" && cancel) {
      json(200, { id: cancel[1], status: "cancelled" });
      return;
    }
    json(404, { error: "not found" });
  });
  await new Promise<void>((resolve) => server.listen(API_PORT, "127.0.0.1", resolve));
});

test.afterAll(async () => {
  // The server's HTTP client keeps idle connections open; close() alone would wait for them.
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

/** Fills the HTTP action editor (open) and saves it. */
async function addAction(
  page: Page,
  action: { name: string; description: string; method: string; url: string; parameters: string },
): Promise<void> {
  const editor = page.getByTestId("tool-editor");
  await editor.getByLabel("Name", { exact: true }).fill(action.name);
  await editor.getByLabel("Description").fill(action.description);
  await editor.getByLabel("Method").selectOption(action.method);
  await editor.getByLabel("URL").fill(action.url);
  await editor.getByLabel("Parameters (JSON Schema)").fill(action.parameters);
  await editor.getByRole("button", { name: "Add secret header" }).click();
  await editor.getByLabel("Secret header 1 name").fill("X-Api-Key");
  await editor.getByLabel("Secret header 1 value").fill(API_KEY);
  await editor.getByRole("button", { name: "Add action" }).click();
  await expect(page.getByTestId("tool-saved")).toContainText(action.name);
}

/** The tool row of the agent's settings named `name`. */
function toolRow(page: Page, name: string): Locator {
  return page.locator(`[data-testid=tool][data-name="${name}"]`);
}

async function send(page: Page, message: string): Promise<Locator> {
  const before = await page.getByTestId("reply").count();
  await page.getByLabel("Message").fill(message);
  await page.getByRole("button", { name: "Send" }).click();
  await expect(page.getByTestId("reply")).toHaveCount(before + 1);
  // By position: a continuation after a decision adds a reply after this one.
  return page.getByTestId("reply").nth(before);
}

test("an HTTP action is added, tested, called in the chat, and waits for approval", async ({ page, request }, testInfo) => {
  test.setTimeout(180_000);
  const pageErrors: string[] = [];
  page.on("pageerror", (error) => pageErrors.push(error.message));
  const account = newAccount("tools");
  await signUpVerified(request, account);
  await signIn(page, account);
  const agentId = await createAgent(page, "Order desk", STREAMING_MODEL);
  const tools = page.getByTestId("tools");

  await test.step("switch a built-in tool on and off", async () => {
    const webFetch = tools.locator("[data-testid=tool][data-type=web_fetch]");
    const enabled = webFetch.getByRole("switch", { name: "Enabled" });
    await expect(enabled).toBeEnabled();
    await expect(enabled).not.toBeChecked();
    await enabled.click();
    await expect(enabled).toBeChecked();
    await enabled.click();
    await expect(enabled).not.toBeChecked();
    // The page's own request context carries its session cookies.
    const listed = await page.request.get(`/api/agents/${agentId}/tools`);
    const webFetchTool = (await listed.json()).tools.find((t: { type: string }) => t.type === "web_fetch");
    expect(webFetchTool.enabled).toBe(false);
  });

  await test.step("parameters are checked in the browser and by the server", async () => {
    await tools.getByRole("button", { name: "Add HTTP action" }).click();
    const editor = page.getByTestId("tool-editor");
    await editor.getByLabel("Name", { exact: true }).fill("order_status");
    await editor.getByLabel("URL").fill(`${API}/orders/{order}`);
    await editor.getByLabel("Parameters (JSON Schema)").fill("[1, 2]");
    await editor.getByRole("button", { name: "Add action" }).click();
    await expect(editor.getByTestId("form-error")).toContainText("JSON object");
    // Valid JSON, but the URL's placeholder is not one of its properties: the server says so.
    await editor.getByLabel("Parameters (JSON Schema)").fill('{"type": "object", "properties": {"id": {"type": "string"}}}');
    await editor.getByRole("button", { name: "Add action" }).click();
    await expect(editor.getByTestId("form-error")).toContainText("config.url placeholder {order}");
    await editor.getByRole("button", { name: "Cancel" }).click();
    await expect(editor).toHaveCount(0);
  });

  await test.step("add an HTTP action with a secret header", async () => {
    await tools.getByRole("button", { name: "Add HTTP action" }).click();
    await addAction(page, {
      name: "order_status",
      description: "Looks up the status of an order by its id.",
      method: "GET",
      url: `${API}/orders/{id}`,
      parameters: '{"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]}',
    });
    const row = toolRow(page, "order_status");
    await expect(row).toContainText(`GET ${API}/orders/{id}`);
    await expect(row.getByRole("switch", { name: "Enabled" })).toBeChecked();
    expect(await page.content()).not.toContain(API_KEY);
    // The secret is write-only: the editor shows its name, never its value.
    await row.getByRole("button", { name: "Edit" }).click();
    const editor = page.getByTestId("tool-editor");
    await expect(editor.getByLabel("Secret header 1 name")).toHaveValue("X-Api-Key");
    await expect(editor.getByLabel("Secret header 1 value")).toHaveValue("");
    await expect(editor.getByLabel("Secret header 1 value")).toHaveAttribute("placeholder", "stored, leave empty to keep");
    await screenshot(page, testInfo, "tool-editor");
    // Saved without touching it, the stored secret stays (the test below sends it).
    await editor.getByRole("button", { name: "Save action" }).click();
    await expect(page.getByTestId("tool-saved")).toBeVisible();
  });

  await test.step("test the action from the editor", async () => {
    const row = toolRow(page, "order_status");
    await row.getByRole("button", { name: "Test" }).click();
    await row.getByLabel("Test arguments (JSON)").fill('{"id": "A-17"}');
    await row.getByRole("button", { name: "Run test" }).click();
    const result = row.getByTestId("tool-test-result");
    await expect(result).toHaveAttribute("data-status", "succeeded");
    await expect(result.getByTestId("tool-test-output")).toContainText('"status":"shipped"');
    await expect(result).toContainText(/\d+ ms/);
    expect(received.at(-1)).toEqual({ method: "GET", url: "/orders/A-17", apiKey: API_KEY });
    await screenshot(page, testInfo, "tool-tested");
  });

  await test.step("the model calls the action: its card runs, then shows the output", async () => {
    await page.goto(`/dashboard/agents/${agentId}/chat`);
    await expect(page.getByTestId("chat-empty")).toBeVisible();
    const reply = await send(page, 'Where is my order? [[call:order_status:{"id":"B-42"}]]');
    const card = reply.getByTestId("tool-call");
    await expect(card).toHaveAttribute("data-status", "running");
    await expect(card.getByTestId("tool-call-name")).toHaveText("order_status");
    await expect(card.getByTestId("tool-call-arguments")).toHaveText('{"id":"B-42"}');
    await expect(card).toHaveAttribute("data-status", "succeeded", { timeout: 20_000 });
    await expect(card.getByTestId("tool-call-output")).toContainText('"id":"B-42"');
    await expect(card.getByTestId("tool-call-duration")).toHaveText(/\d+ ms/);
    await expect(reply).toHaveAttribute("data-status", "complete");
    // The text the model wrote after the call comes after its card.
    const parts = reply.getByTestId("message-body").locator(":scope > :not(:empty)");
    await expect(parts).toHaveCount(2);
    await expect(parts.nth(0)).toHaveAttribute("data-testid", "tool-call");
    await expect(parts.nth(1)).toContainText('Tool results: {"id":"B-42","status":"shipped"');
    await screenshot(page, testInfo, "chat-tool-call");
  });

  await test.step("an action that requires approval waits for the user's decision", async () => {
    await page.goto(`/dashboard/agents/${agentId}`);
    await tools.getByRole("button", { name: "Add HTTP action" }).click();
    await addAction(page, {
      name: "cancel_order",
      description: "Cancels an order.",
      method: "POST",
      url: `${API}/orders/{id}/cancel`,
      parameters: '{"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]}',
    });
    const approval = toolRow(page, "cancel_order").getByRole("switch", { name: "Requires approval" });
    await expect(approval).not.toBeChecked();
    await approval.click();
    await expect(approval).toBeChecked();

    await page.goto(`/dashboard/agents/${agentId}/chat`);
    await page.getByTestId("thread-list").getByRole("button").first().click();
    await expect(page.getByTestId("tool-call")).toHaveCount(1);
    const asked = await send(page, 'Cancel it. [[call:cancel_order:{"id":"B-42"}]]');
    const card = asked.getByTestId("tool-call");
    await expect(card).toHaveAttribute("data-status", "pending");
    await expect(asked).toHaveAttribute("data-status", "complete");
    await expect(card.getByTestId("tool-call-status")).toHaveText("waiting for your approval");
    expect(received.filter((r) => r.method === "POST")).toEqual([]);
    await screenshot(page, testInfo, "chat-approval");

    await card.getByRole("button", { name: "Approve" }).click();
    const continued = page.getByTestId("reply").last();
    await expect(continued.getByTestId("message-body")).toContainText('Tool results: {"id":"B-42","status":"cancelled"}');
    await expect(continued).toHaveAttribute("data-status", "complete");
    await expect(card).toHaveAttribute("data-status", "succeeded");
    await expect(card.getByTestId("tool-call-output")).toContainText('"status":"cancelled"');
    await expect(card.getByRole("button", { name: "Approve" })).toHaveCount(0);
    expect(received.filter((r) => r.method === "POST").map((r) => r.url)).toEqual(["/orders/B-42/cancel"]);
    await screenshot(page, testInfo, "chat-approved");
  });

  await test.step("a call still waits after a reload; denied, it is not made and the model is told so", async () => {
    const asked = await send(page, 'Cancel C-9 too. [[call:cancel_order:{"id":"C-9"}]]');
    await expect(asked.getByTestId("tool-call")).toHaveAttribute("data-status", "pending");
    // A page loaded later asks again: the stored reply lists the call that waits.
    await page.reload();
    await page.getByTestId("thread-list").getByRole("button").first().click();
    await expect(page.getByTestId("question")).toHaveCount(3);
    const replies = await page.getByTestId("reply").count();
    const card = page.getByTestId("reply").nth(replies - 1).getByTestId("tool-call");
    await expect(card).toHaveAttribute("data-status", "pending");
    await expect(card.getByTestId("tool-call-name")).toHaveText("cancel_order");
    await card.getByRole("button", { name: "Deny" }).click();
    const continued = page.getByTestId("reply").nth(replies);
    await expect(continued).toHaveAttribute("data-status", "complete");
    await expect(continued.getByTestId("message-body")).toContainText("Tool results:");
    await expect(card).toHaveAttribute("data-status", "denied");
    expect(received.filter((r) => r.url === "/orders/C-9/cancel")).toEqual([]);
  });

  await test.step("the reloaded thread shows its tool calls as cards", async () => {
    await page.reload();
    await page.getByTestId("thread-list").getByRole("button").first().click();
    const cards = page.getByTestId("tool-call");
    await expect(cards).toHaveCount(3);
    await expect(cards.nth(0)).toHaveAttribute("data-status", "succeeded");
    await expect(cards.nth(0).getByTestId("tool-call-output")).toContainText('"status":"shipped"');
    await expect(cards.nth(1)).toHaveAttribute("data-status", "succeeded");
    await expect(cards.nth(1).getByTestId("tool-call-output")).toContainText('"status":"cancelled"');
    await expect(cards.nth(2)).toHaveAttribute("data-status", "denied");
    await screenshot(page, testInfo, "chat-reloaded");
  });

  expect(pageErrors, "uncaught errors in the page").toEqual([]);
});
