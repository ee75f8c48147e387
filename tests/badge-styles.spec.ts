// Badges in the four styles (`?style=flat|flat-square|plastic|for-the-badge`), in Chromium:
// each is well-formed XML, and each text stays inside its box, with at least a pixel to spare,
// for narrow, wide, symbol, long, non-Latin and emoji labels and the widest values, as the
// browser measures the text with the fonts this machine has. Also the abbreviated value and
// the label colour.
import { afterAll, beforeAll, expect, it } from "vitest";
import { launchBrowser, type HeadlessBrowser } from "./browser";
import { freshNamespace, startService, type Service } from "./service";

let service: Service;
let browser: HeadlessBrowser;

beforeAll(async () => {
  service = await startService();
  browser = await launchBrowser();
});

afterAll(async () => {
  await browser?.close();
  await service?.stop();
});

const STYLES = ["flat", "flat-square", "plastic", "for-the-badge"];
const LABELS = [
  "views",
  "MWMWMWMWMW",
  "OOOO QQQQ GGGG DDDD CCCC",
  "@@@@ %%%% #### ==== ~~~~",
  "page views of the whole site",
  "iiii llll ||||",
  "ümlaut ñ 日本語 👍",
  "👍".repeat(64),
  "W".repeat(64),
];

it("keeps every text inside its box in every style, as Chromium measures it", async () => {
  const ns = freshNamespace("badge-styles");
  const set = async (key: string, value: string) => {
    const answer = await service.fetch(`/v1/counters/${ns}/${key}`, {
      method: "PUT",
      headers: { "content-type": "application/json" },
      body: `{"value": ${value}}`,
    });
    expect(answer.status).toBe(200);
  };
  await set("zero", "0");
  await set("wide", "-9223372036854775808");
  await set("many", "8888888888888888888");
  const page = await browser.browser.newPage();
  try {
    let checked = 0;
    for (const style of STYLES)
      for (const label of LABELS)
        for (const key of ["zero", "wide", "many"]) {
          const answer = await service.fetch(
            `/v1/badge/${ns}/${key}.svg?style=${style}&label=${encodeURIComponent(label)}`,
          );
          expect(answer.status).toBe(200);
          const svg = await answer.text();
          // Well-formed XML, as an <img> needs it: the HTML parser below would forgive.
          const parseError = await page.evaluate(
            (text) =>
              new DOMParser()
                .parseFromString(text, "image/svg+xml")
                .querySelector("parsererror")?.textContent ?? null,
            svg,
          );
          expect(parseError, `${style}, ${JSON.stringify(label)}`).toBeNull();
          await page.setContent(`<body style="margin:0">${svg}</body>`);
          // The two boxes (label, value) and the texts shown over them (not the shadows).
          const fits = await page.evaluate(() => {
            const boxes = [
              ...document.querySelectorAll("g[clip-path] rect[fill]"),
            ]
              .slice(0, 2)
              .map((rect) => rect.getBoundingClientRect());
            const texts = [
              ...document.querySelectorAll("text:not([aria-hidden])"),
            ].map((text) => text.getBoundingClientRect());
            return texts.map((text, i) => ({
              left: text.left - boxes[i].left,
              right: boxes[i].right - text.right,
            }));
          });
          expect(fits).toHaveLength(2);
          for (const [i, fit] of fits.entries())
            expect(
              Math.min(fit.left, fit.right),
              `${style}, ${JSON.stringify(label)}, ${key}: ${i === 0 ? "label" : "value"}`,
            ).toBeGreaterThanOrEqual(1);
          checked++;
        }
    expect(checked).toBe(STYLES.length * LABELS.length * 3);
  } finally {
    await page.close();
  }
}, 120_000);

it("abbreviates the value and takes the label colour when asked", async () => {
  const ns = freshNamespace("badge-short");
  await service.fetch(`/v1/counters/${ns}/k`, {
    method: "PUT",
    headers: { "content-type": "application/json" },
    body: `{"value": 12345}`,
  });
  const svg = await (
    await service.fetch(
      `/v1/badge/${ns}/k.svg?abbreviated=1&labelColor=blue&color=orange&style=for-the-badge`,
    )
  ).text();
  expect(svg).toContain(">12.3K<");
  expect(svg).toContain('fill="#007ec6"');
  expect(svg).toContain('fill="#fe7d37"');
  expect(svg).toContain("<title>views: 12.3k</title>");
  const refused = await service.fetch(`/v1/badge/${ns}/k.svg?style=social`);
  expect(refused.status).toBe(400);
  expect((await refused.json()).error.message).toContain("style");
  const badColour = await service.fetch(
    `/v1/badge/${ns}/k.svg?label_color=nope`,
  );
  expect(badColour.status).toBe(400);
  expect((await badColour.json()).error.message).toContain("label_color");
});
