import { defineConfig } from "vitest/config";

// Each spec starts the built worker (build/) in workerd through Miniflare; see tests/service.ts.
// The browser client's tests (client/test) are unit tests plus one file against the same worker.
export default defineConfig({
  test: {
    include: ["tests/**/*.spec.ts", "client/test/**/*.test.ts"],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // Two spec files at a time, one per core: most of a spec's time is waiting (timers,
    // workerd starting and stopping), and every spec uses its own ports and state.
    fileParallelism: true,
    maxWorkers: 2,
    // Spec files share one module cache: each would otherwise load wrangler and Miniflare
    // again, about a second apiece. No module of the specs keeps state between files.
    isolate: false,
  },
});
