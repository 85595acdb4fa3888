/**
 * The security headers in a real browser: the dashboard hydrates and its handlers run under
 * its Content Security Policy (scripts only from the site and the page's nonce), and the
 * website widget works on a host page that has a strict policy of its own (no inline styles
 * or scripts allowed). `test` (./helpers) fails a test on any CSP violation in its pages.
 *
 * The host page is served by this test on 127.0.0.1:3193; the server never requests it.
 */
import * as http from "node:http";
import { expect } from "@playwright/test";
import { newAccount, screenshot, signIn, signUpVerified, test } from "./helpers";

const HOST_PORT = 3193;
const HOST = `http://127.0.0.1:${HOST_PORT}`;

test("the dashboard hydrates and handles clicks under its Content Security Policy", async ({ page, request }, testInfo) => {
  const response = await page.goto("/login");
  const headers = response!.headers();
  const csp = headers["content-security-policy"];
  expect(csp).toContain("default-src 'self'");
  expect(csp).toContain("frame-ancestors 'none'");
  expect(csp).not.toContain("unsafe-inline");
  const nonce = /'nonce-([^']+)'/.exec(csp)?.[1];
  expect(nonce, "the policy names the page's nonce").toBeTruthy();
  expect(headers["x-frame-options"]).toBe("DENY");
  expect(headers["x-content-type-options"]).toBe("nosniff");
  // The inline hydration script carries the nonce; no inline script goes without it.
  const inline = await page.locator("script:not([src])").evaluateAll((scripts) =>
    scripts.map((s) => (s as HTMLScriptElement).nonce),
  );
  expect(inline.length).toBeGreaterThan(0);
  expect(inline.every((n) => n === nonce)).toBe(true);

  // Another page load gets another nonce.
  const again = await request.get("/login");
  expect(again.headers()["content-security-policy"]).not.toContain(`'nonce-${nonce}'`);

  // Hydrated handlers run: signing in goes through the form's submit handler, and the
  // dashboard then loads the account through fetch.
  const account = newAccount("csp");
  await signUpVerified(request, account);
  await signIn(page, account);
  await page.getByRole("navigation", { name: "Dashboard" }).getByRole("link", { name: "Account" }).click();
  await expect(page.getByTestId("usage-chart")).toBeVisible();
  await screenshot(page, testInfo, "dashboard-under-csp");
});

test("the widget works on a host page with a strict Content Security Policy", async ({ page, request, baseURL }, testInfo) => {
  test.setTimeout(90_000);
  const account = newAccount("csp-widget");
  await signUpVerified(request, account);
  const login = await request.post("/api/auth/login", { data: { email: account.email, password: account.password } });
  expect(login.status()).toBe(200);
  const auth = { authorization: `Bearer ${(await login.json()).tokens.accessToken}` };
  const agent = await request.post("/api/agents", {
    headers: auth,
    data: { name: "Strict shop assistant", systemPrompt: "Answer briefly.", model: "gpt-4o-mini" },
  });
  expect(agent.status(), await agent.text()).toBe(201);
  const agentId = (await agent.json()).agent.id;
  const created = await request.post("/api/integrations", {
    headers: auth,
    data: {
      providerCode: "website",
      name: "Strict shop chat",
      agentId,
      credentials: {},
      config: { allowedOrigins: [HOST], welcomeMessage: "Hello from a strict page." },
    },
  });
  expect(created.status(), await created.text()).toBe(201);
  const integration = await request.get(`/api/integrations/${(await created.json()).id}`, { headers: auth });
  const embed: string = (await integration.json()).integration.connection.embedCode;
  expect(embed).toContain("/widget.js");

  // The host page allows scripts and requests from AgentChat only, and no inline styles.
  const agentchat = new URL(baseURL!).origin;
  const policy =
    `default-src 'none'; script-src ${agentchat}; connect-src ${agentchat}; ` +
    `style-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'`;
  const server = http.createServer((_req, res) => {
    res.writeHead(200, { "content-type": "text/html; charset=utf-8", "content-security-policy": policy });
    res.end(`<!doctype html><html lang="en"><head><title>Strict shop</title></head><body><h1>Strict shop</h1>${embed}</body></html>`);
  });
  await new Promise<void>((resolve) => server.listen(HOST_PORT, "127.0.0.1", resolve));
  try {
    await page.goto(`${HOST}/`);
    const bubble = page.getByRole("button", { name: "Open chat" });
    await expect(bubble).toBeVisible();
    // The widget's stylesheet applies: a round, coloured bubble fixed in the corner.
    const look = await bubble.evaluate((el) => {
      const style = getComputedStyle(el);
      const frame = getComputedStyle(el.parentElement!);
      return { background: style.backgroundColor, radius: style.borderRadius, position: frame.position };
    });
    expect(look).toEqual({ background: "rgb(52, 81, 209)", radius: "50%", position: "fixed" });
    await bubble.click();
    const dialog = page.getByRole("dialog", { name: "Strict shop chat" });
    await expect(dialog).toBeVisible();
    await expect(dialog).toContainText("Hello from a strict page.");
    await dialog.getByLabel("Message").fill("Is this page strict?");
    await dialog.getByRole("button", { name: "Send" }).click();
    await expect(dialog.locator(".assistant").last()).toHaveText("Echo: Is this page strict?");
    await screenshot(page, testInfo, "widget-on-strict-page");
  } finally {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
});
