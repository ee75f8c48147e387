// Drives Debian's Chromium (headless) with playwright-core for the specs that need a real
// browser: CORS as browsers enforce it, and the demo page. Also serves throwaway pages from a
// second origin, so a page can call the API cross-origin.
import { createServer, type Server } from "node:http";
import { chromium, type Browser } from "playwright-core";

/** Where Debian installs Chromium (`apt-get install chromium`; scripts/bootstrap.sh does). */
export const CHROMIUM = process.env.EDGECOUNT_CHROMIUM ?? "/usr/bin/chromium";

export interface HeadlessBrowser {
  browser: Browser;
  close(): Promise<void>;
}

/** Starts headless Chromium (Playwright gives it a fresh temporary profile) with no calls to
 * the outside world. */
export async function launchBrowser(): Promise<HeadlessBrowser> {
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
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
  return {
    browser,
    async close() {
      await browser.close();
    },
  };
}

export interface PageHost {
  /** The origin pages are served from, e.g. `http://127.0.0.1:40001`. */
  origin: string;
  close(): Promise<void>;
}

/** Serves `html` at every path from a free loopback port: a site of its own origin. */
export async function hostPage(html: string): Promise<PageHost> {
  const server: Server = createServer((_, res) => {
    res.writeHead(200, { "content-type": "text/html; charset=utf-8" });
    res.end(html);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  if (!address || typeof address === "string") throw new Error("no port");
  return {
    origin: `http://127.0.0.1:${address.port}`,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}
