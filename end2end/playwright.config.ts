import { defineConfig, devices } from "@playwright/test";

/**
 * Browser tests of the dashboard. `cargo leptos end-to-end` starts the server and runs
 * `npx playwright test` here; the tests drive the system Chromium (never a downloaded
 * browser), found at CHROMIUM_PATH or /usr/bin/chromium.
 */
export default defineConfig({
  testDir: "./tests",
  timeout: 60_000,
  expect: { timeout: 15_000 },
  fullyParallel: false,
  forbidOnly: !!process.env.CI,
  retries: 0,
  workers: 1,
  outputDir: "test-results",
  // results.json is read by scripts/test.sh: `cargo leptos end-to-end` exits 0 even when
  // the build or a test fails, so the script checks the counts itself.
  reporter: [["list"], ["html", { open: "never" }], ["json", { outputFile: "results.json" }]],
  use: {
    baseURL: process.env.BASE_URL ?? "http://127.0.0.1:3000",
    screenshot: "on",
    trace: "retain-on-failure",
  },
  projects: [
    {
      name: "chromium",
      use: {
        ...devices["Desktop Chrome"],
        launchOptions: {
          executablePath: process.env.CHROMIUM_PATH ?? "/usr/bin/chromium",
          args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"],
        },
      },
    },
  ],
});
