import { expect, type APIRequestContext, type Page } from "@playwright/test";
import { createAgent, newAccount, screenshot, signIn, signUpVerified, test } from "./helpers";

/**
 * Resumable replies in the dashboard's chat (docs/api.md § Resumable streams): a reply
 * goes on generating on the server when its page goes away, a thread opened again shows it
 * growing to its end, a stream cut before `[DONE]` is resumed where it was, and "Stop"
 * cancels the reply on the server.
 *
 * The mock model provider (scripts/test.sh starts it with `--token-interval-ms 40`) streams
 * one word every 40 ms; `[[tokens:N]]` asks it for the reply `w1 w2 … wN`.
 */
const STREAMING_MODEL = "gpt-4o-mini";

/** The reply of the mock provider to a message with `[[tokens:n]]`. */
function words(n: number): string {
  return Array.from({ length: n }, (_, i) => `w${i + 1}`).join(" ");
}

/** Sends `message` from the composer of the chat page (hydrated: Send is enabled). */
async function send(page: Page, message: string): Promise<void> {
  await expect(page.getByRole("button", { name: "Send" })).toBeEnabled();
  await page.getByLabel("Message").fill(message);
  await page.getByRole("button", { name: "Send" }).click();
}

/**
 * Signs a new account in, creates an agent answered by the mock provider and opens its
 * chat with one finished turn. A new conversation is stored with its first turn, when that
 * reply ends; the thread is then listed and its later replies can be resumed and cancelled
 * by its id.
 */
async function agentWithThread(page: Page, request: APIRequestContext, label: string): Promise<string> {
  const account = newAccount(label);
  await signUpVerified(request, account);
  await signIn(page, account);
  const agentId = await createAgent(page, "Counter", STREAMING_MODEL);
  await page.goto(`/dashboard/agents/${agentId}/chat`);
  await send(page, "[[tokens:3]] Hello");
  const first = page.getByTestId("reply").last();
  await expect(first).toHaveAttribute("data-status", "complete", { timeout: 30_000 });
  await expect(first.getByTestId("message-body")).toHaveText("w1 w2 w3");
  await expect(page.getByTestId("thread-list")).toContainText("2 messages");
  return agentId;
}

/** Opens the first thread of the list (after a reload: the list loads in the browser). */
async function openFirstThread(page: Page): Promise<void> {
  await page.getByTestId("thread-list").getByRole("button").first().click();
}

test("a reply goes on through a page reload and ends whole", async ({ page, request }, testInfo) => {
  test.setTimeout(120_000);
  const pageErrors: string[] = [];
  page.on("pageerror", (error) => pageErrors.push(error.message));
  await agentWithThread(page, request, "resume-reload");
  const full = words(300);

  await send(page, "[[tokens:300]] Count for me.");
  const reply = page.getByTestId("reply").last();
  await expect(reply).toHaveAttribute("data-status", "streaming");
  await expect(reply.getByTestId("message-body")).toContainText("w5");

  await page.reload();
  await openFirstThread(page);
  // The thread's stored turn, and its reply still being written (its own turn is stored
  // when it ends), followed from its first frame.
  const followed = page.getByTestId("reply").last();
  const body = followed.getByTestId("message-body");
  await expect(followed).toHaveAttribute("data-status", "streaming");
  await expect(body).toContainText("w1 w2 w3 w4 w5");
  const early = (await body.innerText()).trim().length;
  await expect.poll(async () => (await body.innerText()).trim().length).toBeGreaterThan(early);
  // Every word once, in order: what has arrived is the start of the reply.
  const partial = (await body.innerText()).trim();
  expect(full.startsWith(partial), `the start of the reply, got: ${partial.slice(-80)}`).toBe(true);
  await screenshot(page, testInfo, "resume-after-reload");

  await expect(followed).toHaveAttribute("data-status", "complete", { timeout: 30_000 });
  await expect(body).toHaveText(full);
  // Once stored, the thread shows the message the reply answers too.
  await expect(page.getByTestId("question")).toHaveCount(2);
  await expect(page.getByTestId("question").last()).toContainText("Count for me.");
  await expect(followed.getByTestId("usage")).toContainText(/\d+ tokens/);
  await expect(followed.getByTestId("reply-error")).toHaveCount(0);
  await screenshot(page, testInfo, "resume-complete");

  // Opened again later, the stored reply is shown once.
  await page.reload();
  await openFirstThread(page);
  await expect(page.getByTestId("reply")).toHaveCount(2);
  await expect(page.getByTestId("reply").last().getByTestId("message-body")).toHaveText(full);
  await expect(page.getByTestId("reply").last()).toHaveAttribute("data-status", "complete");

  expect(pageErrors, "uncaught errors in the page").toEqual([]);
});

