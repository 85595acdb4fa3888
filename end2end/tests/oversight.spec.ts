/**
 * Oversight of the agents' conversations in the dashboard: the owner chats with two agents
 * (rating one reply), then finds, filters, reads and exports the conversations in the inbox
 * (`/dashboard/conversations`), sees them counted in `/dashboard/analytics`, binds an API key
 * to one agent with a monthly token budget (`/dashboard/api-keys`) and checks that the key
 * sees that agent alone, and reads the sessions and token quota on `/dashboard/account`.
 */
import { promises as fs } from "node:fs";
import { expect, type Page } from "@playwright/test";
import { createAgent, newAccount, screenshot, signIn, signUpVerified, test } from "./helpers";

/** The mock model provider's streaming model (scripts/test.sh starts the mock). */
const STREAMING_MODEL = "gpt-4o-mini";

/** The messages sent; only the second holds "Norway", the word searched for. */
const FIRST_QUESTION = "How do refunds work for damaged parcels?";
const SECOND_QUESTION = "Do you ship orders to Norway?";

/** Sends `text` in the dashboard chat of `agentId` and waits for the complete reply. */
async function chat(page: Page, agentId: string, text: string) {
  await page.goto(`/dashboard/agents/${agentId}/chat`);
  await expect(page.getByTestId("chat-empty")).toBeVisible();
  await expect(page.getByRole("button", { name: "Send" })).toBeEnabled();
  await page.getByLabel("Message").fill(text);
  await page.getByRole("button", { name: "Send" }).click();
  const reply = page.getByTestId("reply").last();
  await expect(reply).toHaveAttribute("data-status", "complete", { timeout: 30_000 });
  await expect(reply.getByTestId("message-body")).toHaveText(`Echo: ${text}`);
  await expect(page.getByTestId("thread-list")).toContainText(text);
  return reply;
}

