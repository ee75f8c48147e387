// The dashboard (/dashboard) in headless Chromium: it opens on a filled namespace, its figures
// match the API's, a key opens its own chart, and an increment of that key shows live. The
// screenshot is kept in tests/.artifacts/ (docs/images/dashboard.png is a copy of one).
import { mkdirSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { launchBrowser, type HeadlessBrowser } from "./browser";
import { startService, type Service } from "./service";

const ARTIFACTS = "tests/.artifacts";
const POLL = { timeout: 15_000 };

let service: Service;
let browser: HeadlessBrowser;
beforeAll(async () => {
  service = await startService({ listen: true });
  browser = await launchBrowser();
});
afterAll(async () => {
  await browser?.close();
  await service?.stop();
});

const dayOf = (date: string) =>
  Math.round(Date.parse(`${date}T00:00:00Z`) / 86_400_000);

describe("dashboard in Chromium", () => {
  it("shows a namespace's figures as the API reads them, and a key's live value", async () => {
    // A namespace of this spec's own runtime: its screenshot is the one in the docs.
    const ns = "site";
    const today = (
      await (
        await service.fetch(`/v1/counters/${ns}/probe/days?period=today`)
      ).json()
    ).to;
    const day = dayOf(today);
    const pages = [
      "/",
      "/pricing",
      "/blog/launch",
      "/search?q=<b>edge</b>",
      "newsletter",
    ];
    const lines = pages.map((key, i) =>
      JSON.stringify({
        ns,
        key,
        counter: {
          value: 100 * (i + 1),
          version: 1,
          today: { day, count: i + 1 },
        },
        days: Array.from({ length: 6 }, (_, back) => ({
          day: day - back - 1,
          count: (i + 1) * (back + 2),
        })),
      }),
    );
    const imported = await service.fetch("/v1/import", {
      method: "POST",
      body: `${lines.join("\n")}\n`,
    });
    expect(imported.status).toBe(200);
    // Two visitors of the home page today.
    for (const address of ["192.0.2.10", "192.0.2.11"]) {
      await service.fetch(`/v1/counters/${ns}/%2F/incr?unique=1`, {
        method: "POST",
        headers: {
          "cf-connecting-ip": address,
          "user-agent": "Dashboard spec",
        },
      });
    }
    const week = await (
      await service.fetch(`/v1/namespaces/${ns}/days?period=7d`)
    ).json();
    const top = await (
      await service.fetch(`/v1/namespaces/${ns}/top?period=7d&limit=10`)
    ).json();

    const page = await browser.browser.newPage({
      viewport: { width: 900, height: 900 },
    });
    const errors: string[] = [];
    page.on("pageerror", (error) => errors.push(String(error)));
    page.on("console", (message) => {
      if (message.type() === "error") errors.push(message.text());
    });
    await page.goto(`${service.url}/dashboard?ns=${ns}`);
    const format = (n: number) => n.toLocaleString("en-US");
    await expect
      .poll(() => page.locator("#views").textContent(), POLL)
      .toBe(format(week.count));
    await expect
      .poll(() => page.locator("#today").textContent(), POLL)
      .toBe(format(week.days[6].count));
    // The top pages in the API's order, names shown as text.
    await expect
      .poll(
        () => page.locator("#top tr td:first-child").allTextContents(),
        POLL,
      )
      .toEqual(top.keys.map((k: { key: string }) => k.key));
    expect(await page.locator("#top tr").count()).toBe(pages.length);
    expect(await page.locator("#chart rect").count()).toBe(7);

    // A key opens its own chart, with its visitors, and follows its value live: a name the
    // stream takes through the stream, any other by reading it again.
    await page.getByRole("button", { name: "newsletter", exact: true }).click();
    await expect
      .poll(() => page.locator("#key-value").textContent(), POLL)
      .toBe("500");
    await service.fetch(`/v1/counters/${ns}/newsletter/incr?by=3`, {
      method: "POST",
    });
    await expect
      .poll(() => page.locator("#key-value").textContent(), POLL)
      .toBe("503");
    await page.getByRole("button", { name: "/", exact: true }).click();
    await expect
      .poll(() => page.locator("#key-title").textContent(), POLL)
      .toBe("/");
    await expect
      .poll(() => page.locator("#key-visitors").textContent(), POLL)
      .toBe("2");
    await expect
      .poll(() => page.locator("#key-value").textContent(), POLL)
      .toBe("102");
    await service.fetch(`/v1/counters/${ns}/%2F/incr?by=5`, { method: "POST" });
    await expect
      .poll(() => page.locator("#key-value").textContent(), POLL)
      .toBe("107");
    // Keyboard: the period buttons are reachable and work with Enter.
    await page.locator('[data-period="today"]').focus();
    await page.keyboard.press("Enter");
    await expect
      .poll(() => page.locator("#period-name").textContent(), POLL)
      .toBe("today");

    mkdirSync(ARTIFACTS, { recursive: true });
    await page.locator('[data-period="7d"]').click();
    await expect.poll(() => page.locator("#chart rect").count(), POLL).toBe(7);
    await page.screenshot({
      path: `${ARTIFACTS}/dashboard.png`,
      fullPage: true,
    });
    expect(errors).toEqual([]);
    await page.close();
  });

  it("asks for a token where reads are private, and keeps it out of the address", async () => {
    const strict = await startService({
      listen: true,
      vars: {
        EDGECOUNT_ADMIN_TOKENS: "admin-secret-dash",
        EDGECOUNT_READ_TOKENS: "reader-secret-dash",
        EDGECOUNT_PRIVATE_READS: "true",
      },
    });
    const page = await browser.browser.newPage();
    try {
      await page.goto(`${strict.url}/dashboard?ns=site`);
      await expect
        .poll(() => page.locator("#status").textContent(), POLL)
        .toContain("needs a token");
      await page.locator("#token").fill("reader-secret-dash");
      await page.locator("#open button[type=submit]").click();
      await expect
        .poll(() => page.locator("#views").textContent(), POLL)
        .toBe("0");
      expect(await page.locator("#status").textContent()).toBe("");
      expect(page.url()).not.toContain("reader-secret-dash");
      expect(await page.locator("#token").inputValue()).toBe("");
    } finally {
      await page.close();
      await strict.stop();
    }
  });
});
