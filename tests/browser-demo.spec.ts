// The demo page end to end in headless Chromium: it loads, counts the view, a click on the
// like button counts a like, and after a reload the likes are still there. The screenshot is
// kept in tests/.artifacts/.
import { mkdirSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { launchBrowser, type HeadlessBrowser } from "./browser";
import { startService, type Service } from "./service";

const ARTIFACTS = "tests/.artifacts";
/** How long the page may take to show what it fetched: expect.poll's own default, a second,
 * is about how long a loaded machine can take to run the page and answer its requests. */
const POLL = { timeout: 10_000 };

let service: Service;
let browser: HeadlessBrowser;
beforeAll(async () => {
  service = await startService({ listen: true, vars: { EDGECOUNT_DEMO: "1" } });
  browser = await launchBrowser();
});
afterAll(async () => {
  await browser?.close();
  await service?.stop();
});

describe("demo page in Chromium", () => {
  it("counts views and likes, and keeps them across a reload", async () => {
    const page = await browser.browser.newPage();
    const errors: string[] = [];
    page.on("pageerror", (error) => errors.push(String(error)));
    page.on("console", (message) => {
      if (message.type() === "error") errors.push(message.text());
    });

    await page.goto(`${service.url}/`);
    const views = page.locator("#views");
    const likes = page.locator("#likes");
    await expect.poll(() => views.textContent(), POLL).toBe("1");
    await expect.poll(() => likes.textContent(), POLL).toBe("0");

    await page.locator("#like").click();
    await expect.poll(() => likes.textContent(), POLL).toBe("1");
    await page.locator("#like").click();
    await expect.poll(() => likes.textContent(), POLL).toBe("2");

    await page.reload();
    await expect.poll(() => views.textContent(), POLL).toBe("2");
    await expect.poll(() => likes.textContent(), POLL).toBe("2");
    // The badge rendered as an image.
    await expect
      .poll(
        () =>
          page
            .locator("#badge")
            .evaluate((img: HTMLImageElement) => img.naturalWidth),
        POLL,
      )
      .toBeGreaterThan(0);
    expect(await page.locator("#status").textContent()).toBe("");

    mkdirSync(ARTIFACTS, { recursive: true });
    await page.screenshot({
      path: `${ARTIFACTS}/demo-page.png`,
      fullPage: true,
    });
    expect(errors).toEqual([]);
    expect(await service.value("demo", "likes")).toBe(2n);
    await page.close();
  });
});