test("the owner oversees conversations, analytics, agent-bound keys and sessions", async ({ page, request }, testInfo) => {
  test.setTimeout(180_000);
  const pageErrors: string[] = [];
  page.on("pageerror", (error) => pageErrors.push(error.message));
  const account = newAccount("oversight");
  const stamp = Date.now().toString(36);
  const firstName = `Refund desk ${stamp}`;
  const secondName = `Shipping desk ${stamp}`;
  // The UTC day of the conversations (the analytics' days are UTC).
  const today = new Date().toISOString().slice(0, 10);
  const nav = page.getByRole("navigation", { name: "Dashboard" });

  let first = "";
  let second = "";
  await test.step("sign up, sign in and create two agents", async () => {
    await signUpVerified(request, account);
    await signIn(page, account);
    first = await createAgent(page, firstName, STREAMING_MODEL);
    await expect(page.getByTestId("agent-name")).toHaveText(firstName);
    second = await createAgent(page, secondName);
    await expect(page.getByTestId("agent-name")).toHaveText(secondName);
    expect(second).not.toBe(first);
  });

  await test.step("chat with both agents, rating the first reply helpful", async () => {
    const reply = await chat(page, first, FIRST_QUESTION);
    const helpful = reply.getByRole("button", { name: "Helpful", exact: true });
    await expect(helpful).toHaveAttribute("aria-pressed", "false");
    await helpful.click();
    await expect(helpful).toHaveAttribute("aria-pressed", "true");
    await expect(reply.getByRole("button", { name: "Not helpful" })).toHaveAttribute("aria-pressed", "false");

    const unrated = await chat(page, second, SECOND_QUESTION);
    await expect(unrated.getByRole("button", { name: "Helpful", exact: true })).toHaveAttribute("aria-pressed", "false");
    await expect(unrated.getByRole("button", { name: "Not helpful" })).toHaveAttribute("aria-pressed", "false");
  });

  const rows = page.getByTestId("inbox-row");
  const firstRow = rows.filter({ hasText: FIRST_QUESTION });
  const secondRow = rows.filter({ hasText: SECOND_QUESTION });

  await test.step("the inbox lists both conversations", async () => {
    await nav.getByRole("link", { name: "Conversations" }).click();
    await expect(page).toHaveURL(/\/dashboard\/conversations$/);
    await expect(page.getByRole("heading", { name: "Conversations", level: 1 })).toBeVisible();
    await expect(rows).toHaveCount(2);
    await expect(firstRow).toContainText(firstName);
    await expect(firstRow.locator("[data-channel=dashboard]")).toHaveText("Dashboard");
    await expect(firstRow).toContainText("rated helpful");
    await expect(secondRow).toContainText(secondName);
    await expect(secondRow).not.toContainText("rated");
    // Without an agent chosen, exports are explained rather than offered.
    await expect(page.getByTestId("inbox-export-hint")).toBeVisible();
    await expect(page.getByTestId("inbox-export-jsonl")).toHaveCount(0);
    await screenshot(page, testInfo, "conversations");
  });

  await test.step("the feedback filter keeps the rated conversation, also after a reload", async () => {
    await page.locator("#inbox-feedback").selectOption("up");
    await expect(page).toHaveURL(/[?&]feedback=up(&|$)/);
    await expect(rows).toHaveCount(1);
    await expect(firstRow).toHaveCount(1);
    await page.reload();
    await expect(page.locator("#inbox-feedback")).toHaveValue("up");
    await expect(rows).toHaveCount(1);
    await expect(firstRow).toContainText(firstName);
    await screenshot(page, testInfo, "conversations-rated-helpful");
  });

  await test.step("the transcript shows the messages and the rating", async () => {
    await firstRow.getByRole("link", { name: FIRST_QUESTION }).click();
    await expect(page).toHaveURL(new RegExp(`[?&]thread=[^&]+&agent=${first}$`));
    await expect(page).toHaveURL(/[?&]feedback=up&/);
    const transcript = page.getByTestId("transcript");
    await expect(transcript).toBeVisible();
    await expect(transcript.getByRole("heading", { level: 1 })).toHaveText(FIRST_QUESTION);
    await expect(transcript).toContainText(`Agent: ${firstName}`);
    const messages = transcript.getByTestId("transcript-message");
    await expect(messages).toHaveCount(2);
    await expect(messages.nth(0)).toHaveAttribute("data-role", "user");
    await expect(messages.nth(0)).toContainText(FIRST_QUESTION);
    await expect(messages.nth(1)).toHaveAttribute("data-role", "assistant");
    await expect(messages.nth(1)).toContainText(`Echo: ${FIRST_QUESTION}`);
    await expect(messages.nth(1).getByTestId("transcript-usage")).toContainText(STREAMING_MODEL);
    const feedback = transcript.getByTestId("transcript-feedback");
    await expect(feedback).toHaveCount(1);
    await expect(feedback).toHaveAttribute("data-rating", "up");
    await expect(feedback).toContainText("Rated helpful");
    await screenshot(page, testInfo, "transcript");

    // Back to the list with the same filter.
    await transcript.getByTestId("transcript-back").click();
    await expect(page.getByTestId("transcript")).toHaveCount(0);
    await expect(page).toHaveURL(/\/dashboard\/conversations\?feedback=up$/);
    await expect(rows).toHaveCount(1);
  });

  await test.step("channel and search filters", async () => {
    await page.locator("#inbox-feedback").selectOption("");
    await expect(page).toHaveURL(/\/dashboard\/conversations$/);
    await expect(rows).toHaveCount(2);
    await page.locator("#inbox-channel").selectOption({ label: "Dashboard" });
    await expect(page).toHaveURL(/[?&]channel=dashboard(&|$)/);
    await expect(rows).toHaveCount(2);
    await page.locator("#inbox-q").fill("norway");
    await page.getByRole("button", { name: "Search", exact: true }).click();
    await expect(page).toHaveURL(/[?&]q=norway(&|$)/);
    await expect(rows).toHaveCount(1);
    await expect(secondRow).toContainText(secondName);
    await screenshot(page, testInfo, "conversations-search");
    // Another channel has none of them.
    await page.locator("#inbox-channel").selectOption("widget");
    await expect(page.getByTestId("inbox-empty")).toHaveText("No conversations match these filters.");
    await expect(rows).toHaveCount(0);
    await page.getByRole("link", { name: "Clear filters" }).click();
    await expect(page).toHaveURL(/\/dashboard\/conversations$/);
    await expect(rows).toHaveCount(2);
  });

  await test.step("an agent's conversations download as JSON Lines", async () => {
    await page.locator("#inbox-agent").selectOption(first);
    await expect(page).toHaveURL(new RegExp(`[?&]agentId=${first}(&|$)`));
    await expect(rows).toHaveCount(1);
    const link = page.getByTestId("inbox-export-jsonl");
    await expect(link).toHaveAttribute("href", `/api/agents/${first}/conversations/export?format=jsonl`);
    const downloading = page.waitForEvent("download");
    await link.click();
    const download = await downloading;
    expect(download.suggestedFilename()).toMatch(new RegExp(`^conversations-${first}-.+\\.jsonl$`));
    const text = await fs.readFile((await download.path())!, "utf8");
    const lines = text.split("\n").filter((line) => line.trim() !== "");
    expect(lines).toHaveLength(2);
    const messages = lines.map((line) => JSON.parse(line));
    expect(messages.map((m) => m.role)).toEqual(["user", "assistant"]);
    expect(messages[0]).toMatchObject({ channel: "dashboard", content: FIRST_QUESTION, status: "complete", feedback: null });
    expect(messages[1]).toMatchObject({
      channel: "dashboard",
      content: `Echo: ${FIRST_QUESTION}`,
      model: STREAMING_MODEL,
      status: "complete",
      feedback: { rating: "up" },
    });
    expect(messages[0].threadId).toBe(messages[1].threadId);
    expect(messages[1].promptTokens).toBeGreaterThan(0);
    expect(text).not.toContain("Norway");
    // The page stays where it was.
    await expect(page).toHaveURL(new RegExp(`/dashboard/conversations\\?agentId=${first}$`));
  });

  await test.step("analytics count the conversations and the rating", async () => {
    await nav.getByRole("link", { name: "Analytics" }).click();
    await expect(page).toHaveURL(/\/dashboard\/analytics$/);
    await expect(page.getByTestId("analytics-total-conversations")).toHaveAttribute("data-value", "2");
    await expect(page.getByTestId("analytics-total-user-messages")).toHaveAttribute("data-value", "2");
    await expect(page.getByTestId("analytics-total-replies")).toHaveAttribute("data-value", "2");
    await expect(page.getByTestId("analytics-total-feedback-up")).toHaveAttribute("data-value", "1");
    await expect(page.getByTestId("analytics-total-feedback-down")).toHaveAttribute("data-value", "0");
    const chart = page.getByTestId("analytics-chart-feedback");
    await expect(chart.locator(`[data-series="up"][data-start="${today}"]`)).toHaveAttribute("data-value", "1");
    await expect(chart.locator(`[data-series="down"][data-start="${today}"]`)).toHaveAttribute("data-value", "0");
    await expect(
      page.getByTestId("analytics-chart-conversations").locator(`[data-series="conversations"][data-start="${today}"]`),
    ).toHaveAttribute("data-value", "2");
    await expect(page.getByTestId("analytics-top-questions")).toContainText("do you ship orders to norway");
    await screenshot(page, testInfo, "analytics");

    await page.locator("#analytics-agent").selectOption(second);
    await expect(page).toHaveURL(new RegExp(`[?&]agentId=${second}(&|$)`));
    await expect(page.getByTestId("analytics-total-conversations")).toHaveAttribute("data-value", "1");
    await expect(page.getByTestId("analytics-total-feedback-up")).toHaveAttribute("data-value", "0");
    await expect(chart.locator(`[data-series="up"][data-start="${today}"]`)).toHaveAttribute("data-value", "0");
    await screenshot(page, testInfo, "analytics-agent");
  });

  let key = "";
  await test.step("an API key bound to one agent with a monthly token budget", async () => {
    await nav.getByRole("link", { name: "API keys" }).click();
    await expect(page.getByTestId("keys-empty")).toBeVisible();
    await expect(page.getByRole("button", { name: "Create key" })).toBeEnabled();
    await page.getByLabel("Name").fill("Refund bot");
    await page.getByRole("checkbox", { name: /chat:write/ }).check();
    await page.getByRole("checkbox", { name: /agents:read/ }).check();
    const agents = page.getByTestId("key-agents");
    await agents.getByLabel("Only these agents").check();
    const list = page.getByTestId("key-agent-list");
    await expect(list.getByRole("checkbox")).toHaveCount(2);
    await list.getByRole("checkbox", { name: firstName }).check();
    await expect(list.getByRole("checkbox", { name: secondName })).not.toBeChecked();
    await page.getByTestId("key-budget").fill("50000");
    await page.getByRole("button", { name: "Create key" }).click();
    const shown = page.getByTestId("new-key-value");
    await expect(shown).toHaveValue(/^key_/);
    key = await shown.inputValue();
    const row = page.getByTestId("key-row").filter({ hasText: "Refund bot" });
    await expect(row.getByTestId("key-agent-names")).toHaveText(firstName);
    await expect(row.getByTestId("key-agent-names")).toHaveAttribute("data-all", "false");
    await expect(row.getByTestId("key-budget-shown")).toContainText("50,000");
    await expect(row.getByTestId("key-budget-shown")).toHaveAttribute("data-budget", "50000");
    await expect(row.getByTestId("key-tokens-month")).toHaveAttribute("data-tokens", "0");
    await screenshot(page, testInfo, "api-keys");
  });

  await test.step("the key sees its agent alone", async () => {
    const headers = { Authorization: `Bearer ${key}` };
    const listed = await request.get("/api/agents", { headers });
    expect(listed.status(), await listed.text()).toBe(200);
    expect((await listed.json()).agents.map((a: { id: string }) => a.id)).toEqual([first]);
    const own = await request.get(`/api/agents/${first}`, { headers });
    expect(own.status(), await own.text()).toBe(200);
    const other = await request.get(`/api/agents/${second}`, { headers });
    expect(other.status(), await other.text()).toBe(404);
  });

  await test.step("the account shows the sessions and the token quota", async () => {
    await nav.getByRole("link", { name: "Account" }).click();
    await expect(page).toHaveURL(/\/dashboard\/account$/);
    const current = page.locator("[data-testid=session][data-current=true]");
    await expect(current).toHaveCount(1);
    await expect(current.locator("strong")).toContainText(" on ");
    await expect(current.locator("strong")).toContainText("Desktop");
    await expect(current.locator("strong")).not.toHaveText("Unknown browser");
    const quota = page.getByTestId("token-quota");
    await expect(quota).toHaveAttribute("data-limited", "false");
    await expect(quota.getByTestId("token-quota-used")).toHaveText("Unlimited");
    await screenshot(page, testInfo, "account");
  });

  expect(pageErrors, "uncaught errors in the page").toEqual([]);
});
