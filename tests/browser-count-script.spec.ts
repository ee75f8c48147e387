// The one script tag (`/v1/count.js`) on a static page of another origin, in Chromium: it
// counts the view without an idempotency key, shows the page's counter with this view in it
// and other counters as they are (abbreviated with `data-abbreviated`), only shows with
// `data-count="false"`, and a view of a page
// left at once still lands. The script stays within 2 KB gzipped.
import { gzipSync } from "node:zlib";
import { afterAll, beforeAll, expect, it } from "vitest";
import {
  hostPage,
  launchBrowser,
  type HeadlessBrowser,
  type PageHost,
} from "./browser";
import { pathKey } from "../client/src/path-key";
import { clearOfMidnight } from "./days";
import { freshNamespace, startService, type Service } from "./service";

let service: Service;
let browser: HeadlessBrowser;
const hosts: PageHost[] = [];

beforeAll(async () => {
  service = await startService({
    listen: true,
    vars: { EDGECOUNT_ONE_WAY_INTERVAL_MS: "100" },
  });
  browser = await launchBrowser();
});

afterAll(async () => {
  await browser?.close();
  await service?.stop();
  await Promise.all(hosts.map((host) => host.close()));
});

async function site(html: string): Promise<PageHost> {
  const host = await hostPage(html);
  hosts.push(host);
  return host;
}

const tag = (attributes: string) =>
  `<script async src="${service.url}/v1/count.js" ${attributes}></script>`;

async function strong(ns: string, key: string): Promise<number> {
  const answer = await service.fetch(
    `/v1/counters/${ns}/${encodeURIComponent(key)}?consistency=strong`,
  );
  return (await answer.json()).value;
}

it("is served small", async () => {
  const script = await service.fetch("/v1/count.js");
  expect(script.status).toBe(200);
  expect(script.headers.get("content-type")).toMatch(/javascript/);
  const gzipped = gzipSync(Buffer.from(await script.arrayBuffer())).length;
  console.log(`/v1/count.js: ${gzipped} bytes gzipped`);
  expect(gzipped).toBeLessThanOrEqual(2048);
});

it("counts the view and shows this page's counter with it, and another as it is", async () => {
  const ns = freshNamespace("tagged");
  await service.fetch(`/v1/counters/${ns}/likes/incr?by=41`, {
    method: "POST",
  });
  const host = await site(
    `<!doctype html><title>post</title>${tag(`data-ns="${ns}"`)}
     <p>Views: <span id="views" data-edgecount></span></p>
     <p>Likes: <span id="likes" data-edgecount="${ns}/likes"></span></p>`,
  );
  const page = await browser.browser.newPage();
  const sent: string[] = [];
  page.on("request", (request) => {
    if (request.url().includes("/incr"))
      sent.push(JSON.stringify(request.headers()));
  });
  try {
    for (const expected of ["1", "2"]) {
      await page.goto(`${host.origin}/blog/post-1`);
      await page.waitForFunction(
        (value) => document.getElementById("views")?.textContent === value,
        expected,
      );
      // The other counter is read in a request of its own, which may answer after the view's.
      await page.waitForFunction(
        () => document.getElementById("likes")?.textContent === "41",
      );
    }
    expect(await strong(ns, "/blog/post-1")).toBe(2);
    expect(sent).toHaveLength(2);
    expect(sent.join()).not.toMatch(/idempotency-key/i);
  } finally {
    await page.close();
  }
});

it("counts a page that does not show its counter one-way, even one left as the count goes", async () => {
  const ns = freshNamespace("leaving");
  const elsewhere = await site("<!doctype html><title>elsewhere</title>");
  const host = await site(
    `<!doctype html><title>left</title>${tag(`data-ns="${ns}" data-key="landing"`)}`,
  );
  const page = await browser.browser.newPage();
  try {
    // The page is left the moment its count is sent, before any answer can come.
    const counting = new Promise<string>((resolve) =>
      page.on("request", (request) => {
        if (request.url().includes("/incr")) resolve(request.url());
      }),
    );
    await page.goto(host.origin);
    const url = await counting;
    await page.goto(`${elsewhere.origin}/next`);
    expect(url).toMatch(/\/landing\/incr\?async=1$/);
    // The one-way count reaches its shard within a few flush intervals.
    let value = 0;
    for (let i = 0; i < 100 && value < 1; i++) {
      await new Promise((resolve) => setTimeout(resolve, 50));
      value = await strong(ns, "landing");
    }
    expect(value).toBe(1);
  } finally {
    await page.close();
  }
});

it("counts once on a page that includes the tag twice", async () => {
  const ns = freshNamespace("twice");
  const host = await site(
    `<!doctype html><title>twice</title>${tag(`data-ns="${ns}" data-key="page"`)}${tag(`data-ns="${ns}" data-key="page"`)}
     <span id="views" data-edgecount></span>`,
  );
  const page = await browser.browser.newPage();
  try {
    const counts: string[] = [];
    page.on("request", (request) => {
      if (request.url().includes("/incr")) counts.push(request.url());
    });
    await page.goto(host.origin);
    await page.waitForFunction(
      () => document.getElementById("views")?.textContent === "1",
    );
    expect(counts).toHaveLength(1);
    expect(await strong(ns, "page")).toBe(1);
  } finally {
    await page.close();
  }
});

it("only shows with data-count=false", async () => {
  const ns = freshNamespace("shown");
  await service.fetch(`/v1/counters/${ns}/home/incr?by=7`, { method: "POST" });
  const host = await site(
    `<!doctype html><title>home</title>${tag(`data-ns="${ns}" data-key="home" data-count="false"`)}
     <span id="views" data-edgecount></span>`,
  );
  const page = await browser.browser.newPage();
  try {
    await page.goto(host.origin);
    await page.waitForFunction(
      () => document.getElementById("views")?.textContent === "7",
    );
    expect(await strong(ns, "home")).toBe(7);
  } finally {
    await page.close();
  }
});

