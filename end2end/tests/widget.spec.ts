/**
 * The website widget on a page of another site: the owner creates a website integration in
 * the dashboard and copies its embed code; a page this test serves on 127.0.0.1:3192 (an
 * allowed origin) embeds it, and a visitor chats with the agent there, the reply streaming
 * in. The same page reached as http://localhost:3192 is another origin, not allowed: the
 * widget says so instead of answering. The visitor's rating of a reply is kept.
 */
import * as http from "node:http";
import { expect } from "@playwright/test";
import { createAgent, newAccount, screenshot, signIn, signUpVerified, test } from "./helpers";

const SITE_PORT = 3192;
const ALLOWED = `http://127.0.0.1:${SITE_PORT}`;
const OTHER = `http://localhost:${SITE_PORT}`;

let embed = "";
let server: http.Server;

test.beforeAll(async () => {
  server = http.createServer((_req, res) => {
    res.writeHead(200, { "content-type": "text/html; charset=utf-8" });
    res.end(
      `<!doctype html><html lang="en"><head><title>Shop</title></head>` +
        `<body><h1>The shop</h1><p>Questions? Ask our assistant.</p>${embed}</body></html>`,
    );
  });
  await new Promise<void>((resolve) => server.listen(SITE_PORT, "127.0.0.1", resolve));
});

test.afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

test("a visitor chats with the agent through the widget on an allowed site only", async ({ page, request }, testInfo) => {
  test.setTimeout(90_000);
  const account = newAccount("widget");
  await signUpVerified(request, account);
  await signIn(page, account);
  const agentId = await createAgent(page, "Shop assistant");

  await page.getByRole("navigation", { name: "Dashboard" }).getByRole("link", { name: "Integrations" }).click();
  await expect(page.getByRole("button", { name: "Create integration" })).toBeEnabled();
  await page.getByLabel("Provider").selectOption("website");
  await page.getByLabel("Name").fill("Shop chat");
  await page.getByLabel("Agent").selectOption({ label: "Shop assistant" });
  await page.getByLabel("Allowed origins (pages that may embed the widget)").fill(ALLOWED);
  await page.getByLabel("Welcome message").fill("Hi! Ask me about the shop.");
  await page.getByRole("button", { name: "Create integration" }).click();
  await expect(page.getByTestId("integration-created")).toBeVisible();
  const row = page.getByTestId("integration").filter({ hasText: "Shop chat" });
  embed = await row.getByTestId("integration-embed-code").inputValue();
  expect(embed).toMatch(/^<script src="http:\/\/[^"]+\/widget\.js" data-agentchat-id="pub_[A-Za-z0-9_-]{22}" async><\/script>$/);

  // The shop's page, on an allowed origin.
  const shop = await page.context().newPage();
  const pageErrors: string[] = [];
  shop.on("pageerror", (error) => pageErrors.push(error.message));
  await shop.goto(`${ALLOWED}/`);
  await shop.getByRole("button", { name: "Open chat" }).click();
  const dialog = shop.getByRole("dialog", { name: "Shop chat" });
  await expect(dialog).toBeVisible();
  await expect(dialog).toContainText("Hi! Ask me about the shop.");
  await dialog.getByLabel("Message").fill("Do you ship to Norway?");
  await dialog.getByRole("button", { name: "Send" }).click();
  const reply = dialog.locator(".assistant").last();
  // The mock model streams one word every 40 ms: the reply grows before it is complete.
  await expect(reply).toHaveText(/^Echo:/);
  await expect(reply).toHaveText("Echo: Do you ship to Norway?");
  await expect(reply).not.toHaveAttribute("aria-busy", "true");
  // The visitor rates the reply; pressing the pressed thumb again would clear it.
  const notHelpful = dialog.getByRole("button", { name: "Not helpful" });
  await expect(notHelpful).toHaveAttribute("aria-pressed", "false");
  await notHelpful.click();
  await expect(notHelpful).toHaveAttribute("aria-pressed", "true");
  await screenshot(shop, testInfo, "widget");

  // The conversation survives a reload of the page (same visitor, same thread).
  await shop.reload();
  await shop.getByRole("button", { name: "Open chat" }).click();
  await expect(shop.getByRole("dialog")).toContainText("Echo: Do you ship to Norway?");
  await expect(shop.getByRole("dialog").getByRole("button", { name: "Not helpful" })).toHaveAttribute("aria-pressed", "true");
  expect(pageErrors).toEqual([]);

  // The owner sees the visitor's conversation under the agent.
  await page.goto(`/dashboard/agents/${agentId}/chat`);
  await expect(page.getByTestId("thread-list")).toContainText("Do you ship to Norway?");
  // ... and in the inbox among the conversations rated not helpful, from the widget.
  await page.goto("/dashboard/conversations?feedback=down");
  await expect(page.locator("#inbox-feedback")).toHaveValue("down");
  const rated = page.getByTestId("inbox-row");
  await expect(rated).toHaveCount(1);
  await expect(rated).toContainText("Do you ship to Norway?");
  await expect(rated).toContainText("Shop assistant");
  await expect(rated).toContainText("rated not helpful");
  await expect(rated.locator("[data-channel]")).toHaveAttribute("data-channel", "widget");
  await expect(rated.locator("[data-channel]")).toHaveText("Website widget");

  // The same page on another origin: the widget refuses to work there.
  const elsewhere = await page.context().newPage();
  await elsewhere.goto(`${OTHER}/`);
  await elsewhere.getByRole("button", { name: "Open chat" }).click();
  await expect(elsewhere.getByRole("dialog")).toContainText(`not enabled on ${OTHER}`);
  await expect(elsewhere.getByRole("dialog").getByRole("button", { name: "Send" })).toBeDisabled();
});
