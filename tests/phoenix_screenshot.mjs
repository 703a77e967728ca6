// Screenshot one trace in Arize Phoenix's UI with headless Chromium (playwright-core, no bundled browser).
//
// Usage: node tests/phoenix_screenshot.mjs URL OUT.png [TEXT...]
//
//   URL    the trace page, e.g. http://127.0.0.1:6006/projects/<project id>/traces/<trace id>
//   OUT    where to write the PNG
//   TEXT   texts that must be visible before the shot (Phoenix paints a skeleton first)
//
//   PLAYWRIGHT_CORE_DIR  playwright-core package folder (default: .cache/playwright/node_modules/playwright-core)
//   CHROMIUM_BIN         browser executable (default: /usr/bin/chromium)
//   SCREENSHOT_TIMEOUT_MS  how long to wait for each text (default: 60000)
//
// Prints one JSON line ({"ok": true, "texts": [...], "title": ...}) and exits 0, or prints the error and exits 1.
import { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const coreDir =
  process.env.PLAYWRIGHT_CORE_DIR ||
  path.join(here, "..", ".cache", "playwright", "node_modules", "playwright-core");
const require = createRequire(import.meta.url);
const { chromium } = require(coreDir);

const [url, out, ...texts] = process.argv.slice(2);
if (!url || !out) {
  console.error("usage: node phoenix_screenshot.mjs URL OUT.png [TEXT...]");
  process.exit(2);
}
const timeout = Number(process.env.SCREENSHOT_TIMEOUT_MS || 60000);

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM_BIN || "/usr/bin/chromium",
  args: [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
  ],
});
try {
  const page = await browser.newPage({ viewport: { width: 1600, height: 1000 }, deviceScaleFactor: 1 });
  await page.goto(url, { waitUntil: "domcontentloaded", timeout });
  for (const text of texts) {
    await page.getByText(text, { exact: false }).first().waitFor({ state: "visible", timeout });
  }
  // Let the span tree and the detail pane finish their last paint.
  await page.waitForLoadState("networkidle", { timeout }).catch(() => {});
  await page.waitForTimeout(1000);
  await page.screenshot({ path: out, fullPage: false });
  console.log(JSON.stringify({ ok: true, texts, title: await page.title() }));
} catch (error) {
  console.error(String(error && error.stack ? error.stack : error));
  process.exitCode = 1;
} finally {
  await browser.close();
}
