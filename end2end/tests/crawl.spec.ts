/**
 * Adding a website to an agent's knowledge and watching the crawl fill in live. The site is
 * served by this test on 127.0.0.1:3190 (scripts/test.sh lets the server reach that address
 * through ALLOWED_PRIVATE_HOSTS); every page answers slowly so that the crawl's progress
 * ("N of M pages") can be seen before the document becomes indexed.
 */
import * as http from "node:http";
import { expect } from "@playwright/test";
import { createAgent, newAccount, screenshot, signIn, signUpVerified, test } from "./helpers";

const SITE_PORT = 3190;
const PAGES = 20;
const PAGE_DELAY_MS = 600;

const TOPICS = [
  "lighthouses", "tides", "harbours", "buoys", "charts", "anchors", "knots", "sails", "keels", "masts",
  "rudders", "compasses", "sextants", "beacons", "ferries", "canals", "locks", "piers", "wharves", "reefs",
];

function page(i: number): string {
  const topic = TOPICS[i % TOPICS.length];
  const links = i === 0
    ? Array.from({ length: PAGES - 1 }, (_, k) => `<li><a href="/docs/page-${k + 1}.html">Page ${k + 1}</a></li>`).join("")
    : `<li><a href="/docs/">Back to the index</a></li>`;
  return `<!doctype html><html><head><title>Seafaring notes: ${topic}</title></head>
<body><main><h1>About ${topic}</h1>
<p>This page explains ${topic} in plain words. Sailors have relied on ${topic} for centuries,
and the notes below describe how ${topic} are built, maintained and used at sea.</p>
<h2>History of ${topic}</h2><p>The earliest ${topic} appear in harbour records of many ports.</p>
<ul>${links}</ul></main></body></html>`;
}

let server: http.Server;

test.beforeAll(async () => {
  server = http.createServer((req, res) => {
    const url = req.url ?? "/";
    const match = /^\/docs\/(?:page-(\d+)\.html)?$/.exec(url);
    if (!match) {
      res.writeHead(404, { "content-type": "text/plain" }).end("not found");
      return;
    }
    const i = match[1] ? Number(match[1]) : 0;
    if (i >= PAGES) {
      res.writeHead(404).end();
      return;
    }
    setTimeout(() => res.writeHead(200, { "content-type": "text/html; charset=utf-8" }).end(page(i)), PAGE_DELAY_MS);
  });
  await new Promise<void>((resolve) => server.listen(SITE_PORT, "127.0.0.1", resolve));
});

test.afterAll(async () => {
  // The server's HTTP client keeps idle connections open; close() alone would wait for them.
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

test("add a website and watch the crawl become indexed", async ({ page, request }, testInfo) => {
  test.setTimeout(120_000);
  const account = newAccount("crawl");
  await signUpVerified(request, account);
  await signIn(page, account);
  const agentId = await createAgent(page, "Harbour guide");

  await page.goto(`/dashboard/agents/${agentId}/knowledge`);
  await expect(page.getByRole("button", { name: "Add website" })).toBeEnabled();
  await page.getByLabel("Start URL").fill(`http://127.0.0.1:${SITE_PORT}/docs/`);
  await page.getByLabel("Crawl depth").fill("1");
  await page.getByRole("button", { name: "Add website" }).click();
  await expect(page.getByTestId("crawl-added")).toBeVisible();

  const row = page.getByTestId("document").filter({ hasText: `127.0.0.1:${SITE_PORT}` });
  // While the crawl runs, its progress is shown and updates without a reload.
  await expect(row.getByTestId("document-progress")).toBeVisible();
  await expect(row.getByTestId("document-progress")).toContainText(/\d+ of \d+ pages/);
  await screenshot(page, testInfo, "crawl-in-progress");

  await expect(row).toHaveAttribute("data-status", "indexed", { timeout: 60_000 });
  await expect(row).toContainText(`${PAGES} pages`);
  await screenshot(page, testInfo, "crawl-indexed");
});
