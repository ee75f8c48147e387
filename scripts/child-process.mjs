// What the Node scripts that run their own `workerd` share: a port to serve it on and a way to
// be sure it has ended. A runtime left behind keeps its port, so the next one cannot bind it,
// and a caller can end up measuring the old one; it also keeps its output open, and whoever
// waits for that to close waits forever.
import { spawn } from "node:child_process";
import { createServer } from "node:net";

/** Ends `child` and waits for it: SIGTERM, then SIGKILL after 5 s (workerd does not always end
 * on SIGTERM, notably with an inspector attached). */
export async function stopProcess(child) {
  if (!child || child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once("exit", resolve));
  child.kill("SIGTERM");
  const timer = setTimeout(() => child.kill("SIGKILL"), 5_000);
  await exited;
  clearTimeout(timer);
}

/** A port the kernel has just handed out as free (the test suite runs servers of its own). */
export function freePort() {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.on("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

/** Runs `command` with `args` to its end (its output to this one's standard error); rejects
 * when it exits with another status than 0. */
export function run(command, args) {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, {
      stdio: ["ignore", "ignore", "inherit"],
    });
    child.on("exit", (code) =>
      code === 0 ? resolve() : reject(new Error(`${command} exited ${code}`)),
    );
  });
}

/** Waits until `url` answers 2xx, for at most about 10 s. */
export async function waitUntilUp(url) {
  for (let attempt = 0; attempt < 100; attempt++) {
    try {
      if ((await fetch(url)).ok) return;
    } catch {
      // not listening yet
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`workerd did not answer ${url}`);
}
