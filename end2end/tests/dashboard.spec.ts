import * as path from "node:path";
import { expect } from "@playwright/test";
import { waitForMail } from "./mail";
import { createAgent, newAccount, screenshot, signIn, signUpVerified, test, VERIFY_LINK } from "./helpers";

/** A real document: the freedesktop.org Shared MIME-info specification (PDF). */
const PDF = path.join(__dirname, "..", "fixtures", "shared-mime-info-spec.pdf");

/**
 * The mock model provider (scripts/test.sh starts it) streams one word every few tens of
 * milliseconds; `[[tokens:N]]` asks it for an N-word reply. Its models are `gpt-4o` and
 * `gpt-4o-mini`; the built-in `agentchat-offline` model is always there too.
 */
const STREAMING_MODEL = "gpt-4o-mini";

test("the main journey: sign up to sign out through the dashboard", async ({ page, context, request }, testInfo) => {
  test.setTimeout(180_000);
  const pageErrors: string[] = [];
  page.on("pageerror", (error) => pageErrors.push(error.message));
  await context.grantPermissions(["clipboard-read", "clipboard-write"]);
  const account = newAccount("journey");

  await test.step("sign up", async () => {
    await page.goto("/signup");
    await page.getByLabel("Full name").fill(account.name);
    await page.getByLabel("Email").fill(account.email);
    await page.getByLabel("Password").fill(account.password);
    await page.getByLabel("Country").selectOption("US");
    await page.getByRole("button", { name: "Create account" }).click();
    await expect(page.getByTestId("signup-success")).toContainText(account.email);
  });

  await test.step("follow the verification mail and sign in", async () => {
    const mail = await waitForMail(account.email, VERIFY_LINK);
    const link = new URL(VERIFY_LINK.exec(mail.text)![0]);
    await page.goto(link.pathname + link.search);
    await expect(page.getByTestId("verified-banner")).toBeVisible();
    await signIn(page, account);
    await expect(page.getByTestId("agents-empty")).toBeVisible();
    await expect(page.getByTestId("agent-limit")).toHaveText("0 of 3 agents on the free plan.");
    await screenshot(page, testInfo, "agents-empty");
  });

  let agentId = "";
  await test.step("create an agent with a model from the picker", async () => {
    await page.goto("/dashboard/new-agent");
    await expect(page.getByLabel("Model")).toBeVisible();
    await expect(page.getByLabel("Model").locator("option")).toContainText([
      STREAMING_MODEL,
      "agentchat-offline",
    ]);
    await screenshot(page, testInfo, "agent-new");
    agentId = await createAgent(page, "Spec helper", STREAMING_MODEL);
    await expect(page.getByTestId("agent-name")).toHaveText("Spec helper");
    await expect(page.getByLabel("Model")).toHaveValue(STREAMING_MODEL);
    await page.getByLabel("Description").fill("Knows the Shared MIME-info specification");
    await page.getByRole("button", { name: "Save changes" }).click();
    await expect(page.getByTestId("agent-saved")).toBeVisible();
    await screenshot(page, testInfo, "agent-settings");
    await page.getByRole("navigation", { name: "Dashboard" }).getByRole("link", { name: "Agents" }).click();
    const row = page.getByTestId("agents-table").getByRole("row", { name: /Spec helper/ });
    await expect(row).toContainText(STREAMING_MODEL);
    await expect(row).toContainText("active");
    await screenshot(page, testInfo, "agents-list");
  });

  await test.step("upload a real document and see it become indexed", async () => {
    await page.goto(`/dashboard/agents/${agentId}/knowledge`);
    await expect(page.getByTestId("documents-empty")).toBeVisible();
    // Enabled once the page is hydrated and can handle the files.
    await expect(page.locator("#knowledge-files")).toBeEnabled();
    await page.locator("#knowledge-files").setInputFiles(PDF);
    await expect(page.getByTestId("upload-done")).toBeVisible();
    const document = page.getByTestId("document").filter({ hasText: "shared-mime-info-spec.pdf" });
    await expect(document.getByTestId("document-status")).toHaveText("indexed", { timeout: 60_000 });
    await expect(document).toContainText(/\d+ chunks/);
    await screenshot(page, testInfo, "knowledge");
  });

  await test.step("chat: the reply grows in place before it completes, with sources and usage", async () => {
    await page.goto(`/dashboard/agents/${agentId}/chat`);
    await expect(page.getByTestId("chat-empty")).toBeVisible();
    await page.getByLabel("Message").fill("[[tokens:80]] How are glob patterns of MIME types matched?");
    await page.getByRole("button", { name: "Send" }).click();
    const reply = page.getByTestId("reply").last();
    await expect(reply).toHaveAttribute("data-status", "streaming");
    const body = reply.getByTestId("message-body");
    await expect(body).toContainText("w3");
    const early = (await body.innerText()).length;
    // Still streaming, yet longer: the same element grew.
    await expect.poll(async () => (await body.innerText()).length).toBeGreaterThan(early);
    expect(await reply.getAttribute("data-status")).toBe("streaming");
    await screenshot(page, testInfo, "chat-streaming");
    await expect(reply).toHaveAttribute("data-status", "complete", { timeout: 30_000 });
    await expect(body).toContainText("w80");
    await expect(reply.getByTestId("usage")).toContainText(/\d+ tokens/);
    await expect(reply.getByTestId("sources")).toContainText("Shared MIME-info Database");
    await expect(page.getByTestId("thread-list")).toContainText(/\d+ messages?/);
    await reply.getByRole("button", { name: "Copy" }).click();
    await expect(reply.getByText("Copied")).toBeVisible();
    expect(await page.evaluate(() => navigator.clipboard.readText())).toContain("w80");
    // The owner rates the reply; a press on the pressed thumb would clear it.
    const helpful = reply.getByRole("button", { name: "Helpful", exact: true });
    await expect(helpful).toHaveAttribute("aria-pressed", "false");
    await helpful.click();
    await expect(helpful).toHaveAttribute("aria-pressed", "true");
    await expect(reply.getByRole("button", { name: "Not helpful" })).toHaveAttribute("aria-pressed", "false");
    await screenshot(page, testInfo, "chat-complete");
  });

  await test.step("stop a reply", async () => {
    await page.getByLabel("Message").fill("[[tokens:2000]] Tell me everything.");
    await page.getByRole("button", { name: "Send" }).click();
    const reply = page.getByTestId("reply").last();
    await expect(reply.getByTestId("message-body")).toContainText("w5");
    await page.getByRole("button", { name: "Stop" }).click();
    await expect(reply).toHaveAttribute("data-status", "cancelled");
    await expect(reply.getByTestId("reply-stopped")).toBeVisible();
    const stopped = await reply.getByTestId("message-body").innerText();
    expect(stopped).not.toContain("w2000");
    await expect(page.getByRole("button", { name: "Send" })).toBeVisible();
    await screenshot(page, testInfo, "chat-stopped");
  });

  await test.step("the thread reloads with its messages", async () => {
    await page.reload();
    await page.getByTestId("thread-list").getByRole("button").first().click();
    await expect(page.getByTestId("question")).toHaveCount(2);
    await expect(page.getByTestId("reply").first()).toContainText("w80");
    // The rating was stored with the reply.
    await expect(
      page.getByTestId("reply").first().getByRole("button", { name: "Helpful", exact: true }),
    ).toHaveAttribute("aria-pressed", "true");
  });

  await test.step("getting started shows curl for this agent", async () => {
    await page.goto(`/dashboard/agents/${agentId}/start`);
    await expect(page.getByTestId("snippet-json")).toContainText(`/api/agents/${agentId}/chat`);
    await expect(page.getByTestId("snippet-stream")).toContainText('"stream": true');
    await screenshot(page, testInfo, "getting-started");
  });

  let key = "";
  await test.step("create an API key, copy it, reload and see only its prefix", async () => {
    await page.goto("/dashboard/api-keys");
    await expect(page.getByTestId("keys-empty")).toBeVisible();
    await expect(page.locator("fieldset.scopes input[type=checkbox]")).toHaveCount(10);
    await page.getByLabel("Name").fill("e2e script");
    await page.getByRole("checkbox", { name: /agents:read/ }).check();
    await page.getByRole("checkbox", { name: /chat:write/ }).check();
    await page.getByRole("button", { name: "Create key" }).click();
    const shown = page.getByTestId("new-key-value");
    await expect(shown).toHaveValue(/^key_/);
    key = await shown.inputValue();
    await expect(page.getByTestId("new-key-warning")).toContainText("shown only this once");
    await page.getByTestId("new-key").getByRole("button", { name: "Copy" }).click();
    await expect(page.getByTestId("new-key-copied")).toBeVisible();
    expect(await page.evaluate(() => navigator.clipboard.readText())).toBe(key);
    await screenshot(page, testInfo, "api-key-created");
    await page.reload();
    await expect(page.getByTestId("new-key")).toHaveCount(0);
    const row = page.getByTestId("key-row").filter({ hasText: "e2e script" });
    await expect(row.getByTestId("key-prefix")).toHaveText(`${key.slice(0, 12)}…`);
    await expect(page.locator("body")).not.toContainText(key);
    await screenshot(page, testInfo, "api-keys");
  });

  await test.step("call the API with the key, then revoke it", async () => {
    const headers = { Authorization: `Bearer ${key}` };
    const agents = await request.get("/api/agents", { headers });
    expect(agents.status()).toBe(200);
    expect((await agents.json()).agents.map((a: { id: string }) => a.id)).toContain(agentId);
    const row = page.getByTestId("key-row").filter({ hasText: "e2e script" });
    await row.getByRole("button", { name: "Revoke" }).click();
    await row.getByRole("button", { name: "Yes, revoke" }).click();
    await expect(page.getByTestId("keys-empty")).toBeVisible();
    expect((await request.get("/api/agents", { headers })).status()).toBe(401);
  });

  await test.step("account: plan, limits and sessions", async () => {
    await page.goto("/dashboard/account");
    await expect(page.getByTestId("rate-limit")).toHaveText("100 requests per minute");
    await expect(page.getByTestId("plan-agent-limit")).toHaveText("up to 3");
    await expect(page.locator("[data-testid=session][data-current=true]")).toHaveCount(1);
    // The replies above count into this month's usage and today's bar.
    await expect(page.getByTestId("usage-chats")).not.toHaveText("0");
    await expect(page.getByTestId("usage-chart").locator(".usage-bar")).toHaveCount(30);
    await expect(page.getByTestId("usage-chart").locator(".usage-bar").last()).not.toHaveAttribute("data-chats", "0");
    await screenshot(page, testInfo, "account");
  });

  await test.step("sign out", async () => {
    await page.getByRole("button", { name: "Sign out" }).first().click();
    await expect(page).toHaveURL(/\/login$/);
    await page.goto(`/dashboard/agents/${agentId}/chat`);
    await expect(page).toHaveURL(/\/login$/);
  });

  expect(pageErrors, "uncaught errors in the page").toEqual([]);
});

