/**
 * The binary that ships: `scripts/release.sh` builds it with the dashboard inside, and
 * scripts/test.sh copies it alone into an empty folder, starts it there with only
 * environment variables, and runs this file against it (AGENTCHAT_RELEASE_URL). The main
 * end-to-end run leaves this file out (playwright.config.ts).
 */
import { expect } from "@playwright/test";
import { createAgent, newAccount, screenshot, signIn, signUpVerified, test } from "./helpers";

/** The mock provider's streaming model (see dashboard.spec.ts). */
const STREAMING_MODEL = "gpt-4o-mini";

test("the dashboard's files come from inside the binary, compressed and cached by hash", async ({ request }) => {
  const html = await (await request.get("/login")).text();
  const script = /href="(\/pkg\/[0-9a-f]{16}\/agentchat\.js)"/.exec(html);
  expect(script, "the JS loader under /pkg/{hash}/").toBeTruthy();
  const pkg = script![1].replace(/\/agentchat\.js$/, "");
  expect(html).toContain(`href="${pkg}/agentchat.css"`);

  for (const [accept, encoding] of [
    ["br, gzip", "br"],
    ["gzip", "gzip"],
  ]) {
    const wasm = await request.get(`${pkg}/agentchat.wasm`, { headers: { "Accept-Encoding": accept } });
    expect(wasm.status()).toBe(200);
    expect(wasm.headers()["content-encoding"]).toBe(encoding);
    expect(wasm.headers()["content-type"]).toBe("application/wasm");
    expect(wasm.headers()["cache-control"]).toContain("immutable");
    expect(wasm.headers()["etag"]).toBeTruthy();
  }
  const css = await request.get(`${pkg}/agentchat.css`, { headers: { "Accept-Encoding": "identity" } });
  expect(css.status()).toBe(200);
  expect(css.headers()["content-encoding"] ?? "identity").toBe("identity");
  expect(await css.text()).toContain("{");
  expect((await request.get("/favicon.svg")).status()).toBe(200);
  expect((await request.get("/pkg/0000000000000000/agentchat.wasm")).status()).toBe(404);
});

test("a new user signs in and streams a chat on the release binary", async ({ page, request }, testInfo) => {
  test.setTimeout(120_000);
  const problems: string[] = [];
  page.on("pageerror", (error) => problems.push(error.message));
  page.on("console", (message) => {
    if (/hydration|panicked/i.test(message.text())) {
      problems.push(`console: ${message.text()}`);
    }
  });
  const account = newAccount("release");
  await signUpVerified(request, account);
  await signIn(page, account);
  const agentId = await createAgent(page, "Release check", STREAMING_MODEL);
  await page.goto(`/dashboard/agents/${agentId}/chat`);
  await expect(page.getByTestId("chat-empty")).toBeVisible();
  await page.getByLabel("Message").fill("[[tokens:40]] Say hello.");
  await page.getByRole("button", { name: "Send" }).click();
  const reply = page.getByTestId("reply").last();
  await expect(reply).toHaveAttribute("data-status", "streaming");
  await expect(reply).toHaveAttribute("data-status", "complete", { timeout: 30_000 });
  await expect(reply.getByTestId("message-body")).toContainText("w40");
  await screenshot(page, testInfo, "release-chat");
  expect(problems, "no hydration or script errors").toEqual([]);
});
