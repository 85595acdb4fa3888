/** The integrations page: a form driven by the provider catalogue, masked credentials, delete. */
import { expect } from "@playwright/test";
import { createAgent, newAccount, screenshot, signIn, signUpVerified, test } from "./helpers";

const BOT_TOKEN = "123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsawq";

test("create a Telegram integration for an agent, see it masked, delete it", async ({ page, request }, testInfo) => {
  const pageErrors: string[] = [];
  page.on("pageerror", (error) => pageErrors.push(error.message));
  const account = newAccount("integrations");
  await signUpVerified(request, account);
  await signIn(page, account);
  await createAgent(page, "Support desk");

  await page.getByRole("navigation", { name: "Dashboard" }).getByRole("link", { name: "Integrations" }).click();
  await expect(page.getByTestId("integrations-empty")).toBeVisible();
  await expect(page.getByRole("button", { name: "Create integration" })).toBeEnabled();
  await page.getByLabel("Provider").selectOption("telegram");
  await expect(page.getByTestId("provider-fields")).toContainText("Bot token");
  await page.getByLabel("Name").fill("Support bot");
  await page.getByLabel("Agent").selectOption({ label: "Support desk" });

  // A malformed token is refused with the server's words, next to the form.
  await page.getByLabel("Bot token (from @BotFather)").fill("not-a-token");
  await page.getByRole("button", { name: "Create integration" }).click();
  await expect(page.getByTestId("form-error")).toContainText("botToken");

  await page.getByLabel("Bot token (from @BotFather)").fill(BOT_TOKEN);
  await page.getByRole("button", { name: "Create integration" }).click();
  await expect(page.getByTestId("integration-created")).toBeVisible();
  const row = page.getByTestId("integration").filter({ hasText: "Support bot" });
  await expect(row).toContainText("Support desk");
  await expect(row.getByTestId("integration-credentials")).toHaveText("botToken ••••sawq");
  expect(await page.content()).not.toContain(BOT_TOKEN.slice(10));
  await screenshot(page, testInfo, "integrations");

  await row.getByRole("button", { name: "Delete" }).click();
  await row.getByRole("button", { name: "Yes, delete" }).click();
  await expect(page.getByTestId("integrations-empty")).toBeVisible();
  expect(pageErrors).toEqual([]);
});