it("shows a counter abbreviated with data-abbreviated, as badges do", async () => {
  const ns = freshNamespace("short");
  await service.fetch(`/v1/counters/${ns}/home`, {
    method: "PUT",
    headers: { "content-type": "application/json" },
    body: '{"value": 12345}',
  });
  const host = await site(
    `<!doctype html><title>home</title>${tag(`data-ns="${ns}" data-key="home" data-count="false"`)}
     <span id="short" data-edgecount data-abbreviated="true"></span>
     <span id="long" data-edgecount></span>`,
  );
  const page = await browser.browser.newPage();
  try {
    await page.goto(host.origin);
    await page.waitForFunction(
      () => document.getElementById("short")?.textContent === "12.3k",
    );
    expect(await page.textContent("#long")).toBe("12,345");
  } finally {
    await page.close();
  }
});

it("counts the visitor with data-unique and shows today's views and visitors", async () => {
  await clearOfMidnight(["UTC"], 30_000);
  const ns = freshNamespace("visitors");
  // Another visitor came before: today's views are 2 after this one, its visitors 2.
  await service.fetch(`/v1/counters/${ns}/home/incr?unique=1`, {
    method: "POST",
    headers: { "cf-connecting-ip": "192.0.2.50", "user-agent": "Other" },
  });
  const host = await site(
    `<!doctype html><title>home</title>${tag(`data-ns="${ns}" data-key="home" data-unique="true"`)}
     <span id="today" data-edgecount data-period="today"></span>
     <span id="visitors" data-edgecount data-period="7d" data-unique="true"></span>`,
  );
  const page = await browser.browser.newPage();
  const counts: string[] = [];
  page.on("request", (request) => {
    if (request.url().includes("/incr")) counts.push(request.url());
  });
  try {
    await page.goto(host.origin);
    await page.waitForFunction(
      () =>
        document.getElementById("today")?.textContent === "2" &&
        document.getElementById("visitors")?.textContent === "2",
    );
    // Shown here, the count was acknowledged before the page read its days.
    expect(counts).toEqual([
      `${service.url}/v1/counters/${ns}/home/incr?unique=1`,
    ]);
    // The same browser again: a view more, and the same visitor.
    await page.reload();
    await page.waitForFunction(
      () =>
        document.getElementById("today")?.textContent === "3" &&
        document.getElementById("visitors")?.textContent === "2",
    );
  } finally {
    await page.close();
  }
});

/** The page's counter as its tag shows it, once the view's count has answered. */
async function viewOf(ns: string, path: string) {
  const host = await site(
    `<!doctype html><meta charset="utf-8"><title>path</title>${tag(`data-ns="${ns}"`)}
     <span id="views" data-edgecount></span>`,
  );
  const page = await browser.browser.newPage();
  try {
    const counted = page.waitForResponse((r) => r.url().includes("/incr"));
    await page.goto(`${host.origin}${path}`);
    const answer = await counted;
    expect(answer.status(), await answer.text()).toBe(200);
    await page.waitForFunction(
      () => document.getElementById("views")?.textContent === "1",
    );
    return new URL(answer.url()).pathname;
  } finally {
    await page.close();
  }
}

/** The keys the export lists in `ns`. */
async function exportedKeys(ns: string): Promise<string[]> {
  const answer = await service.fetch(`/v1/export?ns=${ns}`);
  return (await answer.text())
    .split("\n")
    .filter(Boolean)
    .map((line) => JSON.parse(line))
    .filter((line) => line.key !== undefined)
    .map((line) => line.key);
}

it("counts a page at a 40-character CJK path under the path as it reads", async () => {
  const ns = freshNamespace("cjk");
  const path = `/文章/${"東京の春と桜の花".repeat(4)}東京の春と桜`;
  expect(path.match(/[^\x00-\x7f]/gu)).toHaveLength(40);
  // Chromium percent-encodes the path, as every link to it does.
  await viewOf(ns, encodeURI(path));
  expect(await strong(ns, path)).toBe(1);
  expect(await exportedKeys(ns)).toEqual([path]);
  const read = await service.fetch(
    `/v1/counters/${ns}/${encodeURIComponent(path)}`,
  );
  expect((await read.json()).key).toBe(path);
});

it("counts a page whose path is too long for a key under its cut and hash", async () => {
  const ns = freshNamespace("long");
  const path = `/docs/${"chapter-".repeat(40)}end`;
  expect(Buffer.byteLength(path)).toBeGreaterThan(256);
  const key = pathKey(path);
  // The rule of docs/browser.md: the path's first 239 bytes, `~`, 16 hex digits of its hash.
  expect(key).toBe(`${path.slice(0, 239)}~${key.slice(-16)}`);
  expect(key).toMatch(/~[0-9a-f]{16}$/);
  expect(Buffer.byteLength(key)).toBe(256);
  await viewOf(ns, path);
  expect(await strong(ns, key)).toBe(1);
  expect(await exportedKeys(ns)).toEqual([key]);
});

it("cuts a long path between two characters, as the client does", async () => {
  const ns = freshNamespace("long-cjk");
  // 3 bytes a character after the `/`: byte 239 falls inside the 80th.
  const path = `/${"章节".repeat(60)}`;
  const key = pathKey(path);
  const cut = key.slice(0, -17);
  expect(path.startsWith(cut)).toBe(true);
  expect(Buffer.byteLength(cut)).toBe(238);
  await viewOf(ns, encodeURI(path));
  expect(await exportedKeys(ns)).toEqual([key]);
});
