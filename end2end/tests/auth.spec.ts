import { expect, type Page, type TestInfo } from "@playwright/test";
import { test } from "./helpers";
import { waitForMail } from "./mail";

/** The verification link inside the mail: `http(s)://HOST/api/auth/verify-email?token=...`. */
const VERIFY_LINK = /https?:\/\/[^\s"'<>]+\/api\/auth\/verify-email\?token=[^\s"'<>&]+/;

/** Saves a full-page screenshot into the test's output folder and attaches it to the report. */
async function screenshot(page: Page, testInfo: TestInfo, label: string): Promise<void> {
  const file = testInfo.outputPath(`${String(testInfo.attachments.length + 1).padStart(2, "0")}-${label}.png`);
  await page.screenshot({ path: file, fullPage: true });
  await testInfo.attach(label, { path: file, contentType: "image/png" });
}

test("sign up, verify the email, sign in and sign out", async ({ page }, testInfo) => {
  const pageErrors: string[] = [];
  page.on("pageerror", (error) => pageErrors.push(error.message));

  const run = `${Date.now()}-${Math.random().toString(36).slice(2, 8)}`;
  const name = "Ada Lovelace";
  const email = `e2e-${run}@example.com`;
  const password = `Correct-Horse-${run}`;

  await test.step("landing page links to sign up", async () => {
    await page.goto("/");
    await expect(page.getByRole("link", { name: "Create an account" })).toBeVisible();
    await expect(page.getByRole("link", { name: "Sign in" }).first()).toBeVisible();
    await screenshot(page, testInfo, "landing");
  });

  await test.step("sign up", async () => {
    await page.goto("/signup");
    await page.getByLabel("Full name").fill(name);
    await page.getByLabel("Email").fill(email);
    await page.getByLabel("Password").fill(password);
    await page.getByLabel("Company").fill("Analytical Engines Ltd");
    await page.getByLabel("Country").selectOption("GB");
    await page.getByLabel("Phone").fill("+44 20 7946 0958");
    await screenshot(page, testInfo, "signup-form");
    await page.getByRole("button", { name: "Create account" }).click();
    await expect(
      page.getByRole("heading", { name: "Check your email to verify your account" }),
    ).toBeVisible();
    await expect(page.getByTestId("signup-success")).toContainText(email);
    await screenshot(page, testInfo, "signup-done");
  });

  await test.step("an unverified account cannot sign in yet", async () => {
    await page.goto("/login");
    await page.getByLabel("Email").fill(email);
    await page.getByLabel("Password", { exact: true }).fill(password);
    await page.getByRole("button", { name: "Sign in", exact: true }).click();
    await expect(page.getByTestId("form-error")).toBeVisible();
    await expect(page.getByRole("button", { name: "Resend verification email" })).toBeVisible();
    await expect(page).toHaveURL(/\/login/);
    await screenshot(page, testInfo, "login-unverified");
  });

  await test.step("open the verification link from the mail", async () => {
    const mail = await waitForMail(email, VERIFY_LINK);
    const link = new URL(VERIFY_LINK.exec(mail.text)![0]);
    // The link's host is PUBLIC_URL's; follow its path on the server under test.
    await page.goto(link.pathname + link.search);
    await expect(page).toHaveURL(/\/login\?verified=1$/);
    await expect(page.getByTestId("verified-banner")).toHaveText(
      "Email verified — you can sign in now",
    );
    await screenshot(page, testInfo, "login-verified");
  });

  await test.step("sign in", async () => {
    await page.getByLabel("Email").fill(email);
    await page.getByLabel("Password", { exact: true }).fill(password);
    await page.getByRole("button", { name: "Sign in", exact: true }).click();
    await expect(page).toHaveURL(/\/dashboard$/);
    const signedIn = page.getByTestId("signed-in-user");
    await expect(signedIn).toContainText(name);
    await expect(signedIn).toContainText(email);
    await expect(page.getByTestId("plan")).toHaveText("free");
    await screenshot(page, testInfo, "dashboard");
  });

  await test.step("the session lives in cookies only", async () => {
    expect(await page.evaluate(() => localStorage.length + sessionStorage.length)).toBe(0);
    await page.reload();
    await expect(page.getByTestId("signed-in-user")).toContainText(name);
  });

  await test.step("a missing access token is renewed with the refresh cookie", async () => {
    await page.context().clearCookies({ name: "ac_access" });
    await page.reload();
    await expect(page.getByTestId("signed-in-user")).toContainText(name);
    const cookies = await page.context().cookies();
    expect(cookies.map((cookie) => cookie.name)).toContain("ac_access");
  });

  await test.step("sign out", async () => {
    const csrf = (await page.context().cookies()).find((cookie) => cookie.name === "ac_csrf");
    expect(csrf?.value, "the readable CSRF cookie").toBeTruthy();
    const logout = page.waitForRequest(
      (request) => request.method() === "POST" && request.url().endsWith("/api/auth/logout"),
    );
    await page.getByRole("button", { name: "Sign out" }).click();
    expect((await logout).headers()["x-csrf-token"]).toBe(csrf?.value);
    await expect(page).toHaveURL(/\/login$/);
    await screenshot(page, testInfo, "signed-out");
    // The session has ended: the dashboard sends the visitor back to sign in.
    await page.goto("/dashboard");
    await expect(page).toHaveURL(/\/login$/);
  });

  expect(pageErrors, "uncaught errors in the page").toEqual([]);
});