test("a stream cut before its end is resumed from its last frame", async ({ page, request }, testInfo) => {
  test.setTimeout(120_000);
  const pageErrors: string[] = [];
  page.on("pageerror", (error) => pageErrors.push(error.message));
  const agentId = await agentWithThread(page, request, "resume-cut");
  const full = words(120);

  // The chat answer reaches the page with its first 20 frames only, and no `[DONE]`: as if
  // the connection broke there. The reply itself is generated to its end on the server.
  await page.route(`**/api/agents/${agentId}/chat`, async (route) => {
    const response = await route.fetch();
    const events = (await response.text()).split("\n\n").filter((event) => event.trim() !== "");
    await route.fulfill({ response, body: `${events.slice(0, 20).join("\n\n")}\n\n` });
  });
  await send(page, "[[tokens:120]] Count again.");
  const reply = page.getByTestId("reply").last();
  const body = reply.getByTestId("message-body");
  await expect(reply).toHaveAttribute("data-status", "complete", { timeout: 45_000 });
  // Joined by frame id: nothing lost, nothing repeated, in the same bubble.
  await expect(body).toHaveText(full);
  await expect(reply.getByTestId("reply-error")).toHaveCount(0);
  await expect(page.getByTestId("question")).toHaveCount(2);
  await screenshot(page, testInfo, "resume-after-cut");
  await page.unroute(`**/api/agents/${agentId}/chat`);

  expect(pageErrors, "uncaught errors in the page").toEqual([]);
});

test("a stopped reply is stored as stopped and the thread takes a message right after", async ({
  page,
  request,
}, testInfo) => {
  test.setTimeout(120_000);
  const pageErrors: string[] = [];
  page.on("pageerror", (error) => pageErrors.push(error.message));
  await agentWithThread(page, request, "resume-stop");

  await send(page, "[[tokens:2000]] Tell me everything.");
  const reply = page.getByTestId("reply").last();
  await expect(reply.getByTestId("message-body")).toContainText("w5");
  await page.getByRole("button", { name: "Stop" }).click();
  // Cancelled on the server: the stream ends with the cancelled frame and `[DONE]`, shown
  // as a stopped reply, not as an error.
  await expect(reply).toHaveAttribute("data-status", "cancelled");
  await expect(reply.getByTestId("reply-stopped")).toBeVisible();
  await expect(reply.getByTestId("reply-error")).toHaveCount(0);
  expect(await reply.getByTestId("message-body").innerText()).not.toContain("w2000");
  await screenshot(page, testInfo, "stopped");

  // The thread is free at once: no "reply in progress" refusal.
  await send(page, "[[tokens:4]] And now?");
  const next = page.getByTestId("reply").last();
  await expect(next).toHaveAttribute("data-status", "complete", { timeout: 30_000 });
  await expect(next.getByTestId("message-body")).toHaveText("w1 w2 w3 w4");
  await expect(page.getByTestId("chat-error")).toHaveCount(0);

  // As stored: the stopped reply with the words written until the stop.
  await page.reload();
  await openFirstThread(page);
  await expect(page.getByTestId("question")).toHaveCount(3);
  await expect(page.getByTestId("reply")).toHaveCount(3);
  const stored = page.getByTestId("reply").nth(1);
  await expect(stored).toHaveAttribute("data-status", "cancelled");
  await expect(stored.getByTestId("reply-stopped")).toHaveText("stopped");
  await expect(stored.getByTestId("message-body")).toContainText("w5");
  expect(await stored.getByTestId("message-body").innerText()).not.toContain("w2000");
  await expect(page.getByTestId("reply").last()).toHaveAttribute("data-status", "complete");
  await screenshot(page, testInfo, "stopped-stored");

  expect(pageErrors, "uncaught errors in the page").toEqual([]);
});
