/** Shared steps of the dashboard tests: accounts, sign-in and screenshots. */
import { expect, type APIRequestContext, type Page, type TestInfo } from "@playwright/test";
import { waitForMail } from "./mail";

/** The verification link inside the mail: `http(s)://HOST/api/auth/verify-email?token=...`. */
export const VERIFY_LINK = /https?:\/\/[^\s"'<>]+\/api\/auth\/verify-email\?token=[^\s"'<>&]+/;

/** Saves a full-page screenshot into the test's output folder and attaches it to the report. */
export async function screenshot(page: Page, testInfo: TestInfo, label: string): Promise<void> {
  const file = testInfo.outputPath(`${String(testInfo.attachments.length + 1).padStart(2, "0")}-${label}.png`);
  await page.screenshot({ path: file, fullPage: true });
  await testInfo.attach(label, { path: file, contentType: "image/png" });
}

/** A fresh account's credentials. */
export interface Account {
  name: string;
  email: string;
  password: string;
}

/** Credentials no other test uses. */
export function newAccount(label: string): Account {
  const run = `${Date.now()}-${Math.random().toString(36).slice(2, 8)}`;
  return {
    name: "Grace Hopper",
    email: `e2e-${label}-${run}@example.com`,
    password: `Correct-Horse-${run}`,
  };
}

/** Signs up through the API and follows the verification link from the mail. */
export async function signUpVerified(request: APIRequestContext, account: Account): Promise<void> {
  const signup = await request.post("/api/auth/signup", {
    data: { name: account.name, email: account.email, password: account.password },
  });
  expect(signup.status(), await signup.text()).toBe(201);
  const mail = await waitForMail(account.email, VERIFY_LINK);
  const link = new URL(VERIFY_LINK.exec(mail.text)![0]);
  const verified = await request.get(link.pathname + link.search, { maxRedirects: 0 });
  expect(verified.status()).toBe(303);
}

/** Signs in through the sign-in page and waits for the dashboard. */
export async function signIn(page: Page, account: Account): Promise<void> {
  await page.goto("/login");
  await page.getByLabel("Email").fill(account.email);
  await page.getByLabel("Password", { exact: true }).fill(account.password);
  await page.getByRole("button", { name: "Sign in", exact: true }).click();
  await expect(page).toHaveURL(/\/dashboard$/);
  await expect(page.getByTestId("signed-in-user")).toContainText(account.email);
}

/** Creates an agent through the dashboard's form and returns its id (from the URL). */
export async function createAgent(page: Page, name: string, model?: string): Promise<string> {
  await page.goto("/dashboard/new-agent");
  // The form takes input once the page is hydrated (its button is enabled then).
  await expect(page.getByRole("button", { name: "Create agent" })).toBeEnabled();
  await page.getByLabel("Name").fill(name);
  await page.getByLabel("System prompt").fill("Answer briefly and cite your sources.");
  if (model) {
    await page.getByLabel("Model").selectOption(model);
  }
  await page.getByRole("button", { name: "Create agent" }).click();
  await expect(page.getByTestId("agent-created")).toBeVisible();
  const id = /\/dashboard\/agents\/([^/?#]+)/.exec(page.url())?.[1];
  expect(id, "agent id in the URL").toBeTruthy();
  return id!;
}
