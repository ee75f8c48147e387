// A count made just before the page goes away lands: a page on another origin loads the
// browser client from the service, counts one-way and navigates away at once, without
// waiting for the answer; the service must end up with the count.
import { afterAll, beforeAll, expect, it } from "vitest";
import {
  hostPage,
  launchBrowser,
  type HeadlessBrowser,
  type PageHost,
} from "./browser";
import { freshNamespace, startService, type Service } from "./service";

const PAGE = `<!doctype html><title>counting page</title><script type="module">
window.load = async (api) => {
  const { createClient } = await import(api + "/v1/client.js");
  window.client = createClient({ baseUrl: api });
};
window.countAndLeave = (ns, next) => {
  // Not awaited: the page leaves at once, as a click on a link would make it.
  window.client.incr(ns, "views", 1, { async: true });
  window.client.incr(ns, "views", 2, { async: true });
  location.href = next;
};
</script>`;

let service: Service;
let browser: HeadlessBrowser;
let site: PageHost;
let elsewhere: PageHost;

beforeAll(async () => {
  site = await hostPage(PAGE);
  elsewhere = await hostPage("<!doctype html><title>elsewhere</title>");
  service = await startService({
    listen: true,
    vars: { EDGECOUNT_ONE_WAY_INTERVAL_MS: "100" },
  });
  browser = await launchBrowser();
});

afterAll(async () => {
  await browser?.close();
  await service?.stop();
  await site?.close();
  await elsewhere?.close();
});

it("applies a one-way count sent right before navigating away", async () => {
  const ns = freshNamespace("leaving");
  const page = await browser.browser.newPage();
  try {
    await page.goto(site.origin);
    await page.evaluate(
      (api) =>
        (window as unknown as { load(api: string): Promise<void> }).load(api),
      service.url!,
    );
    const left = page.waitForURL(`${elsewhere.origin}/next`);
    await page.evaluate(
      ([ns, next]) =>
        (
          window as unknown as { countAndLeave(ns: string, next: string): void }
        ).countAndLeave(ns, next),
      [ns, `${elsewhere.origin}/next`],
    );
    await left;
  } finally {
    await page.close();
  }
  // Applied within the flush interval once it arrives; waited for up to 15 s, as a loaded
  // machine may take a while to send it after the page has gone.
  let value = 0n;
  for (let i = 0; i < 300 && value !== 3n; i++) {
    await new Promise((r) => setTimeout(r, 50));
    value = await service.value(ns, "views");
  }
  expect(value).toBe(3n);
});
