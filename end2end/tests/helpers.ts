/**
 * Shared steps of the dashboard tests: accounts, sign-in and screenshots, and `test`, which
 * every spec uses: it fails a test when any page of its browser context reports a Content
 * Security Policy violation (the dashboard's, `/api/docs`'s or a test page's own).
 */
import { test as base, expect, type APIRequestContext, type Page, type TestInfo } from "@playwright/test";
import { waitForMail } from "./mail";

/**
 * Playwright's `test`, with an automatic check: every `securitypolicyviolation` event in
 * any page or frame of the test's browser context (they bubble out of shadow roots too), and
 * every console error about a Content Security Policy, is recorded; the test fails at its
 * end if there was any.
 */
export const test = base.extend<{ cspViolations: string[] }>({
  cspViolations: [
    async ({ context }, use) => {
      const violations: string[] = [];
      await context.exposeBinding("__agentchatCspViolation", ({ page }, text: string) => {
        violations.push(`${page.url()}: ${text}`);
      });
      await context.addInitScript(() => {
        document.addEventListener(
          "securitypolicyviolation",
          (event) => {
            const report = (window as unknown as { __agentchatCspViolation?: (text: string) => void })
              .__agentchatCspViolation;
            report?.(
              `${event.effectiveDirective} refused ${event.blockedURI || "an inline resource"} ` +
                `(${event.sourceFile || "page"}:${event.lineNumber}) under "${event.originalPolicy}"`,
            );
          },
          true,
        );
      });
      context.on("console", (message) => {
        if (message.type() === "error" && /Content[- ]Security[- ]Policy/i.test(message.text())) {
          violations.push(`${message.page()?.url() ?? "?"}: console: ${message.text()}`);
        }
      });
      await use(violations);
      expect(violations, "Content Security Policy violations").toEqual([]);
    },
    { auto: true },
  ],
});

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
