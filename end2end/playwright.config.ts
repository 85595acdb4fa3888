import { defineConfig, devices } from "@playwright/test";

/**
 * Browser tests of the dashboard. `cargo leptos end-to-end` starts the server and runs
 * `npx playwright test` here; the tests drive the system Chromium (never a downloaded
 * browser), found at CHROMIUM_PATH or /usr/bin/chromium.
 */
export default defineConfig({
  testDir: "./tests",
  // release.spec.ts checks the files inside the release binary: it runs when
  // AGENTCHAT_RELEASE_URL names one (scripts/test.sh), and is left out under
  // `cargo leptos end-to-end`, whose debug server reads the site from target/site.
  testIgnore: process.env.AGENTCHAT_RELEASE_URL ? [] : ["**/release.spec.ts"],
  timeout: 60_000,
  expect: { timeout: 15_000 },
  fullyParallel: false,
  forbidOnly: !!process.env.CI,
  retries: 0,
  workers: 1,
  outputDir: "test-results",
  // results.json is read by scripts/test.sh, which checks the counts itself (under
  // `cargo leptos end-to-end` the exit status does not tell failures apart).
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
