/**
 * Sign-in with GitHub through the dashboard, against the mock GitHub that scripts/test.sh
 * runs next to the server (a consent page with "Authorize" and "Cancel", the token
 * endpoint with PKCE, and the user API; its user is octo@example.test).
 */
import { expect } from "@playwright/test";
import { screenshot, test } from "./helpers";

const GITHUB_EMAIL = "octo@example.test";

test("a cancelled GitHub sign-in comes back to the sign-in page with a message", async ({ page }, testInfo) => {
  await page.goto("/login");
  await page.getByRole("link", { name: "Continue with GitHub" }).click();
  await expect(page.getByRole("button", { name: "Cancel" })).toBeVisible();
  await page.getByRole("button", { name: "Cancel" }).click();
  await expect(page).toHaveURL(/\/login\?oauthError=/);
  await expect(page.getByTestId("oauth-error")).toContainText("cancelled");
  await screenshot(page, testInfo, "github-cancelled");
});

test("signs in through GitHub and shows the connected provider", async ({ page }, testInfo) => {
  const pageErrors: string[] = [];
  page.on("pageerror", (error) => pageErrors.push(error.message));

  await page.goto("/login");
  await expect(page.getByRole("link", { name: "Continue with GitHub" })).toBeVisible();
  await screenshot(page, testInfo, "login-with-providers");
  await page.getByRole("link", { name: "Continue with GitHub" }).click();

  // The provider's consent page.
  await expect(page.getByRole("button", { name: "Authorize" })).toBeVisible();
  await screenshot(page, testInfo, "github-consent");
  await page.getByRole("button", { name: "Authorize" }).click();

  await expect(page).toHaveURL(/\/dashboard$/);
  await expect(page.getByTestId("signed-in-user")).toContainText(GITHUB_EMAIL);
  await screenshot(page, testInfo, "signed-in-with-github");

  await page.goto("/dashboard/account");
  await expect(page.getByTestId("method-github")).toContainText(`Connected as ${GITHUB_EMAIL}`);
  await expect(page.getByTestId("password-method")).toContainText("not set");
  await screenshot(page, testInfo, "account-sign-in-methods");

  expect(pageErrors).toEqual([]);
});
