// First-load time of the dashboard in Chromium, with a cold cache every time.
//
//   node end2end/bench/first-load.mjs [BASE_URL] [RUNS]
//
// BASE_URL defaults to http://127.0.0.1:3000, RUNS to 15. Each run opens a new browser
// context (empty cache, no cookies), loads `/login` and records, in milliseconds from the
// start of navigation:
//   - ttfb: the HTML's first byte (server-side rendering);
//   - dcl: DOMContentLoaded (the server-rendered page is usable for reading);
//   - load: the load event;
//   - interactive: hydration done, seen as the "Sign in" button becoming enabled (it is
//     disabled in the server-rendered HTML until the WASM app has hydrated);
// and the bytes transferred for the WASM, JS, CSS and HTML (Resource Timing's
// transferSize, i.e. compressed when the server compressed). The first run is a warm-up of
// the server's own caches and is not counted. Medians and the slowest run are printed.
// Chromium is Debian's (/usr/bin/chromium, or CHROMIUM_PATH), never a downloaded one.
import { chromium } from "@playwright/test";

const base = process.argv[2] ?? "http://127.0.0.1:3000";
const runs = Number(process.argv[3] ?? 15);

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM_PATH ?? "/usr/bin/chromium",
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"],
});

const samples = [];
for (let i = 0; i <= runs; i++) {
  const context = await browser.newContext();
  const page = await context.newPage();
  const started = Date.now();
  await page.goto(`${base}/login`, { waitUntil: "load" });
  await page.getByRole("button", { name: "Sign in", exact: true }).waitFor({ state: "visible" });
  await page.waitForFunction(() => {
    const button = [...document.querySelectorAll("button")].find((b) => b.textContent?.trim() === "Sign in");
    return button !== undefined && !button.disabled;
  });
  const measured = await page.evaluate(() => {
    const nav = performance.getEntriesByType("navigation")[0];
    const bytes = { wasm: 0, js: 0, css: 0, html: nav.transferSize, wasmDecoded: 0 };
    for (const r of performance.getEntriesByType("resource")) {
      if (r.name.endsWith(".wasm")) {
        bytes.wasm += r.transferSize;
        bytes.wasmDecoded += r.decodedBodySize;
      } else if (r.name.endsWith(".js")) bytes.js += r.transferSize;
      else if (r.name.endsWith(".css")) bytes.css += r.transferSize;
    }
    return {
      ttfb: nav.responseStart - nav.startTime,
      dcl: nav.domContentLoadedEventEnd - nav.startTime,
      load: nav.loadEventEnd - nav.startTime,
      interactive: performance.now(),
      bytes,
    };
  });
  measured.wall = Date.now() - started;
  if (i > 0) samples.push(measured);
  await context.close();
}
await browser.close();

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
};
const row = (name, pick) => {
  const xs = samples.map(pick);
  console.log(`${name.padEnd(12)} median ${median(xs).toFixed(1).padStart(7)} ms   max ${Math.max(...xs).toFixed(1).padStart(7)} ms`);
};
console.log(`first load of ${base}/login in Chromium, ${samples.length} cold-cache runs`);
row("ttfb", (s) => s.ttfb);
row("dcl", (s) => s.dcl);
row("load", (s) => s.load);
row("interactive", (s) => s.interactive);
const b = samples[0].bytes;
const kib = (n) => `${(n / 1024).toFixed(1)} KiB`;
console.log(`transferred: wasm ${kib(b.wasm)} (decoded ${kib(b.wasmDecoded)}), js ${kib(b.js)}, css ${kib(b.css)}, html ${kib(b.html)}`);
