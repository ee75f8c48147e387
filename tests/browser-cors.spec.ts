// CORS as a real browser enforces it: a page on another origin calls the API from headless
// Chromium. An allowed origin reads and writes (preflight included) and sees the exposed
// headers; a page from any other origin is blocked before its write is sent.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  hostPage,
  launchBrowser,
  type HeadlessBrowser,
  type PageHost,
} from "./browser";
import { freshNamespace, startService, type Service } from "./service";

// The page's script: a write that needs a preflight (JSON body and an Idempotency-Key), then a
// read, reporting what the browser let the page see.
const PAGE = `<!doctype html><title>caller</title><script>
window.callApi = async (api, ns) => {
  try {
    const write = await fetch(api + "/v1/counters/" + ns + "/likes", {
      method: "PUT",
      headers: { "content-type": "application/json", "idempotency-key": crypto.randomUUID() },
      body: JSON.stringify({ value: 41 }),
    });
    const incr = await fetch(api + "/v1/counters/" + ns + "/likes/incr", { method: "POST" });
    const body = await incr.json();
    return { ok: true, status: incr.status, value: body.value,
             shard: incr.headers.get("x-edgecount-shard"), wrote: write.status };
  } catch (error) {
    return { ok: false, error: String(error) };
  }
};
</script>`;

let service: Service;
let browser: HeadlessBrowser;
let allowed: PageHost;
let other: PageHost;

beforeAll(async () => {
  allowed = await hostPage(PAGE);
  other = await hostPage(PAGE);
  service = await startService({
    listen: true,
    vars: {
      EDGECOUNT_CORS_ORIGINS: `https://unrelated.example,${allowed.origin}`,
    },
  });
  browser = await launchBrowser();
});

afterAll(async () => {
  await browser?.close();
  await service?.stop();
  await allowed?.close();
  await other?.close();
});

async function callFrom(origin: string, ns: string) {
  const page = await browser.browser.newPage();
  try {
    await page.goto(origin);
    return await page.evaluate(
      ([api, ns]) =>
        (
          window as unknown as {
            callApi(api: string, ns: string): Promise<Record<string, unknown>>;
          }
        ).callApi(api, ns),
      [service.url!, ns],
    );
  } finally {
    await page.close();
  }
}

describe("CORS in Chromium", () => {
  it("lets an allowed origin write through a preflight and read the exposed headers", async () => {
    const ns = freshNamespace("cors");
    const result = await callFrom(allowed.origin, ns);
    expect(result).toMatchObject({
      ok: true,
      status: 200,
      value: 42,
      wrote: 200,
    });
    expect(result.shard).toMatch(/^\d+$/);
    expect(await service.value(ns, "likes")).toBe(42n);
  });

  it("blocks a page from another origin before its preflighted write is sent", async () => {
    const ns = freshNamespace("cors-denied");
    const result = await callFrom(other.origin, ns);
    expect(result.ok).toBe(false);
    expect(String(result.error)).toContain("Failed to fetch");
    expect(await service.value(ns, "likes")).toBe(0n);
  });
});
