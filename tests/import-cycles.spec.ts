// The check `make test` runs over the Rust sources (scripts/check-import-cycles.py): it passes
// on this tree and fails on files that use each other, directly, through a third, or between
// a module and the file it declares.
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { expect, it } from "vitest";

function check(...roots: string[]): { code: number; out: string } {
  try {
    const out = execFileSync(
      "python3",
      ["scripts/check-import-cycles.py", ...roots],
      { encoding: "utf8" },
    );
    return { code: 0, out };
  } catch (error) {
    const failed = error as { status: number; stdout: string };
    return { code: failed.status, out: failed.stdout };
  }
}

function tree(files: Record<string, string>): string {
  const root = mkdtempSync(join(tmpdir(), "edgecount-cycles-"));
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(join(root, path, ".."), { recursive: true });
    writeFileSync(join(root, path), text);
  }
  return root;
}

it("passes on the project's sources", () => {
  expect(check()).toMatchObject({ code: 0 });
});

it("finds files that use each other, through others, and a module and its child", () => {
  const cases: Record<string, string>[] = [
    {
      "lib.rs": "mod a;\nmod b;\n",
      "a.rs": "use crate::b::Thing;\n",
      "b.rs": "pub struct Thing;\nfn f() { crate::a::g(); }\n",
    },
    {
      "lib.rs": "mod a;\nmod b;\nmod c;\n",
      "a.rs": "use crate::b::{x, y::{z}};\n",
      "b.rs": "use crate::c::Z;\n",
      "c.rs": "use crate::a;\n",
    },
    {
      // Paths in code after what could throw a reader off: a `//` in a string, a quote in a
      // character literal and in a raw string, a nested comment, an item only tests build.
      "lib.rs": "mod a;\nmod b;\n",
      "a.rs": "use crate::b::Thing;\n",
      "b.rs": [
        "pub struct Thing;",
        'const URL: &str = "https://example.com";',
        "const QUOTE: char = '\"';",
        'const RAW: &str = r#"say "hi" // "#;',
        "/* outer /* inner */ still a comment */",
        "#[cfg(test)]",
        "fn helper() { let _ = 1; }",
        "fn f<'a>(x: &'a str) { crate::a::g(x); }",
      ].join("\n"),
    },
    {
      // A test-only variant ends at its comma, not at the next body.
      "lib.rs": "mod a;\nmod b;\n",
      "a.rs": "use crate::b::Thing;\n",
      "b.rs":
        "pub struct Thing;\nenum E { #[cfg(test)] A, B }\nfn f() { crate::a::g(); }\n",
    },
    {
      "lib.rs": "mod http;\n",
      "http/mod.rs":
        "mod handlers;\npub struct Call;\nfn f() { handlers::run(); }\n",
      "http/handlers.rs": "use super::Call;\npub fn run() {}\n",
    },
  ];
  for (const files of cases) {
    const root = tree(files);
    try {
      const { code, out } = check(root);
      expect(code, JSON.stringify(files)).toBe(1);
      expect(out).toContain("these files use each other");
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  }
  // A test module's uses are not the file's.
  const tested = tree({
    "lib.rs": "mod a;\nmod b;\n",
    "a.rs": "use crate::b::Thing;\n",
    "b.rs": "pub struct Thing;\n#[cfg(test)]\nmod tests { use crate::a; }\n",
  });
  try {
    expect(check(tested).code).toBe(0);
  } finally {
    rmSync(tested, { recursive: true, force: true });
  }
});