test("a wrong password is refused in words", async ({ page, request }, testInfo) => {
  const account = newAccount("wrong-password");
  await signUpVerified(request, account);
  await page.goto("/login");
  await page.getByLabel("Email").fill(account.email);
  await page.getByLabel("Password", { exact: true }).fill("not-the-password");
  await page.getByRole("button", { name: "Sign in", exact: true }).click();
  await expect(page.getByTestId("form-error")).toContainText(/password/i);
  await expect(page).toHaveURL(/\/login$/);
  await screenshot(page, testInfo, "login-wrong-password");
});

test("the agent limit of the plan is explained when reached", async ({ page, request }, testInfo) => {
  const account = newAccount("limit");
  await signUpVerified(request, account);
  await signIn(page, account);
  for (const name of ["One", "Two", "Three"]) {
    await createAgent(page, name);
  }
  await page.goto("/dashboard");
  await expect(page.getByTestId("agent-limit")).toHaveText("3 of 3 agents on the free plan.");
  await expect(page.getByTestId("agent-limit-reached")).toBeVisible();
  await page.goto("/dashboard/new-agent");
  // The form takes input once the page is hydrated (its button is enabled then).
  await expect(page.getByRole("button", { name: "Create agent" })).toBeEnabled();
  await page.getByLabel("Name").fill("Four");
  await page.getByRole("button", { name: "Create agent" }).click();
  await expect(page.getByTestId("form-error")).toContainText("allows 3 agents");
  await expect(page.getByTestId("agent-limit-help")).toBeVisible();
  await screenshot(page, testInfo, "agent-limit");

  // A form that breaks a rule is refused before anything is sent.
  await page.getByLabel("Name").fill("   ");
  await page.getByRole("button", { name: "Create agent" }).click();
  await expect(page.getByTestId("form-error")).toHaveText("Give the agent a name.");

  // Deleting one makes room again.
  await page.goto("/dashboard");
  await page.getByRole("link", { name: "Three" }).click();
  await page.getByRole("button", { name: "Delete agent" }).click();
  await page.getByRole("button", { name: "Yes, delete" }).click();
  await expect(page).toHaveURL(/\/dashboard$/);
  await expect(page.getByTestId("agent-limit")).toHaveText("2 of 3 agents on the free plan.");
});

test("an unsupported file is refused with the server's reason", async ({ page, request }, testInfo) => {
  const account = newAccount("unsupported");
  await signUpVerified(request, account);
  await signIn(page, account);
  const agentId = await createAgent(page, "Files");
  await page.goto(`/dashboard/agents/${agentId}/knowledge`);
  const png = Buffer.from(
    "89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c4890000000d4944415478da63f8cfc0f01f0005000201a5b1c8a40000000049454e44ae426082",
    "hex",
  );
  await expect(page.locator("#knowledge-files")).toBeEnabled();
  await page.locator("#knowledge-files").setInputFiles({ name: "pixel.png", mimeType: "image/png", buffer: png });
  await expect(page.getByTestId("upload-error")).toBeVisible();
  await expect(page.getByTestId("upload-error")).not.toBeEmpty();
  await expect(page.getByTestId("documents-empty")).toBeVisible();
  await screenshot(page, testInfo, "upload-unsupported");
});
