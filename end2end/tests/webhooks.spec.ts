/**
 * The webhooks page: create a webhook from the event catalogue, see its signing secret once,
 * cause an event and watch its delivery arrive (at a receiver this test runs on
 * 127.0.0.1:3191, which scripts/test.sh lets the server reach) with a valid Standard
 * Webhooks signature.
 */
import * as crypto from "node:crypto";
import * as http from "node:http";
import { expect } from "@playwright/test";
import { createAgent, newAccount, screenshot, signIn, signUpVerified, test } from "./helpers";

const RECEIVER_PORT = 3191;

interface Delivery {
  headers: http.IncomingHttpHeaders;
  body: string;
}

const received: Delivery[] = [];
let server: http.Server;

test.beforeAll(async () => {
  server = http.createServer((req, res) => {
    let body = "";
    req.on("data", (chunk) => (body += chunk));
    req.on("end", () => {
      received.push({ headers: req.headers, body });
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(RECEIVER_PORT, "127.0.0.1", resolve));
});

test.afterAll(async () => {
  // The server's HTTP client keeps idle connections open; close() alone would wait for them.
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

/** Standard Webhooks v1: base64 HMAC-SHA256 of `id.timestamp.body` with the key after `whsec_`. */
function signature(secret: string, d: Delivery): string {
  const key = Buffer.from(secret.replace(/^whsec_/, ""), "base64");
  const signed = `${d.headers["webhook-id"]}.${d.headers["webhook-timestamp"]}.${d.body}`;
  return "v1," + crypto.createHmac("sha256", key).update(signed).digest("base64");
}

test("create a webhook, see its secret once, and watch a signed delivery arrive", async ({ page, request }, testInfo) => {
  test.setTimeout(90_000);
  const pageErrors: string[] = [];
  page.on("pageerror", (error) => pageErrors.push(error.message));
  const account = newAccount("webhooks");
  await signUpVerified(request, account);
  await signIn(page, account);

  await page.getByRole("navigation", { name: "Dashboard" }).getByRole("link", { name: "Webhooks" }).click();
  await expect(page.getByTestId("webhooks-empty")).toBeVisible();
  await expect(page.getByRole("button", { name: "Create webhook" })).toBeEnabled();
  await page.getByLabel("Receiver URL").fill(`http://127.0.0.1:${RECEIVER_PORT}/hooks/agentchat`);
  await page.getByLabel("Description").fill("E2E receiver");
  // Nothing chosen: refused before sending.
  await page.getByRole("button", { name: "Create webhook" }).click();
  await expect(page.getByTestId("form-error")).toContainText("at least one event");
  await page.getByLabel("agent.created").check();
  await page.getByRole("button", { name: "Create webhook" }).click();

  const secret = await page.getByTestId("new-secret-value").inputValue();
  expect(secret).toMatch(/^whsec_[A-Za-z0-9+/=]{40,}$/);
  await expect(page.getByTestId("new-secret-warning")).toContainText("shown only this once");
  await screenshot(page, testInfo, "webhook-secret");
  await page.getByRole("button", { name: "I have saved it" }).click();
  await expect(page.getByTestId("new-secret")).toHaveCount(0);
  const row = page.getByTestId("webhook").filter({ hasText: `127.0.0.1:${RECEIVER_PORT}` });
  await expect(row).toContainText("agent.created");

  await createAgent(page, "Webhook subject");
  await expect.poll(() => received.length, { timeout: 30_000 }).toBeGreaterThan(0);
  const delivery = received[0];
  expect(JSON.parse(delivery.body).type).toBe("agent.created");
  expect(String(delivery.headers["webhook-signature"]).split(" ")).toContain(signature(secret, delivery));

  await page.getByRole("navigation", { name: "Dashboard" }).getByRole("link", { name: "Webhooks" }).click();
  await row.getByRole("button", { name: "Deliveries" }).click();
  const log = row.getByTestId("delivery");
  await expect(log.first()).toHaveAttribute("data-status", "succeeded");
  await expect(log.first()).toContainText("agent.created");
  await expect(log.first()).toContainText("204");
  await screenshot(page, testInfo, "webhook-deliveries");

  // The secret is not shown again anywhere.
  await page.reload();
  await expect(page.getByTestId("webhook").first()).toBeVisible();
  expect(await page.content()).not.toContain(secret);
  expect(pageErrors).toEqual([]);
});
